"""`dpsim validate`: dpsim's predictions beside published measurements (dpsim/published.toml).

Every case there is one published figure with its hardware and source. Its `[case.dpsim]` table
says how dpsim expresses that hardware with the presets as shipped (a node preset such as
dgx-a100, or GPU, intra- and inter-node link, host link and NICs per node; nodes; model and
per-GPU batch for training cases), or `skip = "why not"`
where it cannot (a GPU with no preset, NVLink SHARP, an unstated network).

What is predicted, per kind of case:
  allreduce_busbw     one all-reduce of message_bytes (1 GiB where the case gives none) as one
                      bucket, without overlap, strategy ring unless the table names another,
                      timed alone (dpsim.collective_time): bus bandwidth = 2(n-1)/n x bytes / time,
                      as nccl-tests reports it. Each step's chunk is pipelined in segments of
                      NCCL_SEGMENT_MIB (sync.segment_mib), as NCCL's kernels do. Within
                      tolerance: predicted/published in 0.85-1.15.
  scaling_efficiency  throughput on all the case's GPUs / (GPUs x throughput on one), from
                      simulate(); within 10 percentage points of the published figure.
  speedup             throughput on all GPUs / throughput on one, from simulate(); within 15%
                      (no tolerance is stated for speed-ups: the bandwidth's is used).
  memory_per_gpu      GB per GPU of the model states, dpsim.memory's parameters + gradients +
                      optimizer state for a custom model of model_params parameters (no
                      simulation); within 15%.
Training cases keep dpsim's defaults for everything the table does not set (synthetic data,
compute at 0.6 of peak, 25 MiB buckets overlapping backward). All cases take about a second.

`why_off` in a case's table is the reason, read off dpsim's model, that a case it can express
is outside the tolerance; the table prints it in the last column (a skipped case: its skip).
"""
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from . import config, memory
from .collective import collective_time, one_bucket
from .errors import ScenarioError
from .simulation import simulate

PUBLISHED = Path(__file__).with_name("published.toml")
GIB = 2 ** 30
RELATIVE_TOLERANCE = 0.15          # for bus bandwidth and speed-up
EFFICIENCY_POINTS = 10.0           # percentage points, for scaling efficiency
CLUSTER_KEYS = ("node", "gpu", "intra", "inter", "host_link", "gpus_per_pcie_switch", "nics_per_node", "gpudirect")
# NCCL moves a ring step through a 4 MiB buffer per channel (NCCL_BUFFSIZE's default, NCCL's
# environment-variable documentation) in NCCL_STEPS = 8 slots (src/include/device.h), so a
# receiver reduces 512 KiB slices while the next ones arrive.
NCCL_SEGMENT_MIB = 0.5


def load_cases(path=PUBLISHED) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["case"]


def _count(case, key) -> int:
    """nodes or gpus_per_node: the dpsim table's, else the source's when it states an integer."""
    value = case["dpsim"].get(key, case["hardware"][key])
    if not isinstance(value, int):
        raise ScenarioError(f"{case['name']}.dpsim.{key}", f"the source gives {value!r}; set an integer in [case.dpsim]")
    return value


def scenario(case) -> dict | None:
    """The dpsim scenario (a dict for config.load_scenario) of a case; None when it is skipped."""
    d = case["dpsim"]
    if "skip" in d:
        return None
    cluster = {"nodes": _count(case, "nodes"), "gpus_per_node": _count(case, "gpus_per_node"),
               **{k: d[k] for k in CLUSTER_KEYS if k in d}}
    sc = {"name": case["name"], "description": case["what"], "source": case["source"], "cluster": cluster,
          "sync": {"strategy": d.get("strategy", "ring")}}
    if case["what"] == "allreduce_busbw":
        return config.apply_overrides(sc, {**one_bucket(case.get("message_bytes", GIB)),
                                           "sync.segment_mib": NCCL_SEGMENT_MIB})
    if case["what"] == "memory_per_gpu":
        return {**sc, "model": {"params": d["model_params"], "flops_per_sample": 1.0},
                "compute": {"precision": d["precision"]}, "training": {"optimizer": d["optimizer"]}}
    sc["model"] = {"preset": d["model"]}
    sc["compute"] = {"precision": d.get("precision", "fp32")}
    sc["training"] = {"batch_per_gpu": d["batch"]}
    return sc


def predict(case) -> float:
    """dpsim's figure for a case, in the case's unit (GB/s, %, x)."""
    sc = config.load_scenario(scenario(case))
    if case["what"] == "allreduce_busbw":
        n, nbytes = sc.gpus, case.get("message_bytes", GIB)
        return 2 * (n - 1) / n * nbytes / collective_time(sc, nbytes) / 1e9
    if case["what"] == "memory_per_gpu":
        held = memory.per_gpu(sc)
        return (held["parameters"] + held["gradients"] + held["optimizer_state"]) / 1e9
    res = simulate(sc)
    return {"scaling_efficiency": 100 * res.scaling_efficiency, "speedup": res.speedup}[case["what"]]


@dataclass
class Row:
    name: str
    what: str
    unit: str
    published: float
    predicted: float | None       # None: not expressible in dpsim
    off: float | None             # predicted/published, or predicted - published in points
    within: bool | None
    reason: str                   # skip reason, why_off for a miss, else ""
    source: str

    def to_dict(self) -> dict:
        return asdict(self)


def compare(case) -> Row:
    d, published = case["dpsim"], case["value"]
    if "skip" in d:
        return Row(case["name"], case["what"], case["unit"], published, None, None, None, d["skip"], case["source"])
    predicted = predict(case)
    if case["what"] == "scaling_efficiency":
        off = predicted - published
        within = abs(off) <= EFFICIENCY_POINTS
    else:
        off = predicted / published
        within = abs(off - 1) <= RELATIVE_TOLERANCE
    return Row(case["name"], case["what"], case["unit"], published, predicted, off, within,
               "" if within else d.get("why_off", ""), case["source"])


def validate(names=None, cases=None) -> list[Row]:
    """Every case (or those named) of `cases` (default: published.toml's), compared; an
    unknown name raises ScenarioError listing them."""
    cases = load_cases() if cases is None else cases
    known = [c["name"] for c in cases]
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        raise ScenarioError("--case", f"unknown case {', '.join(map(repr, unknown))}; choose from: {', '.join(known)}")
    return [compare(c) for c in cases if not names or c["name"] in names]


def summary(rows) -> str:
    compared = [r for r in rows if r.predicted is not None]
    return (f"{sum(r.within for r in compared)} of {len(compared)} cases within tolerance, "
            f"{len(rows) - len(compared)} not expressible")


def describe(case) -> str:
    """One line: the scenario dpsim runs for a case (for --verbose)."""
    if "skip" in case["dpsim"]:
        return "not run"
    sc = config.load_scenario(scenario(case))
    c = sc.cluster
    nics = f", {c.inter} between ({c.nics_per_node} NIC{'s' if c.nics_per_node > 1 else ''} per node, " \
        f"GPUDirect {c.gpudirect})"
    where = (f"{c.node}: " if c.node else "") + f"{c.nodes} x {c.gpus_per_node} {c.gpu}, {c.intra} inside" + (nics if c.nodes > 1 else "")
    if case["what"] == "allreduce_busbw":
        work = f"{sc.sync.strategy} all-reduce of {case.get('message_bytes', GIB) / GIB:g} GiB"
    else:
        work = f"{sc.model.preset}, batch {sc.training.batch_per_gpu} {sc.compute.precision}, {sc.sync.strategy}"
    return f"{where}, host link {c.host_link}; {work}"


SHORT = {"allreduce_busbw": "busbw", "scaling_efficiency": "efficiency", "speedup": "speed-up",
         "relative_throughput": "relative", "memory_per_gpu": "memory"}


def format_off(row) -> str:
    if row.off is None:
        return "-"
    return f"{row.off:+.1f} pts" if row.what == "scaling_efficiency" else f"x{row.off:.2f}"


def table(rows) -> list[str]:
    """The printed table: one line per case, columns aligned, the reason last."""
    head = ("case", "what", "published", "dpsim", "off", "ok", "reason (skipped) / why off (missed)")
    body = [(r.name, SHORT.get(r.what, r.what), f"{r.published:g} {r.unit.split()[0]}",
             "-" if r.predicted is None else f"{r.predicted:.3g}", format_off(r),
             {True: "yes", False: "NO", None: "-"}[r.within], r.reason) for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head) - 1)]
    aligned = lambda i, cell: f"{cell:<{widths[i]}}" if i < 2 or i == 5 else f"{cell:>{widths[i]}}"
    return ["  ".join([*(aligned(i, cell) for i, cell in enumerate(line[:-1])), line[-1]]).rstrip()
            for line in [head, *body]]
