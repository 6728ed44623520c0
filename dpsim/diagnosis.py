"""What bounds an iteration, in plain words, and the one knob most likely to help.

diagnose(sc, res) reads the breakdown of a simulated iteration (res.breakdown_s) and the
scenario, and names one cause:

    compute        forward and backward of the average GPU     (breakdown "compute")
    communication  the part of the sync the GPUs wait for      ("exposed_comm")
    data loading   waiting for the input pipeline              ("data_wait")
    straggler      waiting for the slowest GPU                 ("straggler_wait")
    compression    encode/decode kernels on the critical path  ("compression")

The rules, in order (the thresholds are the constants below):
  1. Compression that makes the iteration slower than the same run without it
     (res.uncompressed) is the verdict, however small its share: turn it off.
  2. Otherwise the largest overhead (any part but compute) is the cause if it takes at least
     OVERHEAD_BOUND of the iteration, or more than compute does. A straggler rarely outgrows
     the average GPU's compute, yet a GPU at half speed costs a third of every step.
  3. Otherwise compute is the cause. If the scaling efficiency is at least SCALES_WELL there is
     nothing to fix in the scaling: more GPUs scale well, a faster sync or compression can save
     at most the sync's small share (CNTK's 1-bit on four K80s), and a faster GPU (or a bigger
     batch, while the batch is too small to fill the GPU: efficiency below GPU_FILLED of its
     maximum) raises throughput. Below SCALES_WELL, the knob is the one for the largest overhead.

Knobs, read from the scenario:
  data loading   more loader workers while the node has free cores, else cheaper decoding
                 or more cores; data.source=synthetic shows the ceiling.
  communication  overlap, if it is off and backward (2/3 of compute) lasts at least HIDEABLE
                 of one sync; a ring instead of DataParallel or a parameter server on GPU 0 or
                 the CPU; 1-bit over a network no faster than SLOW_NETWORK_GBS between nodes;
                 hierarchical for a flat ring or doubling over several nodes; a bigger batch below
                 SMALL_BATCH per GPU; fp16 gradients; else faster links.
  straggler      fix or drop the slow GPU (cluster.gpu_speed), or find the jitter.
  compression    off when it loses; fewer, larger buckets when it wins but its kernels cost.
"""
import math
from dataclasses import asdict, dataclass

from . import derived, memory

OVERHEAD_BOUND = 0.25     # an overhead this large bounds the iteration
SCALES_WELL = 0.90        # scaling efficiency above which compute-bound runs scale well
GPU_FILLED = 0.80         # b / (b + half_batch): below this the batch is too small for the GPU
HIDEABLE = 0.5            # overlap helps when backward lasts at least this fraction of one sync
SLOW_NETWORK_GBS = 1.25   # 10 GbE or slower between nodes: 1-bit's 1/28 of the bytes pays
SMALL_BATCH = 32          # per-GPU batches below this leave a fixed sync cost poorly amortised
BACKWARD = 2 / 3          # backward's part of compute (dpsim.compute)

# A cause, in the words of the verdict, and the part of dpsim.vocabulary.BREAKDOWN it is measured by.
PARTS = {"compute": "compute", "communication": "exposed_comm", "data loading": "data_wait",
         "straggler": "straggler_wait", "compression": "compression"}


@dataclass(frozen=True)
class Diagnosis:
    cause: str      # one of PARTS
    share: float    # fraction of the iteration the cause takes
    knob: str       # short identifier of the suggested change
    text: str       # 2-3 plain lines (and a last one when the scenario does not fit its GPUs' memory)
    memory: str = ""  # memory per GPU against the GPU's, in one line (dpsim.memory)

    def to_dict(self) -> dict:
        return asdict(self)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def diagnose(sc, res) -> Diagnosis:
    it = res.iteration_time_s
    shares = {cause: res.breakdown_s.get(key, 0.0) / it for cause, key in PARTS.items()}
    worst = max((c for c in PARTS if c != "compute"), key=shares.get)
    plain = res.uncompressed
    if plain and plain.iteration_time_s < it:
        cause = "compression"
    elif shares[worst] >= OVERHEAD_BOUND or shares[worst] > shares["compute"]:
        cause = worst
    else:
        cause = "compute"
    eff = res.scaling_efficiency
    if cause == "compute" and (eff >= SCALES_WELL or shares[worst] == 0):
        knob, detail, advice = compute_advice(sc, res)
        where = f"more GPUs scale well (efficiency {eff:.0%})" if sc.gpus > 1 else "on one GPU nothing is synchronised"
        head = f"compute-bound: compute is {shares['compute']:.0%} of the iteration; {where}"
    elif cause == "compute":
        knob, detail, advice = ADVICE[worst](sc, res)
        head = (f"compute is {shares['compute']:.0%} of the iteration, but scaling efficiency is only "
                f"{eff:.0%}: {worst} takes {shares[worst]:.0%}")
    else:
        knob, detail, advice = ADVICE[cause](sc, res)
        head = f"{cause} is {shares[cause]:.0%} of the iteration ({ms(res.breakdown_s[PARTS[cause]])} of {ms(it)})"
    held, room = memory_line(sc, res)
    lines = (head, detail, advice, "" if res.fits_in_memory is not False else room)
    return Diagnosis(cause, shares[cause], knob, "\n".join(line for line in lines if line), held)


def memory_line(sc, res) -> tuple[str, str]:
    """(memory per GPU in one line, or ""; the does-not-fit line)."""
    mem = res.memory_per_gpu_bytes
    if not mem:
        return "", ""
    capacity = memory.capacity_bytes(sc)
    share = f" of {capacity / 1e9:g} GB ({mem['total'] / capacity:.0%})" if capacity else ""
    line = f"memory per GPU: {mem['total'] / 1e9:.3g} GB{share}"
    return line, f"does not fit: {memory.does_not_fit(sc, mem)}"


def compute_advice(sc, res):
    b, half = sc.training.batch_per_gpu, sc.compute.half_batch
    if b / (b + half) < GPU_FILLED:
        return ("bigger-batch", f"a batch of {b} per GPU fills only {b / (b + half):.0%} of what the GPU can reach",
                f"a faster GPU or bigger batch helps throughput: try --set training.batch_per_gpu={4 * b}")
    gpu = sc.gpu_spec()
    faster = ("--set compute.precision=fp16" if sc.compute.precision == "fp32" and gpu.fp16_tflops > gpu.fp32_tflops
              else "--set cluster.gpu=h100")
    sync = res.breakdown_s["exposed_comm"] + res.breakdown_s["compression"]
    detail = (f"communication is only {sync / res.iteration_time_s:.0%} of the iteration: a faster sync or "
              f"gradient compression can save at most that" if sc.gpus > 1 else "")
    return "none", detail, f"a faster GPU or bigger batch helps throughput: try {faster}"


def data_advice(sc, res):
    d, c = sc.data, sc.cluster
    procs = derived.processes_per_node(sc)                # as dpsim.pipeline counts them
    samples = sc.training.batch_per_gpu * derived.gpus_per_process(sc)
    cores = max(c.cpu_cores - procs, 1)                   # one core per training process, the rest load
    free = max(cores // procs, 1)                         # loader cores per training process
    decode = samples * d.decode_ms_per_sample / 1e3
    busy = res.iteration_time_s - res.breakdown_s["data_wait"]
    detail = (f"decoding one batch ({samples} x {d.decode_ms_per_sample:g} ms) takes {ms(decode)} on one core; "
              f"the GPU wants one every {ms(busy)}; loader workers per process: {d.workers}")
    ceiling = "--set data.source=synthetic shows the ceiling"
    if d.workers < free:
        want = min(free, max(d.workers + 1, math.ceil(decode / busy)))
        return ("loader-workers", detail,
                f"more loader workers: try --set data.workers={want} ({free} cores free per process); {ceiling}")
    return ("cheaper-decode", detail + f", already sharing the {cores} free cores",
            f"decode less or cheaper (--set data.decode_ms_per_sample={d.decode_ms_per_sample / 2:g}) "
            f"or add cores (--set cluster.cpu_cores={2 * c.cpu_cores}); {ceiling}")


def comm_advice(sc, res):
    s, c, b = sc.sync, sc.cluster, sc.training.batch_per_gpu
    backward, sync = BACKWARD * res.breakdown_s["compute"], res.sync_time_s
    detail = (f"one sync takes {ms(sync)}, {sync / backward:.1f}x the {ms(backward)} backward pass it could hide behind"
              if sync > backward else f"one sync takes {ms(sync)}, short enough to hide behind the {ms(backward)} backward pass")
    if (not s.overlap or s.bucket_mib == 0) and backward >= HIDEABLE * sync:
        sets = ("--set sync.overlap=true " if not s.overlap else "") + ("--set sync.bucket_mib=25" if s.bucket_mib == 0 else "")
        return "overlap", detail + ", but waits for backward to end", f"sync each bucket as backward produces it: {sets.strip()}"
    if s.strategy == "dataparallel":
        return ("ring-not-dataparallel", detail + "; DataParallel funnels everything through GPU 0",
                "let every GPU reduce its share (DistributedDataParallel): --set sync.strategy=ring")
    if s.strategy == "ps":
        return ("ring-not-ps", detail + f"; the parameter server on {s.ps_location} takes every gradient through one link",
                "spread the work: --set sync.strategy=ring (or --set sync.strategy=sharded-ps)")
    if c.nodes > 1 and sc.link_spec("inter").bandwidth_gbs <= SLOW_NETWORK_GBS and s.compression == "none":
        return ("1bit", detail + f"; the network between nodes carries {sc.link_spec('inter').bandwidth_gbs:g} GB/s",
                "send 1/28 of the bytes: --set sync.compression=1bit (or --set sync.compression=fp16 for half)")
    if c.nodes > 1 and s.strategy in ("ring", "recursive-doubling", "halving-doubling", "mpi"):
        return ("hierarchical", detail + f"; a flat {s.strategy} crosses the network between {c.nodes} nodes",
                "reduce inside each node first: --set sync.strategy=hierarchical")
    if b < SMALL_BATCH:
        return ("bigger-batch", detail + f"; a batch of {b} per GPU gives the sync little compute to amortise over",
                f"a bigger batch pays the same sync for more samples: try --set training.batch_per_gpu={4 * b}")
    if s.compression == "none":
        return "fp16", detail, "halve the bytes: --set sync.compression=fp16"
    link = "cluster.inter=ib-hdr" if c.nodes > 1 else "cluster.intra=nvlink2"
    return "faster-links", detail, f"the links themselves are the limit: try --set {link}"


def straggler_advice(sc, res):
    speeds = sc.cluster.gpu_speed
    if speeds and min(speeds) < 1:
        slow = speeds.index(min(speeds))
        return ("fix-straggler", f"GPU {slow} runs at {min(speeds):g}x speed and every step waits for it",
                "fix or replace that GPU, or drop it from the job; --set 'cluster.gpu_speed=[]' shows the run without it")
    return ("jitter", f"compute time varies by {sc.compute.jitter:.0%} per step and every step waits for the slowest draw",
            "find the noise (throttling, shared hosts, uneven batches); --set compute.jitter=0 shows the ceiling")


def compression_advice(sc, res):
    name, plain = sc.sync.compression, res.uncompressed
    codec = ms(res.breakdown_s["compression"])
    if plain and plain.iteration_time_s < res.iteration_time_s:
        slower = res.iteration_time_s / plain.iteration_time_s - 1
        return ("compression-off", f"{name} encode/decode takes {codec}, and the iteration is {slower:.0%} slower "
                f"than without compression ({ms(res.iteration_time_s)} vs {ms(plain.iteration_time_s)}): "
                f"the codec costs more than it saves", "turn it off: --set sync.compression=none")
    detail = f"{name} encode/decode takes {codec}, yet the iteration is faster than without it"
    if sc.sync.bucket_mib < 1:
        return "bigger-buckets", detail, "fewer, larger buckets launch fewer kernels: --set sync.bucket_mib=25"
    return "none", detail, "keep it"


ADVICE = {"data loading": data_advice, "communication": comm_advice, "straggler": straggler_advice,
          "compression": compression_advice}
