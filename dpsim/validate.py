"""`dpsim validate`: dpsim's predictions beside published measurements (dpsim/published.toml).

Every case there is one published figure with its hardware and source. Its `[case.dpsim]` table
says how dpsim expresses that hardware (a node preset such as dgx-a100, or GPU, intra- and
inter-node link, host link and NICs per node; nodes; model and per-GPU batch for training
cases; any scenario key by name: transport, framework, ps_pull, ...). Every case is expressed:
where the source is silent, `assumes` says what dpsim takes instead.

A case's `role` is "predicted" (counted in the score) or "default" (its figure is the one that
set a dpsim default, e.g. a transport's efficiency; shown and not scored).

What is predicted, per kind of case:
  allreduce_busbw     one all-reduce of message_bytes (1 GiB where the case gives none) as one
                      bucket, without overlap, by the strategy the table names, else by the
                      algorithm NCCL's own tuning model picks for that message on the case's
                      link and NICs (dpsim.nccl_tuning: a tree on 2 nodes of fast-linked GPUs
                      with few NICs, a ring otherwise), timed alone (dpsim.collective_time,
                      with NCCL's fixed cost per call, software.NCCL_CALL_US): bus
                      bandwidth = 2(n-1)/n x bytes / time, as nccl-tests reports it. Each step's
                      chunk is pipelined in segments of NCCL_SEGMENT_MIB (sync.segment_mib), as
                      NCCL's kernels do. Within tolerance: predicted/published in 0.75-1.25.
  scaling_efficiency  throughput on all the case's GPUs / (GPUs x throughput on base_gpus, 1 unless
                      the case says), from simulate(); within 10 percentage points.
  speedup             throughput on all GPUs / throughput on base_gpus; within 25%.
  relative_throughput throughput of the case's scenario / the same with `versus`' overrides
                      (BytePS against a ring, say); within 25%.
  memory_per_gpu      GB per GPU of the model states, dpsim.memory's parameters + gradients +
                      optimizer state for a custom model of model_params parameters (no
                      simulation); within 25%.
Training cases keep dpsim's defaults for everything the table does not set (synthetic data,
25 MiB buckets overlapping backward); their compute comes from a measured one-GPU rate where
ONE_GPU_RATES lists the GPU, model and precision, else from 0.6 of peak.

`why_off` in a case's table is the reason, read off dpsim's model, that a case is outside the
tolerance; the table prints it in the last column.
"""
import dataclasses
import difflib
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from . import config, hardware, memory, nccl_tuning, sections, software
from .collective import collective_time, one_bucket
from .errors import ScenarioError
from .simulation import simulate, with_gpus

PUBLISHED = Path(__file__).with_name("published.toml")
GIB = 2 ** 30
RELATIVE_TOLERANCE = 0.25          # for bus bandwidth, speed-up and relative throughput (issue 27)
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


# [case.dpsim] keys that are about the case, not the scenario.
CASE_KEYS = ("assumes", "why_off", "needs", "base_gpus", "versus", "node", "model", "batch", "precision",
             "strategy", "nodes", "gpus_per_node", "model_params", "optimizer")


def _sections(d) -> dict:
    """Any other key of [case.dpsim] goes to the section that has it (cluster first, then sync,
    training, compute, model): transport, framework, ps_location, accumulation_steps, ..."""
    out = {}
    for k, v in d.items():
        if k in CASE_KEYS:
            continue
        section = next((name for name in ("cluster", "sync", "training", "compute", "model")
                        if k in {f.name for f in dataclasses.fields(sections.SECTIONS[name])}), None)
        if section is None:
            raise ScenarioError(f"[case.dpsim].{k}", "not a case key nor a key of cluster, sync, training, "
                                "compute or model")
        out.setdefault(section, {})[k] = v
    return out


def scenario(case) -> dict:
    """The dpsim scenario (a dict for config.load_scenario) of a case."""
    d = case["dpsim"]
    rest = _sections(d)
    cluster = {"nodes": _count(case, "nodes"), "gpus_per_node": _count(case, "gpus_per_node"),
               **({"node": d["node"]} if "node" in d else {}), **rest.get("cluster", {})}
    sc = {"name": case["name"], "description": case["what"], "source": case["source"], "cluster": cluster,
          "sync": {"strategy": d.get("strategy", "ring"), "call_overhead_us": software.NCCL_CALL_US,
                   **rest.get("sync", {})}}
    if case["what"] == "allreduce_busbw":
        sc = config.apply_overrides(sc, {**one_bucket(case.get("message_bytes", GIB)),
                                         "sync.segment_mib": NCCL_SEGMENT_MIB})
        return sc if "strategy" in d else config.apply_overrides(sc, {"sync.strategy": nccl_algorithm(case, sc)})
    if case["what"] == "memory_per_gpu":
        return {**sc, "model": {"params": d["model_params"], "flops_per_sample": 1.0},
                "compute": {"precision": d["precision"]}, "training": {"optimizer": d["optimizer"]}}
    sc["model"] = {"preset": d["model"]} if isinstance(d["model"], str) else dict(d["model"])
    sc["compute"] = {"precision": d.get("precision", "fp32"), **rest.get("compute", {})}
    sc["training"] = {"batch_per_gpu": d["batch"], **rest.get("training", {})}
    sc["compute"].update(one_gpu_rate(sc))
    return sc


def nccl_algorithm(case, sc: dict) -> str:
    """The all-reduce a busbw case that names no algorithm runs: the one NCCL's tuning model
    (dpsim.nccl_tuning) times faster for the case's message on its GPUs' link and NICs."""
    s = config.load_scenario(sc)
    intra, inter = s.link_spec("intra"), s.link_spec("inter")
    c = s.cluster
    kind = "pcie" if intra.kind == "pcie" else "nvlink"
    chosen = nccl_tuning.pick(case.get("message_bytes", GIB), c.nodes, c.gpus_per_node, intra.achievable_gbs,
                              c.nics_per_node * inter.achievable_gbs, kind)
    return {"ring": "ring", "tree": "double-tree"}[chosen]


# One GPU's measured training rate, (GPU, model, precision) -> (samples/s, batch, source): the
# compute of a training case whose [case.dpsim] gives no compute.samples_per_s comes from here
# when its GPU, model and precision are listed (a single-GPU measurement: it says nothing of
# scaling), else from dpsim's default efficiency.
TFBENCH = "TensorFlow Benchmarks page (tensorflow docs_src/performance/benchmarks.md @5984ffe), 1-GPU synthetic rows"
DLE = "NVIDIA DeepLearningExamples PyTorch ResNet-50 v1.5 README @729963d, 1-GPU rows"
LAMBDA_V100 = ("Lambda TensorFlow benchmark, summary/tf-train-throughput-fp32.csv and tf-train-bs-fp32.csv "
               "@70dcdbd (github.com/LambdaColdStorage/lambda-tensorflow-benchmark), row "
               "Platinum-Tesla_1xV100-SXM3-32GB_HP16_TF2_2_1x: one V100 SXM3, TF 2.2, synthetic")
DLE_BERT = ("NVIDIA DeepLearningExamples PyTorch/LanguageModeling/BERT README @729963d, 'Pre-training NVIDIA "
            "DGX-1 With 32G', 1-GPU row, sequence length 128, mixed precision (64 per step x 64 accumulation steps)")
ONE_GPU_RATES = {
    ("p100", "resnet50", "fp32"): (219, 64, TFBENCH + ", DGX-1 P100"),
    ("p100", "vgg16", "fp32"): (154, 64, TFBENCH + ", DGX-1 P100"),
    ("p100", "inception-v3", "fp32"): (142, 64, TFBENCH + ", DGX-1 P100"),
    ("p100", "alexnet", "fp32"): (2987, 512, TFBENCH + ", DGX-1 P100"),
    ("k80", "resnet50", "fp32"): (52.4, 64, TFBENCH + ", AWS p2.8xlarge"),
    ("k80", "inception-v3", "fp32"): (29.7, 64, TFBENCH + ", AWS p2.8xlarge"),
    ("k80", "vgg16", "fp32"): (36.3, 32, TFBENCH + ", AWS p2.8xlarge"),
    ("v100", "resnet50", "fp32"): (367, 112, DLE + ", DGX-1 V100 16GB FP32"),
    ("v100", "resnet50", "fp16"): (1200, 256, DLE + ", DGX-1 V100 16GB AMP"),
    ("a100", "resnet50", "fp16"): (2470, 256, DLE + ", DGX A100 AMP"),
    ("v100", "vgg16", "fp32"): (249, 192, LAMBDA_V100),
    ("v100", "bert-large", "fp16"): (224, 64, DLE_BERT),
}


def one_gpu_rate(sc: dict) -> dict:
    """compute.samples_per_s and rate_batch from ONE_GPU_RATES for a training scenario (dict)
    that sets none; {} when its GPU, model and precision have no entry."""
    gpu = sc["cluster"].get("gpu") or hardware.NODES.get(sc["cluster"].get("node", ""), {}).get("gpu", "")
    key = (gpu, sc["model"].get("preset"), sc["compute"].get("precision", "fp32"))
    if "samples_per_s" in sc["compute"] or key not in ONE_GPU_RATES:
        return {}
    rate, batch, _ = ONE_GPU_RATES[key]
    return {"samples_per_s": float(rate), "rate_batch": batch}


def _throughput(sc, gpus=None) -> float:
    return simulate(sc if gpus is None else with_gpus(sc, gpus)).throughput_samples_per_s


def predict(case) -> float:
    """dpsim's figure for a case, in the case's unit (GB/s, %, x). Speed-up and efficiency
    are against base_gpus GPUs when the case says so (a node, 8 GPUs), else one GPU;
    relative_throughput is the case's scenario over the same with `versus`' keys changed."""
    d = case["dpsim"]
    sc = config.load_scenario(scenario(case))
    if case["what"] == "allreduce_busbw":
        n, nbytes = sc.gpus, case.get("message_bytes", GIB)
        per_gb = 8 if case["unit"] == "Gbit/s" else 1
        return per_gb * 2 * (n - 1) / n * nbytes / collective_time(sc, nbytes) / 1e9
    if case["what"] == "memory_per_gpu":
        held = memory.per_gpu(sc)
        return (held["parameters"] + held["gradients"] + held["optimizer_state"]) / 1e9
    if case["what"] == "relative_throughput":
        return _throughput(sc) / _throughput(config.load_scenario(sc, d["versus"]))
    base = d.get("base_gpus", 1)
    if base == 1:
        res = simulate(sc)
        return {"scaling_efficiency": 100 * res.scaling_efficiency, "speedup": res.speedup}[case["what"]]
    speedup = _throughput(sc) / _throughput(sc, base)
    return {"scaling_efficiency": 100 * speedup * base / sc.gpus, "speedup": speedup}[case["what"]]


@dataclass
class Row:
    name: str
    what: str
    unit: str
    published: float
    predicted: float | None       # None: not expressible in dpsim
    off: float | None             # predicted/published, or predicted - published in points
    within: bool | None
    reason: str                   # why_off for a miss, else ""
    source: str
    role: str = "predicted"       # "default": the figure set one of dpsim's defaults; not scored

    def to_dict(self) -> dict:
        return asdict(self)


def compare(case) -> Row:
    d, published = case["dpsim"], case["value"]
    predicted = predict(case)
    if case["what"] == "scaling_efficiency":
        off = predicted - published
        within = abs(off) <= EFFICIENCY_POINTS
    else:
        off = predicted / published
        within = abs(off - 1) <= RELATIVE_TOLERANCE
    return Row(case["name"], case["what"], case["unit"], published, predicted, off, within,
               "" if within else d.get("why_off", ""), case["source"], case.get("role", "predicted"))


def validate(names=None, cases=None) -> list[Row]:
    """Every case (or those named) of `cases` (default: published.toml's), compared; an
    unknown name raises ScenarioError naming the nearest known ones."""
    cases = load_cases() if cases is None else cases
    known = [c["name"] for c in cases]
    unknown = [n for n in names or [] if n not in known]
    if unknown:
        near = sorted({k for n in unknown for k in difflib.get_close_matches(n, known, n=3, cutoff=0.5)})
        hint = f"; nearest: {', '.join(near)}" if near else ""
        raise ScenarioError("--case", f"unknown case {', '.join(map(repr, unknown))}{hint} (every case's name is "
                            f"the first column of dpsim validate)")
    return [compare(c) for c in cases if not names or c["name"] in names]


def summary(rows) -> str:
    """The score: predicted cases within tolerance; cases that set a default are counted apart."""
    scored = [r for r in rows if r.role == "predicted"]
    defaults = [r for r in rows if r.role != "predicted"]
    return (f"{sum(r.within for r in scored)} of {len(scored)} predicted cases within tolerance "
            f"({len(defaults)} more set a default and are not scored: "
            f"{sum(r.within for r in defaults)} within)")


def describe(case) -> str:
    """One line: the scenario dpsim runs for a case (for --verbose)."""
    sc = config.load_scenario(scenario(case))
    c = sc.cluster
    nics = f", {c.inter} between ({c.nics_per_node} NIC{'s' if c.nics_per_node > 1 else ''} per node, " \
        f"GPUDirect {c.gpudirect})"
    where = (f"{c.node}: " if c.node else "") + f"{c.nodes} x {c.gpus_per_node} {c.gpu}, {c.intra} inside" + (nics if c.nodes > 1 else "")
    where += f", {c.server_nodes} CPU server machines" if c.server_nodes else ""
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
    head = ("case", "role", "what", "published", "dpsim", "off", "ok", "why off (missed)")
    body = [(r.name, r.role, SHORT.get(r.what, r.what), f"{r.published:g} {r.unit.split()[0]}",
             "-" if r.predicted is None else f"{r.predicted:.3g}", format_off(r),
             {True: "yes", False: "NO", None: "-"}[r.within], r.reason) for r in rows]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head) - 1)]
    aligned = lambda i, cell: f"{cell:<{widths[i]}}" if i < 3 or i == 6 else f"{cell:>{widths[i]}}"
    return ["  ".join([*(aligned(i, cell) for i, cell in enumerate(line[:-1])), line[-1]]).rstrip()
            for line in [head, *body]]
