"""Communication competing with compute: a collective's kernels slow the backward pass they overlap.

NCCL runs a collective as CUDA blocks on the GPU's own SMs, one block per channel, and its
traffic passes through the GPU's memory: NCCL's maintainer puts it at 2x the link rate at
least (stored, then read back) and up to 3x when it reads and writes the user's buffers
(NVIDIA/nccl#1428, sjeaugey 2024-09-06; the same for one-block send/recv, NVIDIA/nccl#1433).
Measured: a GEMM 1.18 -> 2.08 ms and attention 0.18 -> 0.33 ms on an A100 while an NCCL
all-gather overlaps them (NVIDIA/nccl#1428); the TensorFlow performance guide says NCCL takes
one SM and adds L2 pressure (tensorflow docs_src/performance/performance_models.md, "NCCL").

Model: while a sync runs, the compute it overlaps proceeds at 1 / (1 + s) of its speed, with
    s = channels / SMs  +  MEMORY_TRAFFIC x (bytes the GPU sends per second) / memory bandwidth
(channels: sync.nccl_channels; SMs: hardware.SM_COUNT). Backward is stretched by s x (the
time a sync overlapped it), a first-order estimate: the stretch itself is not overlapped
again. The measured 1.5-2.5x slowdowns are larger than either share (wave quantisation:
a GEMM of exactly one wave needs a second when a few SMs are gone), so this is a model, and
an optimistic one. It applies to direct GPU collectives on a GPU preset with a known SM count.
"""
from .hardware import SM_COUNT

MEMORY_TRAFFIC = 3      # bytes of memory traffic per byte sent (NVIDIA/nccl#1428: 2x to 3x)


def applies(sc) -> bool:
    gpu = sc.cluster.gpu
    return (sc.compute.contention and sc.sync.staging == "direct" and sc.sync.compression != "1bit"
            and isinstance(gpu, str) and gpu in SM_COUNT)


def slowdown(sc, bytes_per_s: float) -> float:
    """s: the fraction by which overlapped compute is slowed, at a sync sending bytes_per_s."""
    gpu = sc.gpu_spec()
    return sc.sync.nccl_channels / SM_COUNT[gpu.name] + MEMORY_TRAFFIC * bytes_per_s / (gpu.mem_bw_gbs * 1e9)


def overlap(intervals, start: float, end: float) -> tuple[float, float]:
    """(seconds of [start, end] some sync was running, bytes those syncs sent per second of it)
    from (t0, t1, bytes sent by one GPU) intervals."""
    seconds = sent = 0.0
    for t0, t1, nbytes in intervals:
        inside = max(0.0, min(t1, end) - max(t0, start))
        if t1 > t0 and inside > 0:
            seconds += inside
            sent += nbytes * inside / (t1 - t0)
    return seconds, (sent / seconds if seconds else 0.0)
