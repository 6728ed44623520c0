"""The sections of a scenario: every key, its default and the rule its value must meet.

A scenario has top-level `name`, `description`, `source` and one table per section below.
Every field's unit is in its name; `_spec` attaches a field's rule (positive, non-negative,
one of some choices) and its one-line help, and `check_field` applies it. dpsim.config builds
and checks whole scenarios from these.
"""
import dataclasses
import math
from dataclasses import dataclass, field

from . import hardware, limits, software, strategies, transports
from .errors import ScenarioError
from .specs import number
from .vocabulary import COMPRESSIONS as COMPRESSION_NAMES
from .vocabulary import RENAMED, unknown_algorithm

STRATEGIES = (*strategies.MODULES, "none")       # the names of dpsim.vocabulary.ALGORITHMS it simulates
PS_LOCATIONS = ("gpu0", "cpu")
COMPRESSIONS = tuple(COMPRESSION_NAMES)         # none | 1bit | fp16 | powersgd | topk
OPTIMIZERS = ("sgd", "adam")                     # dpsim.memory: their state per parameter
MEMORY_CHECKS = ("mark", "error")
PRECISIONS = ("fp32", "fp16")
DATA_SOURCES = ("synthetic", "real")
STAGINGS = ("direct", "host")
UPDATE_LOCATIONS = ("gpu", "cpu")
RING_ORDERS = ("topology", "gpu")


def _spec(default, *, positive=False, nonneg=False, choices=None, fraction=False, pairs=False, doc=""):
    """A dataclass field carrying its validation rule (pairs: a list of [positive int, positive int])."""
    meta = dict(positive=positive, nonneg=nonneg, choices=choices, fraction=fraction, pairs=pairs, doc=doc)
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
    # BytePS's documented deployment runs its summation servers on CPU-only machines apart from
    # the workers, their total bandwidth at least the workers' (bytedance/byteps
    # docs/best-practice.md, "With additional CPU servers"); 0 is its co-locate mode.
    server_nodes: int = _spec(0, nonneg=True, doc="strategy byteps: CPU-only machines running the summation "
                              "servers, each with nics_per_node NICs at the inter link's rate; 0 = servers on "
                              "the workers' own hosts (co-locate)")
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
    sockets: int = _spec(1, positive=True, doc="CPU sockets per node, the PCIe switches split evenly over them; "
                         "GPUs on different sockets without NVLink talk across socket_link (dpsim.cluster)")
    socket_link: str | dict = _spec("cross-socket-pcie3", doc="between two sockets' root complexes, as a GPU's copies "
                                    "into the other socket's memory see it: link preset or table")
    # How long a runnable process may wait for a core it does not have: Linux's base time slice
    # (EEVDF scheduler, Linux 6.6 on: 0.75 ms x (1 + log2 of the CPUs, counted up to 8), so
    # 3 ms on 8 or more CPUs, 1.5 ms on 2; kernel/sched/fair.c, sysctl_sched_base_slice). An
    # assumption; course calibrate measures what busy-polling ranks really wait.
    timeslice_us: float = _spec(3000.0, positive=True, doc="the OS scheduler's time slice")
    # What time-slicing costs a rank's forward and backward beyond its 1/k of the device: the
    # switches between ranks (caches refilled), and the slices of the ranks beside it that
    # wait and poll (dpsim.sharing). 0: perfect processor sharing. course calibrate measures it
    # with its probe of twice as many ranks as cores.
    timeslice_overhead: float = _spec(0.0, nonneg=True, doc="fraction the compute and kernels of a rank "
                                      "that shares its device run slower than 1/k of it (switches, others' polling)")
    # --- transports (dpsim.transports: each with its source)
    p2p: bool = _spec(True, doc="GPU peer-to-peer inside a node; false = every GPU-to-GPU message is two "
                      "copies through a pinned host buffer (GeForce cards: NVIDIA disables P2P)")
    transport: str = _spec("auto", choices=transports.CHOICES, doc="software carrying bytes between nodes "
                           "(dpsim.transports); auto = nccl-ib on infiniband/roce, efa on efa, tcp on ethernet")
    # NCCL's socket transport on a generic NIC: 1 socket per channel, 2 channels per NIC
    # (NCCL src/transport/net_socket.cc; maintainer in NVIDIA/nccl-tests#83).
    socket_flows: int = _spec(2, positive=True, doc="TCP connections per NIC for transport nccl-socket "
                              "(NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD x channels); default 2")


@dataclass(frozen=True)
class ModelConfig:
    preset: str = _spec("resnet50", doc="model preset name ('custom' when params are given)")
    params: int = _spec(0, nonneg=True, doc="custom model: parameters (instead of preset)")
    flops_per_sample: float = _spec(0.0, nonneg=True, doc="custom model: forward+backward FLOPs per sample")
    layers: int = _spec(1, positive=True, doc="custom model: equal layers the gradient is split into")
    # A custom model's weight matrices, so that PowerSGD can compress them (dpsim.models.custom_model):
    # one [rows, columns] per layer, forward order; model.layers must equal their count, their
    # rows x columns must add up to at most model.params, and the rest are vectors (biases).
    matrices: list = _spec([], pairs=True, doc="custom model: [rows, columns] of each layer's weight matrix, "
                           "forward order, one per layer (PowerSGD compresses them); the rest of model.params "
                           "are vectors; [] = vectors only")


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
    # The same for a rank whose device time-slices it with others (dpsim.sharing): the
    # scheduler's slices end at different moments for each, so ranks that share a core finish
    # their compute up to a slice apart. 0: compute.jitter for them too.
    shared_jitter: float = _spec(0.0, nonneg=True, doc="jitter of ranks that share their device "
                                 "(0 = compute.jitter)")
    # Launch cost of one GPU kernel: ~5 us, the order CUDA documentation and microbenchmarks
    # report for an empty kernel launch (e.g. Zhang et al., "Understanding the GPU
    # Microarchitecture to Achieve Bare-Metal Performance Tuning", PPoPP 2017).
    kernel_launch_us: float = _spec(5.0, nonneg=True)
    # The bandwidth the codec's kernels (1-bit quantise/decode, fp16 casts) reach on the bytes
    # they touch; 0 = the GPU's memory bandwidth (cluster.gpu.mem_bw_gbs), as a memory-bound
    # kernel written for the GPU does. course calibrate measures NumPy's, far below a copy's.
    # PowerSGD is made of the framework's own additions and products: at mem_bw_gbs, whatever this says.
    codec_gbs: float = _spec(0.0, nonneg=True, doc="bandwidth of the codec's kernels (1-bit, fp16, top-k; "
                             "not PowerSGD's); 0 = mem_bw_gbs")
    # A codec's kernels sweep the gradient, its residuals and their packed copies through
    # memory; the optimizer's update right after them finds its own arrays (weights, momentum)
    # evicted from the caches and reads them from memory. course calibrate measures it on CPUs
    # (its 2-rank probe's update after the 1-bit sync against after the ring: 0.38 on the
    # 2-core machine, course/README.md); a GPU's update streams from HBM either way: 0.
    update_after_codec: float = _spec(0.0, nonneg=True, doc="fraction the update runs slower in a step whose "
                                      "sync ran a codec (caches it flushed; course calibrate measures it)")
    # The FLOP/s PowerSGD's matrix products and Gram-Schmidt reach (strategies/powersgd.py:
    # each takes max(FLOPs / this, bytes / mem_bw_gbs)). 0 = the GPU's dense-GEMM peak
    # (cluster.gpu.fp32_tflops or fp16_tflops, the vendor's datasheet figure) x
    # compute.efficiency, as the model's own products run. course calibrate measures NumPy's
    # on the model's matrix shapes at PowerSGD's rank, far below a large matmul's.
    powersgd_gflops: float = _spec(0.0, nonneg=True, doc="FLOP/s of PowerSGD's products and orthogonalisation, "
                                   "GFLOP/s; 0 = peak x compute.efficiency")
    # One process driving several GPUs (MXNet, TensorFlow multi-tower, DataParallel): its host
    # thread issues every GPU's kernels, `dispatch_ms_per_gpu` of CPU time per GPU and
    # iteration. Compute then takes max(GPU time, GPUs in the process x dispatch).
    gpus_per_process: int = _spec(1, positive=True)
    dispatch_ms_per_gpu: float = _spec(0.0, nonneg=True)
    # --- communication competing with compute (dpsim.contention)
    contention: bool = _spec(True, doc="a direct (NCCL) sync slows the backward it overlaps by its channels' "
                             "share of SMs and 3x its traffic's share of memory bandwidth (dpsim.contention)")


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
    # --- gradient accumulation: k micro-batches of batch_per_gpu, one sync after the last
    accumulation_steps: int = _spec(1, positive=True, doc="micro-batches per optimizer step; gradients are "
                                    "synchronised once, after the last (PyTorch no_sync / Horovod "
                                    "backward_passes_per_step)")
    # --- double buffering (Seide et al., Interspeech 2014, section 2.2; dpsim.engine): each
    # half pays the update and compute.overhead_ms, and computes at half the batch's efficiency
    double_buffering: bool = _spec(False, doc="compute each batch in two halves, each half's sync hidden behind "
                                   "the next half's compute and its update applied one half late")
    # Memory per GPU (dpsim.memory): the optimizer's state per parameter, and what a scenario
    # whose GPU memory does not hold it does.
    optimizer: str = _spec("sgd", choices=OPTIMIZERS, doc="sgd (with momentum: 4 bytes of state per parameter) "
                           "| adam (8); with compute.precision = fp16, mixed precision: 8 | 12 (ZeRO's K)")
    memory_check: str = _spec("mark", choices=MEMORY_CHECKS, doc="a scenario that does not fit the GPU's memory: "
                              "mark = the result says so; error = one line, exit 2")


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
    # --- software costs per call and per tensor (dpsim.software)
    framework: str = _spec("ddp", choices=software.FRAMEWORKS, doc="how gradients become collective calls: ddp "
                           "buckets, horovod fusion + cycle, tf1 one call per variable (dpsim.software)")
    # 0 = the textbook collective, as sync.segment_mib's 0 is; NCCL's figure is 8.4 us, the base
    # latency of its Simple-protocol ring call (src/graph/tuning.cc, baseLat), which dpsim
    # validate sets for every published case (dpsim.software.NCCL_CALL_US).
    call_overhead_us: float = _spec(0.0, nonneg=True, doc="fixed cost of one direct collective call; "
                                    "NCCL's is 8.4 (dpsim.software.NCCL_CALL_US)")
    # Horovod's defaults since v0.21.0: 128 MB fusion buffer, 1 ms cycle (docs/tensor-fusion.rst;
    # CHANGELOG "Changed default cycle time from 5ms to 1ms and fusion threshold from 64MB to 128MB").
    fusion_mib: float = _spec(128.0, positive=True, doc="framework horovod: HOROVOD_FUSION_THRESHOLD in MiB")
    cycle_ms: float = _spec(1.0, nonneg=True, doc="framework horovod: HOROVOD_CYCLE_TIME in ms")
    # NCCL uses 2 channels per NIC (NCCL maintainer, NVIDIA/nccl-tests#83); one CUDA block each.
    ps_pull: str = _spec("with-push", choices=("with-push", "before-forward"), doc="ps, byteps: the workers get "
                         "the sum back in the sync (with-push) or pull it before the next forward (TensorFlow 1.x)")
    # BytePS cuts every tensor into partitions of BYTEPS_PARTITION_BYTES, default 4096000 B
    # = 3.90625 MiB (bytedance/byteps docs/env.md), each pushed, summed and pulled on its own.
    ps_partition_mib: float = _spec(0.0, nonneg=True, doc="strategy byteps: push, sum and pull a bucket in "
                                    "partitions of this many MiB, partition i pulled while i + 1 is pushed "
                                    "(BytePS: 3.90625); 0 = the whole bucket, then its pull")
    # NCCL's tuning model credits NVLS with 0.85 of the NVLink bandwidth on Hopper, 0.74 on
    # Blackwell (NVIDIA/nccl src/graph/tuning.cc, nvlsEfficiency).
    nvls_efficiency: float = _spec(0.85, positive=True, fraction=True, doc="strategy nvls: the rate of the "
                                   "switch's multimem reduction and store, a fraction of the port's copy rate "
                                   "(NCCL's tuning model: 0.85 Hopper, 0.74 Blackwell)")
    torus_x: int = _spec(0, nonneg=True, doc="strategy torus2d: GPUs per horizontal ring; 0 = a node's")
    nccl_channels: int = _spec(2, positive=True, doc="NCCL channels (one CUDA block, one SM each) a "
                               "collective runs on (dpsim.contention)")
    # NCCL 1.x made one ring of a node's GPUs in NVML index order (src/core.cu orderRanks, sortId =
    # the NVML index); NCCL 2 searches the links for its rings (src/graph/search.cc).
    ring_order: str = _spec("topology", choices=RING_ORDERS, doc="the rings inside a node: topology = NCCL 2's, "
                            "over the NVLink graph (dpsim.nvlink); gpu = one ring in GPU order, as NCCL 1.x made it")
    # Compression's own settings (dpsim/strategies/powersgd.py, topk.py). Rank 1 is PyTorch's
    # PowerSGDState default (matrix_approximation_rank); Vogels et al. (NeurIPS 2019) train
    # ResNet-18 on CIFAR-10 at rank 2. 1% is a setting of ours: no source calls it the best.
    powersgd_rank: int = _spec(1, positive=True, doc="PowerSGD: rank r of the factors P (n x r) and Q (m x r) "
                               "of every matrix; at most min(n, m) of each")
    # Where PowerSGD's error feedback takes its error from: the decompressed sum, as PyTorch's
    # powerSGD_hook does (error = input - P Q^T after Q's all-reduce), or this GPU's own
    # approximation P^ Q_w^T before Q's all-reduce, as Vogels et al. (NeurIPS 2019) Algorithm 2
    # writes it (e_w = Delta_w - decompress(C(Delta_w))) and mpi_impl/powersgd.py runs it: one
    # more product per matrix.
    powersgd_error: str = _spec("aggregate", choices=("aggregate", "local"), doc="PowerSGD's error feedback: "
                                "input - the decompressed sum (aggregate, PyTorch's hook) | input - this GPU's "
                                "own P Q^T (local, Vogels et al. Algorithm 2, mpi_impl; one more product)")
    topk_ratio: float = _spec(0.01, positive=True, fraction=True, doc="top-k: the fraction of each bucket's values "
                              "sent, in (0, 1]")


SECTIONS = {
    "cluster": ClusterConfig,
    "model": ModelConfig,
    "compute": ComputeConfig,
    "training": TrainingConfig,
    "data": DataConfig,
    "sync": SyncConfig,
}
TOP_LEVEL = ("name", "description", "source")


def check_field(f: dataclasses.Field, value, key):
    meta, want = f.metadata, f.type
    if meta.get("pairs"):
        return _pairs(value, key)
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
            number(x, f"{key}[{i}]")
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


def _pairs(value, key):
    """A list of [rows, columns], each a positive whole number: [[int, int], ...]."""
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(key, f"expected a list of [rows, columns], got {value!r}")
    out = []
    for i, pair in enumerate(value):
        whole = [int(x) if isinstance(x, float) and x.is_integer() else x for x in pair] \
            if isinstance(pair, (list, tuple)) else None
        if not whole or len(whole) != 2 or any(isinstance(x, bool) or not isinstance(x, int) or x < 1 for x in whole):
            raise ScenarioError(f"{key}[{i}]", f"expected [rows, columns], two whole numbers > 0, got {pair!r}")
        for x in whole:
            limits.in_range(f"{key}[{i}]", x)
        out.append(whole)
    return out


# Keys that were renamed, and why: a file that still uses one fails with this hint.
RENAMED_KEYS = {
    "sync.bucket_mb": "renamed sync.bucket_mib (the same size, in MiB as it always was: one unit, named so)",
}


def build_section(name: str, table) -> object:
    """Section `name` from its table: a node preset's keys under the table's, every key known,
    every value by its field's rule."""
    if not isinstance(table, dict):
        raise ScenarioError(name, f"expected a table, got {table!r}")
    if name == "cluster" and table.get("node"):
        table = {**{k: v for k, v in _node(table["node"]).items() if k != "source"}, **table}
    return SECTIONS[name](**_checked_values(name, table))


def replace_section(section, name: str, changes: dict) -> object:
    """A checked section with the keys in `changes` replaced, each checked by its field's rule
    (a new node preset is checked to exist; its keys fill none, since a built section has all)."""
    if changes.get("node"):
        _node(changes["node"])
    return dataclasses.replace(section, **_checked_values(name, changes))


def _node(node) -> dict:
    if not isinstance(node, str) or node not in hardware.NODES:
        raise ScenarioError("cluster.node", f"unknown node {node!r}; choose one of: {', '.join(hardware.NODES)}")
    return hardware.NODES[node]


def _checked_values(name: str, table: dict) -> dict:
    fields = {f.name: f for f in dataclasses.fields(SECTIONS[name])}
    for k in table:
        if f"{name}.{k}" in RENAMED_KEYS:
            raise ScenarioError(f"{name}.{k}", RENAMED_KEYS[f"{name}.{k}"])
        if k not in fields:
            raise ScenarioError(f"{name}.{k}", f"unknown key; allowed: {', '.join(fields)}")
    return {k: check_field(fields[k], v, f"{name}.{k}") for k, v in table.items()}
