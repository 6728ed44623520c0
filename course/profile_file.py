"""The profile's files: the TOML dpsim reads and the JSON sidecar of what was measured,
written as a pair (course.calibrate writes them; course.repredict and tests read them)."""
import json
from pathlib import Path

from dpsim.bands import dotted


def to_toml(d, prefix=""):
    """A flat-enough dict as TOML: top-level strings, then one table per section, then each
    list of tables (the profile's samples) as [[name]] tables of dotted keys."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    def tables(v):
        return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)
    lines = [f"{k} = {value(v)}" for k, v in d.items() if not isinstance(v, dict) and not tables(v)]
    for section, table in d.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"] + [f"{k} = {value(v)}" for k, v in table.items()]
    for name, items in d.items():
        if tables(items):
            for item in items:
                lines += ["", f"[[{name}]]"] + [f"{k} = {value(v)}" for k, v in dotted(item).items()]
    return "\n".join(lines) + "\n"


def sidecar(path):
    return Path(path).with_suffix(".measured.json")


def write_pair(out, profile_text, sidecar_text):
    """The profile and its sidecar, each under a temporary name until both are complete, then
    renamed one right after the other (dpsim.files.writing): Ctrl-C leaves the old pair."""
    from dpsim.files import writing
    with writing(sidecar(out), flag="-o") as side, writing(out, flag="-o") as profile:
        profile.write(profile_text)
        side.write(sidecar_text)
