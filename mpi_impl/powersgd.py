"""PowerSGD: each gradient matrix sent as two thin factors, with error feedback.

Vogels, Karimireddy & Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for
Distributed Optimization", NeurIPS 2019 (Algorithms 1 and 2).  For every matrix-shaped
gradient M (rows x cols; a convolution's kernels F x C x k x k as F x Ckk) and a rank r,
the same on every rank:

    M  = gradient + residual                   error feedback: what was not sent before
    P  = M Q                                   rows x r; Q (cols x r) is last step's, the
                                               "warm start" (random at first, one seed)
    P  = all-reduce(P)                         the sum over ranks
    P^ = orthogonalise(P)                      Gram-Schmidt: orthonormal columns
    Q  = M^T P^                                cols x r, this rank's
    residual = M - P^ Q^T                      what this rank's approximation missed
    Q  = all-reduce(Q)                         the sum over ranks, kept for the next step
    sum over ranks of M  ~  P^ Q^T

Vectors (biases) are all-reduced as they are.  The all-reduces use the --sync algorithm.
r is capped at min(rows, cols) per matrix (as PyTorch's PowerSGD hook does); at that rank
P^ spans the column space of the sum (when rows <= cols it is a whole orthonormal basis),
so P^ Q^T is the exact sum, to rounding.

Bytes per rank per step, s bytes per value, with the ring all-reduce (ring.py):

    2 (p - 1)/p  s  (sum over matrices of (rows + cols) r  +  the vectors' lengths)

against 2 (p - 1)/p s (sum of rows cols + vectors) uncompressed.  Three all-reduces (vectors,
the Ps, the Qs), so 6 (p - 1) alpha with the ring.  The codec: per matrix two matmuls of
2 rows cols r FLOPs each, one more for the residual, and the orthogonalisation's
about 4 rows r^2; ``codec_s`` measures it.
"""
from __future__ import annotations

import math
import time

import numpy as np

import mpi_impl
from mpi_impl.device import array_module


def parameter_arrays(net, lo, hi):
    """[(offset from lo, shape)] of every parameter array of net's layers inside [lo, hi)."""
    arrays = []
    for i, a, b in net.layer_offsets:
        if lo <= a and b <= hi:
            offset = a - lo
            for shape in net.layers[i].param_shapes().values():
                arrays.append((offset, shape))
                offset += math.prod(shape)
    return arrays


def matrix_of(shape):
    """(rows, cols) of a parameter array's gradient as PowerSGD sees it, None for a vector."""
    if len(shape) < 2:
        return None
    return shape[0], math.prod(shape[1:])


def largest_rank(shapes):
    """The highest rank any matrix among `shapes` can take: max over matrices of min(rows, cols)
    (0 when there is no matrix)."""
    return max((min(m) for m in map(matrix_of, shapes) if m), default=0)


def orthogonalise(P):
    """Gram-Schmidt on P's columns, in place: each column minus its projection on the ones
    before (done twice, which keeps float32 orthogonal), then scaled to length 1.  A column
    with nothing left becomes zero."""
    xp = array_module(P)
    for j in range(P.shape[1]):
        v = P[:, j]
        for _ in range(2):
            v -= P[:, :j] @ (P[:, :j].T @ v)
        norm = float(xp.linalg.norm(v))
        if norm > 0:
            v /= norm
        else:
            v[...] = 0
    return P


class PowerSGD:
    """The sum over ranks of one bucket's gradient, approximated as above.  `arrays`:
    parameter_arrays of the bucket; `rank`: r; `sync`: the all-reduce algorithm.

    Call it on the bucket (1-D); it returns the approximate sum (a new array).  bytes_sent
    and codec_s add up over calls."""

    def __init__(self, arrays, comm, rank, sync="ring", error_feedback=True, seed=0):
        self.comm, self.sync, self.error_feedback = comm, sync, error_feedback
        self.matrices, self.vectors = [], []
        for offset, shape in arrays:
            m = matrix_of(shape)
            if m:
                self.matrices.append((offset, m[0], m[1], min(rank, *m)))
            else:
                self.vectors.append((offset, math.prod(shape)))
        self.seed = seed
        self.Q = None                     # per matrix: cols x r, the same on every rank
        self.residual = None
        self.bytes_sent, self.codec_s = 0, 0.0

    def _start(self, g):
        xp = array_module(g)
        rng = np.random.default_rng([self.seed, 2019])
        self.Q = [xp.asarray(rng.standard_normal((cols, r))).astype(g.dtype)
                  for _, _, cols, r in self.matrices]
        self.residual = xp.zeros_like(g)

    def _allreduce(self, x):
        """Sum over ranks, in place, with the --sync algorithm (its bytes counted)."""
        mpi_impl.allreduce(x, algo=self.sync, comm=self.comm, out=x, check=False)
        self.bytes_sent += mpi_impl.bytes_sent(self.sync, x.size, x.itemsize,
                                               self.comm.Get_size(), self.comm.Get_rank())

    def __call__(self, g):
        xp = array_module(g)
        if self.Q is None:
            self._start(g)
        tick = time.perf_counter()
        wire_s = 0.0
        M = g + self.residual if self.error_feedback else g.copy()
        out = xp.empty_like(g)
        vectors = xp.concatenate([g[o:o + n] for o, n in self.vectors] or [g[:0]])
        Ps = xp.empty(sum(rows * r for _, rows, _, r in self.matrices), g.dtype)
        Qs = xp.empty(sum(cols * r for _, _, cols, r in self.matrices), g.dtype)
        mats, P, Q = [], [], []
        p_at = q_at = 0
        for (o, rows, cols, r), q in zip(self.matrices, self.Q):
            mats.append(M[o:o + rows * cols].reshape(rows, cols))
            P.append(Ps[p_at:p_at + rows * r].reshape(rows, r))
            Q.append(Qs[q_at:q_at + cols * r].reshape(cols, r))
            xp.matmul(mats[-1], q, out=P[-1])                       # P = M Q
            p_at, q_at = p_at + rows * r, q_at + cols * r
        for buffer in (vectors, Ps):
            start = time.perf_counter()
            self._allreduce(buffer)
            wire_s += time.perf_counter() - start
        for k, (o, rows, cols, r) in enumerate(self.matrices):
            orthogonalise(P[k])
            xp.matmul(mats[k].T, P[k], out=Q[k])                    # this rank's Q = M^T P^
            if self.error_feedback:
                self.residual[o:o + rows * cols] = (mats[k] - P[k] @ Q[k].T).reshape(-1)
        start = time.perf_counter()
        self._allreduce(Qs)
        wire_s += time.perf_counter() - start
        for k, (o, rows, cols, r) in enumerate(self.matrices):
            xp.matmul(P[k], Q[k].T, out=out[o:o + rows * cols].reshape(rows, cols))
            self.Q[k] = Q[k].copy()                                 # warm start for the next step
        at = 0
        for o, n in self.vectors:
            out[o:o + n] = vectors[at:at + n]
            at += n
        self.codec_s += time.perf_counter() - tick - wire_s
        return out


def bytes_per_step(arrays, rank, itemsize, p):
    """Mean bytes a rank sends per call with the ring (the closed form above, exact for the
    mean over ranks)."""
    values = 0
    for _, shape in arrays:
        m = matrix_of(shape)
        values += (m[0] + m[1]) * min(rank, *m) if m else math.prod(shape)
    return 2 * (p - 1) / p * values * itemsize
