"""PowerSGD: rank-r compression of each gradient matrix with error feedback (Vogels, Karimireddy
& Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for Distributed Optimization",
NeurIPS 2019, Algorithm 1), as PyTorch DDP's powerSGD_hook runs it on a bucket.

Per bucket, on every GPU; a weight of n x m (a convolution's out x in*kh*kw, a linear
layer's out x in) at rank r' = min(r, n, m) is compressed when n m >= 2 (n + m) r' (PyTorch's
min_compression_rate of 2); the rest (biases, norms, small matrices) are all-reduced as they are:
  1. error feedback: add last step's error to the bucket           12 bytes per value
  2. all-reduce the uncompressed values (4 u bytes), as PyTorch does first
  3. P = M Q (Q: last step's, warm start)                           2 n m r' FLOPs
  4. all-reduce every P of the bucket (4 sum n r' bytes)
  5. orthogonalise P (Gram-Schmidt)                                 2 n r'^2 FLOPs
  6. Q = M^T P                                                      2 n m r' FLOPs
  7. all-reduce every Q (4 sum m r' bytes)
  8. M' = P Q^T, the new error M - M'                               2 n m r' FLOPs, 12 bytes per value
With sync.powersgd_error = "local" (Vogels et al., Algorithm 2; mpi_impl/powersgd.py) the error is
M - P Q_w^T, this GPU's own Q before step 7: one more product, 2 n m r' FLOPs, before the all-reduce.
Each product reads M and writes its factor: 4 (n m + n r' + m r') bytes; it and Gram-Schmidt
take the longer of their bytes at the memory bandwidth and their FLOPs at the matmul rate:
    max(FLOPs / rate, bytes / cluster.gpu.mem_bw_gbs)                         (Machine.kernel)
rate = compute.powersgd_gflops where given (course calibrate times NumPy's products and
Gram-Schmidt on the model's matrices at PowerSGD's rank, course/lowrank.py: thin products run
far below a large matmul), else the GPU's dense-GEMM peak (cluster.gpu.fp32_tflops, the
vendor's figure) x compute.efficiency. Gram-Schmidt on the GPU presets is assumed to run at that
rate too, one launch per matrix (a batched kernel; no measured source: at r' <= 4 its 2 n r'^2
FLOPs are r'/m of a product's). Each matrix is one launch per step. Every step is the
framework's own kernels (additions, BLAS products, as the optimizer's update is), so their
bytes move at the memory bandwidth, not at compute.codec_gbs, the rate of a codec's own kernels
(1-bit's quantiser; course calibrate fits it to 1-bit's, far below NumPy's additions). Bytes sent per GPU by a ring: 2 (N-1)/N (4 sum (n + m) r'
+ 4 u), against 2 (N-1)/N m for the whole bucket (dpsim.analytic.powersgd_*).
"""
import math

from ..errors import ScenarioError

MIN_COMPRESSION_RATE = 2        # PyTorch PowerSGDState's default


def compressed(matrices, rank):
    """(n, m, r') of each matrix PowerSGD compresses at `rank`."""
    out = []
    for n, m, _ in matrices:
        r = min(rank, n, m)
        if n * m >= MIN_COMPRESSION_RATE * (n + m) * r:
            out.append((n, m, r))
    return out


def plan(bucket, rank):
    """(compressed matrices, uncompressed values) of one bucket."""
    kept = compressed(bucket.matrices, rank)
    return kept, bucket.nbytes / 4 - sum(n * m for n, m, _ in kept)


def products(kept):
    """(bytes, FLOPs, launches) of one of the three matrix products over the bucket's matrices."""
    return (4 * sum(n * m + n * r + m * r for n, m, r in kept),
            2 * sum(n * m * r for n, m, r in kept), len(kept))


def wrap(allreduce, rank, buckets, local_error=False):
    """The inner all-reduce run on the factors; `buckets` in the order the engine syncs them
    (each call is the next bucket, whose matrices it compresses). local_error: the error from
    this GPU's own P Q^T, one more product (Vogels et al., Algorithm 2)."""
    turn = [0]

    def compressed_allreduce(machine, ranks, nbytes):
        bucket = buckets[turn[0] % len(buckets)]
        turn[0] += 1
        if not math.isclose(bucket.nbytes, nbytes):
            bucket = next(b for b in buckets if math.isclose(b.nbytes, nbytes))
        kept, plain = plan(bucket, rank)
        values = nbytes / 4
        product = products(kept)
        yield machine.kernel(ranks, "powersgd-error-feedback", 12 * values, library=True)
        if plain > 0:
            yield from allreduce(machine, ranks, 4 * plain)
        if not kept:
            return
        yield machine.kernel(ranks, "powersgd-P=MQ", product[0], product[2], product[1], library=True)
        yield from allreduce(machine, ranks, 4 * sum(n * r for n, _, r in kept))
        yield machine.kernel(ranks, "powersgd-orthogonalise", 8 * sum(n * r for n, _, r in kept), len(kept),
                             2 * sum(n * r * r for n, _, r in kept), library=True)
        yield machine.kernel(ranks, "powersgd-Q=MtP", product[0], product[2], product[1], library=True)
        if local_error:
            yield machine.kernel(ranks, "powersgd-own-M'=PQt", product[0], product[2], product[1], library=True)
        yield from allreduce(machine, ranks, 4 * sum(m * r for _, m, r in kept))
        yield machine.kernel(ranks, "powersgd-M'=PQt", product[0], product[2], product[1], library=True)
        yield machine.kernel(ranks, "powersgd-new-error", 12 * values, library=True)
    return compressed_allreduce


def check(sc, model):
    """A rank of 0 is refused by its key's rule; above min(n, m) of every matrix compresses none."""
    matrices = [(min(layer.matrix), layer) for layer in model.layers if layer.matrix]
    if not matrices:
        raise ScenarioError("sync.compression", f"powersgd compresses matrix-shaped weights, and model "
                            f"{model.name!r} has none: give a custom model's model.matrices ([rows, columns] per layer; "
                            f"course calibrate writes them), choose a preset, or compression none")
    largest, layer = max(matrices, key=lambda x: x[0])
    if sc.sync.powersgd_rank > largest:
        raise ScenarioError("sync.powersgd_rank", f"{sc.sync.powersgd_rank} is above min(n, m) of every matrix of "
                            f"{model.name}; the largest is {largest} ({layer.name}, {layer.matrix[0]} x "
                            f"{layer.matrix[1]}): choose 1 to {largest}")
