"""Overrides: `--set KEY=VALUE` pairs parsed, and dotted keys ("sync.strategy") set in a
scenario's dict. dpsim.config validates the result."""
import tomllib

from .errors import ScenarioError
from .sections import SECTIONS, TOP_LEVEL


def parse_value(text: str):
    """A --set value: TOML syntax (numbers, true/false, "strings", {inline tables}), else a bare string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):
        return text


def parse_sets(pairs) -> dict:
    """--set KEY=VALUE pairs (repeatable) -> {KEY: value}, values as parse_value reads them."""
    out = {}
    for pair in pairs or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ScenarioError("--set", f"expected section.key=value, got {pair!r}")
        out[key.strip()] = parse_value(value.strip())
    return out


def apply_overrides(data: dict, overrides: dict) -> dict:
    """Set dotted keys ("sync.strategy") in a copy of a scenario dict."""
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
            for custom_key in ("params", "flops_per_sample", "layers"):     # a preset replaces a custom model
                table.pop(custom_key, None)
        if section == "model" and key in ("params", "flops_per_sample"):
            table["preset"] = "custom"                                       # and the other way round
        table[key] = value
    return out
