"""One GPU's work per iteration: compute times, and gradient buckets in backward order.

Buckets follow PyTorch DistributedDataParallel (Li et al., "PyTorch Distributed", VLDB 2020):
walking the layers in the order backward produces their gradients, a bucket is closed once it
holds at least `bucket_mib` MiB (DDP's bucket_cap_mb, default 25 MiB), and it is ready to
synchronise the moment backward has produced its last gradient. `bucket_mib = 0` means one
bucket holding everything, ready when backward ends (no overlap possible).
Gradients are FP32: 4 bytes per parameter (mixed precision keeps FP32 master gradients).
Compute per iteration is the GPU's time (dpsim.compute) unless one host thread cannot issue
the kernels fast enough: with several GPUs driven by one process, forward + backward take
max(GPU time, GPUs in the process x compute.dispatch_ms_per_gpu) -- the low GPU
utilisation that shows up in a profile (the mxnet-vs-tf-4gpu scenario).
With `compute.per_layer` each layer's share of backward is its time by its kind (FLOP-bound
or, for norms, memory-bound) rather than its share of the FLOPs.
"""
import dataclasses
from dataclasses import dataclass

from . import compute, derived, software

GRAD_BYTES_PER_PARAM = 4

# Bytes per sample of the input tensor the model sees (float32 after decoding) and of its
# output (float32 logits): what DataParallel scatters and gathers, and what the host copies
# to the GPU. CIFAR 3x32x32, ImageNet 3x224x224, Inception 3x299x299, BERT 128 tokens x 3
# int64 tensors (ids, mask, segment) with a 2-class head.
INPUT_OUTPUT_BYTES = {
    "cifar": (3 * 32 * 32 * 4, 10 * 4),
    "imagenet": (3 * 224 * 224 * 4, 1000 * 4),
    "inception-v3": (3 * 299 * 299 * 4, 1000 * 4),
    "bert": (128 * 3 * 8, 2 * 4),
}


def input_output_bytes(preset: str) -> tuple[int, int]:
    if "cifar" in preset or preset == "custom":
        return INPUT_OUTPUT_BYTES["cifar"]
    if preset.startswith("bert"):
        return INPUT_OUTPUT_BYTES["bert"]
    if preset == "inception-v3":
        return INPUT_OUTPUT_BYTES["inception-v3"]
    return INPUT_OUTPUT_BYTES["imagenet"]


@dataclass(frozen=True)
class Bucket:
    nbytes: float
    ready_s: float      # seconds after backward starts when its last gradient is ready
    matrices: tuple = ()  # (rows, columns, layer name) of each matrix-shaped weight in it (PowerSGD)
    calls: int = 1      # collective calls it takes (dpsim.software: tf1 calls once per variable)


@dataclass(frozen=True)
class Workload:
    forward_s: float
    backward_s: float
    update_s: float
    grad_bytes: float
    buckets: tuple[Bucket, ...]
    input_bytes: int        # per sample
    output_bytes: int       # per sample


def make_buckets(grad_bytes, fractions, backward_s, bucket_bytes, matrices=None) -> tuple[Bucket, ...]:
    """Group per-layer gradients (backward order) into buckets of at least bucket_bytes;
    matrices: each layer's (rows, columns, name), or () for a layer of vectors only."""
    matrices = matrices or [()] * len(grad_bytes)
    if bucket_bytes <= 0:
        return (Bucket(float(sum(grad_bytes)), backward_s, tuple(m for m in matrices if m)),)
    buckets, size, elapsed, held = [], 0.0, 0.0, []
    for nbytes, share, matrix in zip(grad_bytes, fractions, matrices):
        size += nbytes
        elapsed += share * backward_s
        held += [matrix] if matrix else []
        if size >= bucket_bytes:
            buckets.append(Bucket(size, elapsed, tuple(held)))
            size, held = 0.0, []
    if size > 0:
        buckets.append(Bucket(size, backward_s, tuple(held)))
    return tuple(buckets)


def build(sc) -> Workload:
    """One GPU's work per synchronised step: the whole batch, or with training.double_buffering
    each of its two halves (the engine runs two such steps per iteration)."""
    model, c, peak, mem_bw = sc.model_spec(), sc.compute, derived.peak_tflops(sc), derived.memory_bw_gbs(sc)
    batch = sc.training.batch_per_gpu / (2 if sc.training.double_buffering else 1)
    total = compute.compute_time_s(model.flops_per_sample, batch, peak, c.efficiency, c.half_batch)
    total = max(total, derived.gpus_per_host_thread(sc) * c.dispatch_ms_per_gpu / 1e3)
    forward_s, backward_s = total / 3 + c.overhead_ms / 1e3, total * 2 / 3
    grads = model.grad_bytes_backward(GRAD_BYTES_PER_PARAM)
    if c.per_layer:            # each layer timed by its kind, the total kept (see ComputeConfig.per_layer)
        s_per_flop = 1 / (peak * 1e12 * compute.efficiency(batch, c.efficiency, c.half_batch))
        fractions = model.backward_time_fraction(s_per_flop, 1 / (mem_bw * 1e9))
    else:
        fractions = model.backward_flops_fraction()
    matrices = [(*layer.matrix, layer.name) if layer.matrix else () for layer in reversed(model.layers)
                if layer.params > 0]
    buckets = make_buckets(grads, fractions, backward_s, software.bucket_bytes(sc.sync), matrices)
    if software.calls_per_bucket(sc.sync) > 1:
        buckets = tuple(dataclasses.replace(b, calls=software.calls_per_bucket(sc.sync)) for b in buckets)
    inp, out = input_output_bytes(sc.model.preset)
    return Workload(forward_s, backward_s, compute.update_time_s(model.params, mem_bw),
                    float(model.params * GRAD_BYTES_PER_PARAM), buckets, inp, out)
