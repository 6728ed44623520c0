"""The one exception a user's mistake raises; the CLI turns it into one line and exit code 2."""


class ScenarioError(ValueError):
    """A bad scenario: unknown key, preset or strategy, wrong type, out-of-range value."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"{key}: {message}" if key else message)


FIGURES = (".png", ".pdf", ".svg")     # the formats every --plot writes (matplotlib picks it by suffix)


def check_output_path(path, flag: str, suffixes=None):
    """Before any work: `path` can be written as given (its folder exists, it is not a folder,
    and, for figures, its extension names a format we write). Nothing is renamed or added."""
    from pathlib import Path
    if "\x00" in str(path):
        raise ScenarioError(flag, f"{path!r} contains a NUL byte; no file can have that name")
    p = Path(path)
    if p.is_dir():
        raise ScenarioError(flag, f"{path!r} is a directory; give a file name")
    if not p.resolve().parent.is_dir():
        raise ScenarioError(flag, f"no directory to write {path!r} into")
    if suffixes and p.suffix.lower() not in suffixes:
        raise ScenarioError(flag, f"{path!r}: give a file name ending in {', '.join(suffixes)}")
