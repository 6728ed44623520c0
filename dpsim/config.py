"""Scenarios: TOML files, built-in names or dicts, validated into frozen dataclasses.

A scenario has top-level `name`, `description`, `source` and one table per section below.
Every field's unit is in its name. Anything a user gets wrong raises ScenarioError naming the
key and what is allowed; nothing here ever lets a bad value reach the simulator.
"""
import dataclasses
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from . import derived, hardware, limits, models, nvlink, strategies
from .errors import ScenarioError
from .vocabulary import RENAMED, unknown_algorithm

SCENARIO_DIR = Path(__file__).parent / "scenarios"
STRATEGIES = (*strategies.MODULES, "none")       # the names of dpsim.vocabulary.ALGORITHMS it simulates
PS_LOCATIONS = ("gpu0", "cpu")
COMPRESSIONS = ("none", "1bit", "fp16")
PRECISIONS = ("fp32", "fp16")
DATA_SOURCES = ("synthetic", "real")
STAGINGS = ("direct", "host")
UPDATE_LOCATIONS = ("gpu", "cpu")


def _spec(default, *, positive=False, nonneg=False, choices=None, fraction=False, doc=""):
    """A dataclass field carrying its validation rule."""
    meta = dict(positive=positive, nonneg=nonneg, choices=choices, fraction=fraction, doc=doc)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ClusterConfig:
    node: str = _spec("", doc="a whole-node preset (dpsim.hardware.NODES: dgx-1-v100, dgx-a100, ...) whose "
                      "keys fill those the scenario leaves out")
    nodes: int = _spec(1, positive=True)
    gpus_per_node: int = _spec(1, positive=True)
    gpu: str | dict = _spec("v100", doc="GPU preset or {fp32_tflops, fp16_tflops, mem_bw_gbs}")
    intra: str | dict = _spec("pcie3", doc="GPU<->GPU in a node: link preset or {bandwidth_gbs, latency_us, kind, "
                              "links, efficiency} (or {preset, ...} to change some of a preset's)")
    inter: str | dict = _spec("100gbe", doc="node<->switch: link preset or table")
    host_link: str | dict = _spec("pcie3", doc="GPU<->host CPU and PCIe switch uplinks: link preset or table")
    gpus_per_pcie_switch: int = _spec(2, positive=True, doc="GPUs sharing one PCIe switch and its host uplink")
    nics_per_node: int = _spec(1, positive=True, doc="NICs per node, each with its own port at the inter link's "
                               "rate, NIC j serving GPUs l with l x NICs // GPUs = j (dpsim.cluster)")
    gpudirect: str = _spec("auto", choices=("auto", "on", "off"), doc="GPUDirect RDMA: the NIC reads GPU memory "
                           "through its PCIe switch instead of host memory; auto = on for RDMA links "
                           "(infiniband, roce), off for TCP over ethernet")
    cpu_cores: int = _spec(16, positive=True)
    # Host memory bandwidth, used for reductions done on the CPU. 50 GB/s is the order of a
    # two-socket DDR4 server under STREAM (McCalpin's STREAM results list 40-120 GB/s for such
    # machines); an assumption, override it with a measurement.
    host_mem_bw_gbs: float = _spec(50.0, positive=True)
    # Per-GPU speed factors (1.0 = the preset; 0.5 = half speed, a straggler). Shorter than
    # the number of GPUs: the rest run at 1.0.
    gpu_speed: list = _spec([], doc="per-GPU speed factors, e.g. [1, 1, 1, 0.7]")
    # Ranks sharing devices (dpsim.sharing): more training processes than CPU cores, or several
    # on one GPU. 0 keeps one device per rank, as on every GPU cluster.
    devices_per_node: float = _spec(0.0, nonneg=True, doc="compute devices the node's ranks share (CPU cores or "
                                    "GPUs; fractional: the capacity measured, e.g. 1.8 for two cores that run two "
                                    "processes at 1.8x one); 0 = one per rank")
    shared_memory_messages: bool = _spec(False, doc="messages inside a node are memory copies made by the "
                                         "ranks' own devices (MPI between CPU processes)")
    # Memory bandwidth the node's devices share: CPU cores have one memory bus, so two ranks
    # updating at once each get less than one alone (dpsim.sharing.memory_bw). 0: every device
    # has its own memory, as every GPU does. course calibrate measures it on 2 ranks.
    node_mem_bw_gbs: float = _spec(0.0, nonneg=True, doc="memory bandwidth the node's devices share "
                                   "(CPU cores); 0 = each device its own (GPUs)")
    # How long a runnable process may wait for a core it does not have: Linux's base time slice
    # (EEVDF scheduler, Linux 6.6 on: 0.75 ms x (1 + log2 of the CPUs, counted up to 8), so
    # 3 ms on 8 or more CPUs, 1.5 ms on 2; kernel/sched/fair.c, sysctl_sched_base_slice). An
    # assumption; course calibrate measures what busy-polling ranks really wait.
    timeslice_us: float = _spec(3000.0, positive=True, doc="the OS scheduler's time slice")


@dataclass(frozen=True)
class ModelConfig:
    preset: str = _spec("resnet50", doc="model preset name ('custom' when params are given)")
    params: int = _spec(0, nonneg=True, doc="custom model: parameters (instead of preset)")
    flops_per_sample: float = _spec(0.0, nonneg=True, doc="custom model: forward+backward FLOPs per sample")
    layers: int = _spec(1, positive=True, doc="custom model: equal layers the gradient is split into")


@dataclass(frozen=True)
class ComputeConfig:
    precision: str = _spec("fp32", choices=PRECISIONS)
    # Fraction of peak reached at large batch. 0.6: ResNet-50 FP32 training on a V100 runs at
    # roughly 390 images/s (NVIDIA Deep Learning Examples performance tables), and the resnet50
    # preset counts 24.5 GFLOP per image forward+backward (a multiply-add is 2 FLOPs), so
    # 390 x 24.5 GFLOP / 15.7 TFLOP/s = 0.61 of peak.
    # Above 1 is allowed (with a note): some kernels beat the nominal FLOP count (cuDNN's
    # Winograd convolutions run VGG-16 above it; Lavin & Gray, "Fast Algorithms for
    # Convolutional Neural Networks", CVPR 2016).
    efficiency: float = _spec(0.6, positive=True)
    # Per-GPU batch at which efficiency is half its maximum (see dpsim.compute for the curve).
    half_batch: float = _spec(8.0, nonneg=True)
    overhead_ms: float = _spec(0.0, nonneg=True, doc="fixed per-iteration cost (kernel launches, framework)")
    # A measured one-GPU training rate instead of an efficiency: samples/s of whole steps
    # (forward, backward, update; synthetic data) at per-GPU batch rate_batch, as benchmark
    # tables report it. It sets efficiency so that one GPU runs at exactly that rate
    # (dpsim.compute.efficiency_from_rate); half_batch keeps its meaning for other batches.
    samples_per_s: float = _spec(0.0, nonneg=True, doc="measured one-GPU samples/s; sets efficiency (0 = off)")
    rate_batch: int = _spec(0, nonneg=True, doc="the per-GPU batch samples_per_s was measured at; 0 = the "
                            "scenario's one-GPU batch (training.global_batch, else batch_per_gpu)")
    # Per-layer timing of backward (off: each layer's share of backward is its share of the
    # FLOPs). On: convolutions and matrix products take FLOPs / (peak x efficiency), batch and
    # layer norms move 12 bytes per value at the GPU's memory bandwidth (dpsim.models), and
    # backward's total is shared out in those proportions, so gradients become ready, and
    # buckets can start, when a timed backward would produce them. The total is unchanged.
    per_layer: bool = _spec(False, doc="time each layer of backward by its kind (FLOP- or memory-bound)")
    # Random variation of each GPU's compute time per iteration (coefficient of variation;
    # seeded by training.seed): a synchronous step waits for the slowest draw.
    jitter: float = _spec(0.0, nonneg=True)
    # Launch cost of one GPU kernel: ~5 us, the order CUDA documentation and microbenchmarks
    # report for an empty kernel launch (e.g. Zhang et al., "Understanding the GPU
    # Microarchitecture to Achieve Bare-Metal Performance Tuning", PPoPP 2017).
    kernel_launch_us: float = _spec(5.0, nonneg=True)
    # The bandwidth the codec's kernels (1-bit quantise/decode, fp16 casts) reach on the bytes
    # they touch; 0 = the GPU's memory bandwidth (cluster.gpu.mem_bw_gbs), as a memory-bound
    # kernel written for the GPU does. course calibrate measures NumPy's, far below a copy's.
    codec_gbs: float = _spec(0.0, nonneg=True, doc="bandwidth of the codec's kernels; 0 = mem_bw_gbs")
    # One process driving several GPUs (MXNet, TensorFlow multi-tower, DataParallel): its host
    # thread issues every GPU's kernels, `dispatch_ms_per_gpu` of CPU time per GPU and
    # iteration. Compute then takes max(GPU time, GPUs in the process x dispatch).
    gpus_per_process: int = _spec(1, positive=True)
    dispatch_ms_per_gpu: float = _spec(0.0, nonneg=True)


@dataclass(frozen=True)
class TrainingConfig:
    batch_per_gpu: int = _spec(32, positive=True)
    # Strong scaling: a fixed global batch split over the GPUs (batch_per_gpu = global / GPUs,
    # replacing batch_per_gpu), so speed-up is against one GPU running the whole global batch.
    global_batch: int = _spec(0, nonneg=True, doc="fixed global batch split over the GPUs (strong "
                              "scaling); 0 = batch_per_gpu per GPU (weak scaling)")
    iterations: int = _spec(10, positive=True)
    warmup_iterations: int = _spec(2, nonneg=True)
    seed: int = _spec(0, nonneg=True)


@dataclass(frozen=True)
class DataConfig:
    source: str = _spec("synthetic", choices=DATA_SOURCES, doc="synthetic skips loading")
    workers: int = _spec(4, nonneg=True, doc="loader processes per training process; 0 = load inside the loop")
    decode_ms_per_sample: float = _spec(0.5, nonneg=True, doc="CPU time to read and decode one sample on one core")
    prefetch_batches: int = _spec(2, positive=True, doc="batches the loader may hold ready")


@dataclass(frozen=True)
class SyncConfig:
    strategy: str = _spec("ring", choices=STRATEGIES)
    ps_location: str = _spec("gpu0", choices=PS_LOCATIONS)
    compression: str = _spec("none", choices=COMPRESSIONS)
    bucket_mib: float = _spec(25.0, nonneg=True, doc="gradient bucket size in MiB; 0 = one bucket after backward")
    segment_mib: float = _spec(0.0, nonneg=True, doc="pipeline segment of the receive-and-add steps of ring, "
                               "halving-doubling and sharded-ps, in MiB (mpi_impl's default is 1); "
                               "0 = the textbook step: the whole chunk, then the addition")
    overlap: bool = _spec(True, doc="sync each bucket as soon as backward produces it")
    warmup_samples: int = _spec(0, nonneg=True, doc="full-precision samples before compression starts (CNTK -a)")
    staging: str = _spec("direct", choices=STAGINGS, doc="host = every message goes through host memory (MPI without CUDA awareness)")
    # Software cost of one host-staged message: two cudaMemcpy launches and stream syncs
    # (~10 us each, the order of CUDA's small-copy latency) plus an MPI shared-memory send
    # (~1 us, OSU latency benchmark order). An assumption; calibrate it (course/).
    message_overhead_us: float = _spec(25.0, nonneg=True, doc="software cost per host-staged message")
    update_location: str = _spec("gpu", choices=UPDATE_LOCATIONS, doc="cpu = the CPU parameter server applies the update (MXNet kvstore)")
    busy_poll: bool = _spec(False, doc="a rank waiting for a message spins on its device, as MPI does on CPU "
                            "cores (matters only when ranks outnumber devices)")


SECTIONS = {
    "cluster": ClusterConfig,
    "model": ModelConfig,
    "compute": ComputeConfig,
    "training": TrainingConfig,
    "data": DataConfig,
    "sync": SyncConfig,
}
TOP_LEVEL = ("name", "description", "source")


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    source: str
    cluster: ClusterConfig
    model: ModelConfig
    compute: ComputeConfig
    training: TrainingConfig
    data: DataConfig
    sync: SyncConfig

    @property
    def gpus(self) -> int:
        return self.cluster.nodes * self.cluster.gpus_per_node

    @property
    def processes_per_node(self) -> int:
        """Training processes per node (dpsim.derived.processes_per_node)."""
        return derived.processes_per_node(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: dict) -> "Scenario":
        """A new scenario with dotted keys replaced, e.g. {"sync.strategy": "ps"}; validated again."""
        return from_dict(apply_overrides(self.to_dict(), overrides))

    # Resolved hardware and model, for the simulator (validated when the scenario was built).
    def gpu_spec(self) -> hardware.GPU:
        return resolve_gpu(self.cluster.gpu)

    def link_spec(self, key: str) -> hardware.Link:
        return resolve_link(getattr(self.cluster, key), f"cluster.{key}")

    def model_spec(self) -> models.Model:
        m = self.model
        if m.params:
            return models.custom_model(m.params, m.flops_per_sample, m.layers)
        return models.get_model(m.preset)


# ---------------------------------------------------------------- presets given inline or by name

def _number(value, key, positive=True):
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
        _inline(value, key, ("fp32_tflops", "mem_bw_gbs"), ("fp16_tflops", "name", "source"))
        fp32 = _number(value["fp32_tflops"], f"{key}.fp32_tflops")
        fp16 = _number(value.get("fp16_tflops", fp32), f"{key}.fp16_tflops")
        return hardware.GPU(str(value.get("name", "custom")), fp32, fp16,
                            _number(value["mem_bw_gbs"], f"{key}.mem_bw_gbs"),
                            str(value.get("source", "given inline in the scenario")))
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
        efficiency = _number(value["efficiency"], f"{key}.efficiency") if "efficiency" in value else \
            (base.efficiency if base and "bandwidth_gbs" not in value else 1.0)
        if efficiency > 1:
            raise ScenarioError(f"{key}.efficiency", f"achievable / nominal is at most 1, got {efficiency!r}")
        return hardware.Link(str(value.get("name", base.name if base else "custom")), kind,
                             _number(value["bandwidth_gbs"], f"{key}.bandwidth_gbs") if "bandwidth_gbs" in value
                             else base.bandwidth_gbs,
                             _number(value["latency_us"], f"{key}.latency_us", positive=False) if "latency_us" in value
                             else base.latency_us,
                             str(value.get("source", base.source if base else "given inline in the scenario")),
                             links, efficiency)
    raise ScenarioError(key, f"expected a link preset name or an inline table, got {value!r}")


# ---------------------------------------------------------------- building and checking sections

def _check_field(f: dataclasses.Field, value, key):
    meta, want = f.metadata, f.type
    if want == "bool" or want is bool:
        if not isinstance(value, bool):
            raise ScenarioError(key, f"expected true or false, got {value!r}")
        return value
    if want in (int, "int"):
        if isinstance(value, float) and value.is_integer():   # TOML reads 25e6 as a float
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(key, f"expected an integer, got {value!r}")
    elif want in (float, "float"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ScenarioError(key, f"expected a finite number, got {value!r}")
        value = float(value)
    elif want in (list, "list"):
        if not isinstance(value, list):
            raise ScenarioError(key, f"expected a list of numbers, got {value!r}")
        for i, x in enumerate(value):
            _number(x, f"{key}[{i}]")
        value = [float(x) for x in value]
    elif want in (str, "str"):
        if not isinstance(value, str):
            raise ScenarioError(key, f"expected a string, got {value!r}")
    elif not isinstance(value, (str, dict)):   # preset name or inline table
        raise ScenarioError(key, f"expected a preset name or an inline table, got {value!r}")
    if meta.get("choices") and value not in meta["choices"]:
        if value in RENAMED:
            raise ScenarioError(key, unknown_algorithm(value, meta["choices"]))
        raise ScenarioError(key, f"unknown value {value!r}; choose one of: {', '.join(meta['choices'])}")
    if meta.get("positive") and not value > 0:
        raise ScenarioError(key, f"must be > 0, got {value!r}")
    if meta.get("nonneg") and value < 0:
        raise ScenarioError(key, f"must be >= 0, got {value!r}")
    if meta.get("fraction") and value > 1:
        raise ScenarioError(key, f"must be at most 1, got {value!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        limits.in_range(key, value)
    return value


# Keys that were renamed, and why: a file that still uses one fails with this hint.
RENAMED_KEYS = {
    "sync.bucket_mb": "renamed sync.bucket_mib (the same size, in MiB as it always was: one unit, named so)",
}


def _build_section(name: str, table) -> object:
    cls = SECTIONS[name]
    if not isinstance(table, dict):
        raise ScenarioError(name, f"expected a table, got {table!r}")
    if name == "cluster" and table.get("node"):
        node = table["node"]
        if not isinstance(node, str) or node not in hardware.NODES:
            raise ScenarioError("cluster.node", f"unknown node {node!r}; choose one of: {', '.join(hardware.NODES)}")
        table = {**{k: v for k, v in hardware.NODES[node].items() if k != "source"}, **table}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for k in table:
        if f"{name}.{k}" in RENAMED_KEYS:
            raise ScenarioError(f"{name}.{k}", RENAMED_KEYS[f"{name}.{k}"])
        if k not in fields:
            raise ScenarioError(f"{name}.{k}", f"unknown key; allowed: {', '.join(fields)}")
    values = {k: _check_field(fields[k], v, f"{name}.{k}") for k, v in table.items()}
    return cls(**values)


def from_dict(data: dict) -> Scenario:
    """Validate a scenario given as a dict with the TOML's keys."""
    if not isinstance(data, dict):
        raise ScenarioError("", f"a scenario must be a table, got {type(data).__name__}")
    allowed = (*TOP_LEVEL, *SECTIONS)
    for k in data:
        if k not in allowed:
            raise ScenarioError(k, f"unknown key; allowed: {', '.join(allowed)}")
    tops = {}
    for k in TOP_LEVEL:
        v = data.get(k, "custom" if k == "name" else "")
        if not isinstance(v, str):
            raise ScenarioError(k, f"expected a string, got {v!r}")
        tops[k] = v
    sections = {name: _build_section(name, data.get(name, {})) for name in SECTIONS}
    sc = Scenario(**tops, **sections)
    limits.check_scenario(sc)
    _check_resolves(sc, data.get("model", {}))
    if sc.model.params > 0:
        sc = dataclasses.replace(sc, model=dataclasses.replace(sc.model, preset="custom"))
    return _resolve_rate(_resolve_global_batch(sc))


def _resolve_global_batch(sc: Scenario) -> Scenario:
    """training.global_batch split over the GPUs: it must split evenly."""
    t = sc.training
    if not t.global_batch:
        return sc
    per_gpu, rest = divmod(t.global_batch, sc.gpus)
    if rest or not per_gpu:
        raise ScenarioError("training.global_batch", f"{t.global_batch} does not split evenly over {sc.gpus} GPUs "
                            f"({t.global_batch / sc.gpus:g} per GPU); choose a multiple of the GPU count")
    return dataclasses.replace(sc, training=dataclasses.replace(t, batch_per_gpu=per_gpu))


def _resolve_rate(sc: Scenario) -> Scenario:
    """compute.samples_per_s at rate_batch sets compute.efficiency (dpsim.derived.efficiency_from_rate)."""
    c = sc.compute
    if not c.samples_per_s:
        return sc
    try:
        e_max, batch = derived.efficiency_from_rate(sc)
    except ValueError as e:
        raise ScenarioError("compute.samples_per_s", str(e)) from None
    return dataclasses.replace(sc, compute=dataclasses.replace(c, efficiency=e_max, rate_batch=batch))


def notes(sc: Scenario) -> list[str]:
    """One line each about choices a reader of a result should know (dpsim show and run print them)."""
    c, out = sc.compute, []
    if c.samples_per_s:
        out.append(f"compute from a measured rate: {c.samples_per_s:g} samples/s on one GPU at batch {c.rate_batch} "
                   f"(compute.samples_per_s), efficiency {c.efficiency:.3f} of peak implied")
    if c.efficiency > 1:
        out.append(f"compute.efficiency {c.efficiency:.3f} is above the GPU's FLOP peak: the model's kernels beat "
                   f"its nominal FLOP count (Winograd convolutions do), or the FLOPs per sample are too low")
    if sc.training.global_batch:
        out.append(f"strong scaling: global batch {sc.training.global_batch} over {sc.gpus} GPUs = "
                   f"{sc.training.batch_per_gpu} per GPU")
    return out


def _check_resolves(sc: Scenario, model_table: dict):
    """Presets exist, inline tables are complete, the model is one or the other."""
    sc.gpu_spec()
    for key in ("intra", "inter", "host_link"):
        sc.link_spec(key)
    intra, g = sc.link_spec("intra"), sc.cluster.gpus_per_node
    if intra.kind == "nvlink":
        try:
            nvlink.graph(g, intra.links_per_gpu(g))
        except ValueError as e:
            raise ScenarioError("cluster.intra", str(e)) from None
    custom = sc.model.params > 0 or sc.model.flops_per_sample > 0
    if custom:
        if model_table.get("preset", "custom") != "custom":
            raise ScenarioError("model.preset", "give either a preset or params and flops_per_sample, not both")
        if not (sc.model.params > 0 and sc.model.flops_per_sample > 0):
            raise ScenarioError("model.params", "a custom model needs both params > 0 and flops_per_sample > 0")
        if sc.model.layers > sc.model.params:
            raise ScenarioError("model.layers", f"at most model.params ({sc.model.params}) layers, got {sc.model.layers}")
    else:
        try:
            models.get_model(sc.model.preset)
        except ValueError as e:
            raise ScenarioError("model.preset", str(e)) from None
    if len(sc.cluster.gpu_speed) > sc.gpus:
        raise ScenarioError("cluster.gpu_speed", f"{len(sc.cluster.gpu_speed)} factors for {sc.gpus} GPUs")
    if sc.sync.update_location == "cpu" and not (sc.sync.strategy == "ps" and sc.sync.ps_location == "cpu"):
        raise ScenarioError("sync.update_location", "'cpu' needs the parameter server on the CPU: "
                            "strategy = \"ps\" and ps_location = \"cpu\"")
    strategies.hook(sc.sync.strategy, "check")(sc)
    if sc.sync.strategy == "none" and sc.gpus > 1:
        raise ScenarioError("sync.strategy", f"'none' means one GPU, but the cluster has {sc.gpus}; "
                            f"choose one of: {', '.join(s for s in STRATEGIES if s != 'none')}")


# ---------------------------------------------------------------- loading and overrides

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


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def read_toml(path: Path) -> dict:
    if path.exists() and not path.is_file():          # a directory, or a FIFO that would block
        raise ScenarioError("", f"{str(path)!r} is not a regular file")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ScenarioError("", f"cannot read scenario file {str(path)!r}: {e.strerror}")
    except UnicodeDecodeError:
        raise ScenarioError("", f"{path}: not a text file (TOML is UTF-8 text)")
    except RecursionError:
        raise ScenarioError("", f"{path}: tables nested too deeply")
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError("", f"{path}: not valid TOML: {e}")


def load_scenario(source, overrides: dict | None = None) -> Scenario:
    """A built-in scenario name, a path to a .toml file, a dict, or a Scenario; then overrides."""
    if isinstance(source, Scenario):
        data = source.to_dict()
    elif isinstance(source, dict):
        data = source
    elif isinstance(source, (str, Path)) and (str(source).endswith(".toml") or Path(source).exists()):
        data = read_toml(Path(source))
    elif isinstance(source, str) and source in builtin_names():
        data = read_toml(SCENARIO_DIR / f"{source}.toml")
    else:
        raise ScenarioError("scenario", f"no built-in scenario or file {source!r}; "
                            f"built-ins: {', '.join(builtin_names())}")
    return from_dict(apply_overrides(data, overrides or {}))
