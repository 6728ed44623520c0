"""The one exception a user's mistake raises; the CLI turns it into one line and exit code 2."""


class ScenarioError(ValueError):
    """A bad scenario: unknown key, preset or strategy, wrong type, out-of-range value."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)
