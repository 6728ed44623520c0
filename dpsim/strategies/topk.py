"""Top-k sparsification with error feedback (Aji & Heafield, "Sparse Communication for
Distributed Gradient Descent", EMNLP 2017; Lin et al., "Deep Gradient Compression", ICLR 2018):
each GPU sends the k largest-magnitude values of its bucket and their indices, and keeps the
rest as the error it adds to the next step's gradient.

Per bucket of V values, k = ceil(ratio V) (sync.topk_ratio), on every GPU:
  1. error feedback: add the error to the gradient            12 V bytes (read 2, write 1)
  2. select the top k: a pass over the magnitudes and one that gathers them (torch.topk's
     radix select reads the values about twice: our assumption), writing k values and k
     int32 indices                                            8 V + 8 k bytes, 2 launches
  3. the new error: the bucket with the k sent values zeroed  8 V bytes
  4. all-gather the k values and k indices of every GPU: 8 k bytes each, round the
     cluster's rings (its own exchange, whatever sync.strategy names: the sparse vectors
     of different GPUs do not add up in place)
  5. decode: zero a dense bucket (4 V) and add the N sparse vectors into it, each entry
     reading its index and value and updating one value          4 V + 16 N k bytes, N + 1 launches
Cost: (N-1) (alpha + 8 k beta) + the kernels; bytes sent per GPU 8 k (N-1), against
2 (N-1)/N 4 V for a ring all-reduce: top-k sends less only where k < V / N.
"""
import math

from . import ring

INDEX_BYTES = 4                  # int32 indices


def kept(nbytes, ratio):
    """k: the values of a bucket of nbytes (FP32) that are sent."""
    return math.ceil(ratio * nbytes / 4)


def kernels(values, k, n):
    """(label, bytes touched, launches) of each kernel of one bucket on n GPUs."""
    return [("topk-error-feedback", 12 * values, 1), ("topk-select", 8 * values + 8 * k, 2),
            ("topk-new-error", 8 * values, 1), ("topk-decode", 4 * values + 16 * n * k, n + 1)]


def wrap(allreduce, ratio):
    """Top-k's exchange replaces `allreduce` (an all-gather round the rings)."""
    def sparse_allreduce(machine, ranks, nbytes):
        n, k = len(ranks), kept(nbytes, ratio)
        feedback, select, error, decode = kernels(nbytes / 4, k, n)
        yield machine.kernel(ranks, *feedback)
        yield machine.kernel(ranks, *select)
        yield machine.kernel(ranks, *error)
        rings = machine.cluster.rings(ranks)
        yield from ring.all_gather(machine, rings, n * (4 + INDEX_BYTES) * k / len(rings))
        yield machine.kernel(ranks, *decode)
    return sparse_allreduce
