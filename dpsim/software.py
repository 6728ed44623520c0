"""Software costs per collective call and per tensor: what the framework adds on top of the wire.

`sync.framework` says how gradients become collective calls:
  ddp      PyTorch DistributedDataParallel: buckets of sync.bucket_mib (25 MiB, the c10d
           reducer's kDefaultBucketBytesCap), one call each, started when the bucket is full.
  horovod  Horovod: tensors ready in the same cycle are fused into one call of at most
           sync.fusion_mib (HOROVOD_FUSION_THRESHOLD); the background thread looks for ready
           tensors once per sync.cycle_ms (HOROVOD_CYCLE_TIME), so a bucket starts at the
           first cycle tick after it is ready: up to one cycle late.
  tf1      TensorFlow 1.x replicated training (tf_cnn_benchmarks variable_update=replicated):
           one NcclAllReduce per variable (tensorflow/benchmarks#71 stack trace), i.e. per
           layer VARIABLES_PER_LAYER calls (a weight and a bias, or a norm's scale and shift),
           no buckets.
Every call pays `sync.call_overhead_us` (default 0, the textbook collective); NCCL's fixed cost
of one collective is NCCL_CALL_US: the base latency of its Simple-protocol ring, 8.4 us, in
NCCL's own tuning model (src/graph/tuning.cc,
baseLat; measured 8-byte all-reduces on one node take 12-15 us with the hops included,
NVIDIA/nccl#527, deepseek-ai/DeepEP#303). It applies to direct (NCCL-style) calls; a
host-staged MPI message pays sync.message_overhead_us per message instead.

Cost of one bucket synchronised at time `ready` (seconds after backward starts):
    start = ceil(ready / cycle) x cycle   (horovod; else ready)
    time  = calls x call_overhead + the strategy's all-reduce
"""
import math

FRAMEWORKS = ("ddp", "horovod", "tf1")
NCCL_CALL_US = 8.4      # src/graph/tuning.cc baseLat, Ring / Simple
VARIABLES_PER_LAYER = 2


def bucket_bytes(sync) -> float:
    """The size at which a bucket closes (bytes); 1 byte = every layer its own (tf1)."""
    if sync.framework == "tf1":
        return 1.0
    mib = sync.fusion_mib if sync.framework == "horovod" else sync.bucket_mib
    return mib * 2 ** 20


def calls_per_bucket(sync) -> int:
    return VARIABLES_PER_LAYER if sync.framework == "tf1" else 1


def call_overhead_s(sc) -> float:
    """Fixed seconds per collective call: NCCL-style direct calls only (not host-staged MPI,
    not the 1-bit exchange, whose MPI messages pay their own overhead)."""
    s = sc.sync
    if s.staging == "host" or s.compression == "1bit":
        return 0.0
    return s.call_overhead_us * 1e-6


def cycle_start(ready_s: float, sync) -> float:
    """When a bucket ready at ready_s (after backward starts) is launched: Horovod's next cycle
    tick, else at once."""
    if sync.framework != "horovod" or not sync.cycle_ms:
        return ready_s
    cycle = sync.cycle_ms / 1e3
    return math.ceil(ready_s / cycle - 1e-9) * cycle
