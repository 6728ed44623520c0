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

Each matrix is taken the way round that has no more rows than columns (M^T if need be;
the factors' bytes are the same either way), so P^ lives in the smaller side.  r is capped
at min(rows, cols) per matrix (as PyTorch's PowerSGD hook does); at that rank P^ is a whole
orthonormal basis (orthogonalise completes it when P has lower rank, as a warm-started Q
can give), so P^ Q^T = P^ P^T (sum of M) is the exact sum, to rounding.  Vectors (biases)
are all-reduced as they are, first and on their own, as PyTorch's powerSGD_hook does (and
dpsim/strategies/powersgd.py with it).  The all-reduces use the --sync algorithm.

Bytes per rank per step, s bytes per value, with the ring all-reduce (ring.py):

    2 (p - 1)/p  s  (sum over matrices of (rows + cols) r  +  the vectors' lengths)

against 2 (p - 1)/p s (sum of rows cols + vectors) uncompressed.  Three all-reduces (the
vectors, the Ps, the Qs; one left out where there is nothing to send), so 6 (p - 1) alpha with
the ring.  The codec: per matrix three matmuls of
2 rows cols r FLOPs each (P, Q, and the residual; a fourth builds the result) and the
orthogonalisation's about 4 min(rows, cols) r^2; ``codec_s`` measures it.
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
    before (done twice, which keeps float32 orthogonal), then scaled to length 1.

    A column with (almost) nothing left, because P has lower rank than it has columns, is
    replaced by the unit vector of the coordinate the columns before cover least, minus its
    projection on them: so P always gets orthonormal columns, the same on every rank, and
    with as many columns as rows they are a whole basis."""
    xp = array_module(P)
    tiny = 100 * xp.finfo(P.dtype).eps
    for j in range(P.shape[1]):
        v = P[:, j]
        before = float(xp.linalg.norm(v))
        for _ in range(2):
            v -= P[:, :j] @ (P[:, :j].T @ v)
        norm = float(xp.linalg.norm(v))
        if norm <= tiny * before or norm == 0:
            v[...] = 0
            v[int(xp.argmin((P[:, :j] ** 2).sum(axis=1)))] = 1
            for _ in range(2):
                v -= P[:, :j] @ (P[:, :j].T @ v)
            norm = float(xp.linalg.norm(v))
        v /= norm
    return P


class PowerSGD:
    """The sum over ranks of one bucket's gradient, approximated as above.  `arrays`:
    parameter_arrays of the bucket; `rank`: r; `sync`: the all-reduce algorithm.

    Each matrix is taken in the orientation with no more rows than columns (transposed if
    need be: the factors' bytes are the same), so that at full rank P^ is a whole basis.
    Call it on the bucket (1-D); it returns the approximate sum (a new array).  bytes_sent
    and codec_s add up over calls."""

    def __init__(self, arrays, comm, rank, sync="ring", error_feedback=True, seed=0):
        self.comm, self.sync, self.error_feedback = comm, sync, error_feedback
        self.matrices, self.vectors = [], []        # (offset, shape, r); (offset, length)
        for offset, shape in arrays:
            m = matrix_of(shape)
            if m:
                self.matrices.append((offset, m, min(rank, *m)))
            else:
                self.vectors.append((offset, math.prod(shape)))
        self.seed = seed
        self.Q = None                     # per matrix: (larger side) x r, the same on every rank
        self.residual = None
        self.bytes_sent, self.codec_s = 0, 0.0

    def _start(self, g):
        xp = array_module(g)
        rng = np.random.default_rng([self.seed, 2019])
        self.Q = [xp.asarray(rng.standard_normal((max(m), r))).astype(g.dtype)
                  for _, m, r in self.matrices]
        self.residual = xp.zeros_like(g)

    def _matrix(self, flat, k):
        """Matrix k of a flat bucket as a view, rows <= cols (transposed if need be)."""
        offset, (rows, cols), _ = self.matrices[k]
        view = flat[offset:offset + rows * cols].reshape(rows, cols)
        return view.T if rows > cols else view

    def _allreduce(self, x):
        """Sum over ranks, in place, with the --sync algorithm (its bytes counted); seconds."""
        start = time.perf_counter()
        mpi_impl.allreduce(x, algo=self.sync, comm=self.comm, out=x, check=False)
        self.bytes_sent += mpi_impl.bytes_sent(self.sync, x.size, x.itemsize,
                                               self.comm.Get_size(), self.comm.Get_rank())
        return time.perf_counter() - start

    def __call__(self, g):
        xp = array_module(g)
        if self.Q is None:
            self._start(g)
        tick = time.perf_counter()
        M = g + self.residual if self.error_feedback else g.copy()
        out = xp.empty_like(g)
        plain = xp.empty(sum(n for _, n in self.vectors), g.dtype)
        Ps = xp.empty(sum(min(m) * r for _, m, r in self.matrices), g.dtype)
        Qs = xp.empty(sum(max(m) * r for _, m, r in self.matrices), g.dtype)
        at = 0
        for o, n in self.vectors:                                   # the vectors as they are
            plain[at:at + n] = g[o:o + n]
            at += n
        wire_s = self._allreduce(plain) if plain.size else 0.0      # first, on their own (PyTorch's hook)
        P, Q, p_at, q_at = [], [], 0, 0
        for k, (_, m, r) in enumerate(self.matrices):               # then every P = M Q
            P.append(Ps[p_at:p_at + min(m) * r].reshape(min(m), r))
            Q.append(Qs[q_at:q_at + max(m) * r].reshape(max(m), r))
            xp.matmul(self._matrix(M, k), self.Q[k], out=P[k])
            p_at, q_at = p_at + min(m) * r, q_at + max(m) * r
        if self.matrices:
            wire_s += self._allreduce(Ps)
        for k in range(len(self.matrices)):
            orthogonalise(P[k])
            xp.matmul(self._matrix(M, k).T, P[k], out=Q[k])         # this rank's Q = M^T P^
            if self.error_feedback:
                self._matrix(self.residual, k)[...] = self._matrix(M, k) - P[k] @ Q[k].T
        if self.matrices:
            wire_s += self._allreduce(Qs)
        for k in range(len(self.matrices)):
            self._matrix(out, k)[...] = P[k] @ Q[k].T
            self.Q[k] = Q[k].copy()                                 # warm start for the next step
        at = 0
        for o, n in self.vectors:
            out[o:o + n] = plain[at:at + n]
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
