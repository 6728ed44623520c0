"""Top-k sparsification with error feedback: each rank sends only its k largest values.

Aji & Heafield, "Sparse Communication for Distributed Gradient Descent", EMNLP 2017; error
feedback as in Stich, Cordonnier & Jaggi, "Sparsified SGD with Memory", NeurIPS 2018.  For a
gradient of n values and a ratio in (0, 1], k = ceil(ratio n), the same on every rank:

    c = gradient + residual              error feedback: what was not sent before
    I = the k indices of the largest |c|, in increasing order; V = c[I]
    all-gather V (k values) and I (k int32 indices) from every rank  (all_gather.py)
    sum = 0; sum[I_w] += V_w for every rank w in rank order           (scatter-add)
    residual = c, with the k sent entries set to zero

The caller divides the sum by p, as for every other sync.  With ratio 1 every value is sent
and the sum is exact (to the order of the additions) and the residual zero.

Bytes per rank per step, s bytes per value (ring all-gather of k values and k indices from
each of p ranks):

    (p - 1) k (s + 4)

against 2 (p - 1)/p n s for the ring all-reduce: top-k sends less when k (s + 4) p < 2 n s,
i.e. ratio < 2 s / (p (s + 4)) (1/p for float32: the all-gather grows with p, the all-reduce
does not).  The codec: a selection (argpartition, O(n)) and the scatter-add of p k values;
``codec_s`` measures it.
"""
from __future__ import annotations

import math
import time

from .all_gather import all_gather
from .device import array_module
from .wire import make_wire


def kept(n: int, ratio: float) -> int:
    """k: how many of n values a rank sends, ceil(ratio n), at least 1 (0 of nothing)."""
    if n == 0:
        return 0
    return max(1, min(n, math.ceil(ratio * n - 1e-9)))


def scatter_add(xp, total, indices, values):
    """total[indices] += values, repeated indices adding up, in order."""
    if xp.__name__ == "numpy":
        xp.add.at(total, indices, values)
    else:                                     # CuPy
        import cupyx
        cupyx.scatter_add(total, indices, values)


class TopK:
    """The sum over ranks of a gradient, from each rank's k largest values (see above).
    Call it on a 1-D gradient; it returns the sum (a new array).  bytes_sent and codec_s add
    up over calls."""

    def __init__(self, comm, ratio, error_feedback=True):
        self.comm, self.ratio, self.error_feedback = comm, ratio, error_feedback
        self.residual = None
        self.wire = None
        self.bytes_sent, self.codec_s = 0, 0.0

    def __call__(self, g):
        xp = array_module(g)
        if self.wire is None:
            self.wire = make_wire(self.comm, xp)
            self.residual = xp.zeros_like(g)
        tick = time.perf_counter()
        p, n = self.wire.size, g.size
        k = kept(n, self.ratio)
        corrected = g + self.residual
        if k < n:
            indices = xp.sort(xp.argpartition(-xp.abs(corrected), k - 1)[:k]).astype(xp.int32)
        else:
            indices = xp.arange(n, dtype=xp.int32)
        values = corrected[indices]
        start = time.perf_counter()
        before = self.wire.bytes_sent
        every_value = all_gather(values, self.wire, xp.empty(k * p, g.dtype))
        every_index = all_gather(indices, self.wire, xp.empty(k * p, xp.int32))
        self.bytes_sent += self.wire.bytes_sent - before
        wire_s = time.perf_counter() - start
        total = xp.zeros_like(g)
        scatter_add(xp, total, every_index, every_value)
        if self.error_feedback:
            corrected[indices] = 0
            self.residual = corrected
        self.codec_s += time.perf_counter() - tick - wire_s
        return total


def bytes_per_step(n: int, ratio: float, itemsize: int, p: int) -> int:
    """Bytes every rank sends per call (the closed form above)."""
    return (p - 1) * kept(n, ratio) * (itemsize + 4)
