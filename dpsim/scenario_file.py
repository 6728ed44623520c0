"""A scenario written back as a TOML file that `load_scenario` reads to the same scenario.

`dpsim show NAME > my.toml` is how a user starts a scenario of their own: every default filled
in, the choices worth knowing as `# note:` comments, and nothing that `dpsim run my.toml` would
read differently. The TOML is written by tomli-w, the writer that pairs with Python's tomllib.
"""
import tomli_w

from .config import SECTIONS, Scenario, notes


def _toml_values(value):
    """The value as TOML can hold it: TOML has no null, so keys set to None are left out
    (loading fills the same default again); tuples become arrays."""
    if isinstance(value, dict):
        return {k: _toml_values(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_toml_values(v) for v in value]
    return value


def to_toml(sc: Scenario) -> str:
    """The scenario as a TOML document: name, description and source, then one table per section."""
    data = _toml_values(sc.to_dict())
    top = {k: data[k] for k in ("name", "description", "source") if k in data}
    tables = {k: data[k] for k in SECTIONS if k in data}
    comments = "".join(f"# note: {note}\n" for note in notes(sc))
    return comments + tomli_w.dumps({**top, **tables}, multiline_strings=True)
