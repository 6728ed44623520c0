"""A GPU or a link as a scenario names it: a preset (dpsim.hardware) or an inline table, checked
and resolved into hardware.GPU or hardware.Link."""
import math

from . import hardware, limits
from .errors import ScenarioError


def number(value, key, positive=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ScenarioError(key, f"expected a finite number, got {value!r}")
    limits.in_range(key, value)
    if positive and not value > 0:
        raise ScenarioError(key, f"must be > 0, got {value!r}")
    if not positive and value < 0:
        raise ScenarioError(key, f"must be >= 0, got {value!r}")
    return float(value)


def _inline(table, key, required, optional):
    allowed = (*required, *optional)
    for k in table:
        if k not in allowed:
            raise ScenarioError(f"{key}.{k}", f"unknown key; allowed: {', '.join(allowed)}")
    for k in required:
        if k not in table:
            raise ScenarioError(f"{key}.{k}", "missing; an inline table needs " + ", ".join(required))


def resolve_gpu(value, key="cluster.gpu") -> hardware.GPU:
    if isinstance(value, str):
        if value not in hardware.GPUS:
            raise ScenarioError(key, f"unknown GPU {value!r}; choose one of: {', '.join(hardware.GPUS)}")
        return hardware.GPUS[value]
    if isinstance(value, dict):
        _inline(value, key, ("fp32_tflops", "mem_bw_gbs"), ("fp16_tflops", "name", "source", "memory_gb"))
        fp32 = number(value["fp32_tflops"], f"{key}.fp32_tflops")
        fp16 = number(value.get("fp16_tflops", fp32), f"{key}.fp16_tflops")
        memory = number(value["memory_gb"], f"{key}.memory_gb") if "memory_gb" in value else 0.0
        return hardware.GPU(str(value.get("name", "custom")), fp32, fp16,
                            number(value["mem_bw_gbs"], f"{key}.mem_bw_gbs"),
                            str(value.get("source", "given inline in the scenario")), memory,
                            "given inline in the scenario" if memory else "")
    raise ScenarioError(key, f"expected a GPU preset name or an inline table, got {value!r}")


def resolve_link(value, key) -> hardware.Link:
    if isinstance(value, str):
        if value not in hardware.LINKS:
            raise ScenarioError(key, f"unknown link {value!r}; choose one of: {', '.join(hardware.LINKS)}")
        return hardware.LINKS[value]
    if isinstance(value, dict):
        _inline(value, key, (), ("bandwidth_gbs", "latency_us", "kind", "name", "source", "links", "efficiency",
                                 "preset"))
        base = resolve_link(value["preset"], f"{key}.preset") if "preset" in value else None
        for k in ("bandwidth_gbs", "latency_us"):
            if base is None and k not in value:
                raise ScenarioError(f"{key}.{k}", "missing; an inline table needs bandwidth_gbs and latency_us "
                                    "(or a preset to start from)")
        kind = value.get("kind", base.kind if base else "pcie")
        if kind not in hardware.LINK_KINDS:
            raise ScenarioError(f"{key}.kind", f"unknown kind {kind!r}; choose one of: {', '.join(hardware.LINK_KINDS)}")
        links = value.get("links", base.links if base else 0)
        if isinstance(links, bool) or not isinstance(links, int) or links < 0:
            raise ScenarioError(f"{key}.links", f"expected a whole number of links per GPU, got {links!r}")
        # A bandwidth given inline is what the link reaches (a measurement: course calibrate's),
        # unless the table says otherwise; a preset keeps its kind's efficiency.
        efficiency = number(value["efficiency"], f"{key}.efficiency") if "efficiency" in value else \
            (base.efficiency if base and "bandwidth_gbs" not in value else 1.0)
        if efficiency > 1:
            raise ScenarioError(f"{key}.efficiency", f"achievable / nominal is at most 1, got {efficiency!r}")
        return hardware.Link(str(value.get("name", base.name if base else "custom")), kind,
                             number(value["bandwidth_gbs"], f"{key}.bandwidth_gbs") if "bandwidth_gbs" in value
                             else base.bandwidth_gbs,
                             number(value["latency_us"], f"{key}.latency_us", positive=False) if "latency_us" in value
                             else base.latency_us,
                             str(value.get("source", base.source if base else "given inline in the scenario")),
                             links, efficiency)
    raise ScenarioError(key, f"expected a link preset name or an inline table, got {value!r}")
