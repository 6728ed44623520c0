"""Overrides: `--set KEY=VALUE` pairs parsed, and dotted keys ("sync.strategy") set in a
scenario's dict. dpsim.config validates the result."""
import sys
import tomllib

from . import limits
from .errors import ScenarioError
from .files import printable
from .sections import SECTIONS, TOP_LEVEL


def parse_value(text: str, key: str = "--set"):
    """A --set value: TOML syntax (numbers, true/false, "strings", {inline tables}), else a bare
    string. Integers are bounded (limits.check_numbers) before anything formats them."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text
    except ValueError:                   # an integer of more digits than Python reads from text
        raise ScenarioError(key, f"an integer of more than {sys.get_int_max_str_digits():,} digits; "
                                 "no key allows that many") from None
    limits.check_numbers(key, value)
    return value


def parse_sets(pairs) -> dict:
    """--set KEY=VALUE pairs (repeatable) -> {KEY: value}, values as parse_value reads them."""
    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ScenarioError("--set", f"expected section.key=value, got '{printable(pair, 80)}'")
        out[key.strip()] = parse_value(value.strip(), key.strip())
    return out


def apply_overrides(data: dict, overrides: dict) -> dict:
    """Set dotted keys ("sync.strategy") in a copy of a scenario dict; every integer bounded."""
    if isinstance(data, dict):
        limits.check_numbers("", data)
    limits.check_numbers("", dict(overrides or {}))
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if not key:
            if section not in TOP_LEVEL:
                raise ScenarioError(dotted, f"expected section.key (sections: {', '.join(SECTIONS)})")
            out[section] = value
            continue
        if section not in SECTIONS:
            raise ScenarioError(dotted, f"unknown section {section!r}; choose one of: {', '.join(SECTIONS)}")
        table = out.setdefault(section, {})
        if not isinstance(table, dict):
            raise ScenarioError(section, f"expected a table, got {table!r}")
        if section == "model" and key == "preset" and value != "custom":
            for custom_key in ("params", "flops_per_sample", "layers", "matrices"):   # a preset replaces a custom model
                table.pop(custom_key, None)
        if section == "model" and key in ("params", "flops_per_sample"):
            table["preset"] = "custom"                                       # and the other way round
        table[key] = value
    return out
