"""PowerSGD's matrix products and orthogonalisation, timed as mpi_impl runs them on the model's
weight matrices: the primitive behind compute.powersgd_gflops.

For each matrix dpsim compresses (dpsim.strategies.powersgd.compressed: n x m with n <= m, as
model.matrices and mpi_impl.powersgd take it, at r' = min(r, n, m)), the calls of
mpi_impl.powersgd.PowerSGD, into arrays allocated once:

    P = M Q                  2 n m r' FLOPs
    orthogonalise(P)         Gram-Schmidt (mpi_impl.powersgd.orthogonalise), 2 n r'^2 FLOPs
    Q = M^T P                2 n m r' FLOPs
    M' = P Q^T               2 n m r' FLOPs, written into an n x m matrix as the result is

`lowrank_seconds` runs in the 2-rank probe (course/probe.py, --lowrank r), both ranks at once as
in training, every round; the slowest rank's mean of `reps` passes. `fit_rate` turns it into
the rate dpsim prices them at: FLOPs x share / seconds, share the ranks per device that dpsim
multiplies every kernel by (dpsim.sharing), as the 1-bit codec's fit does. dpsim takes
max(FLOPs / rate, bytes / memory bandwidth) per product: where the rate is the longer of the
two for every product, dpsim's products and orthogonalisation take exactly the seconds timed.
NumPy runs these thin products far below a large matmul's FLOP/s (the peak): M Q and M^T P are
matrix-vector products at rank 1, and P Q^T goes through a general matmul with an inner
dimension of r' and a copy into the result.
"""
import time

import numpy as np

from dpsim import sharing
from dpsim.strategies.powersgd import compressed


def shapes(matrices, rank):
    """(n, m, r') of each of the model's matrices ([n, m] rows, n <= m) that PowerSGD compresses."""
    return [(n, m, r) for n, m, r in compressed([(n, m, None) for n, m in matrices], rank)]


def flops(matrices, rank):
    """FLOPs of one pass, as dpsim counts them: three products and Gram-Schmidt."""
    return sum(3 * 2 * n * m * r + 2 * n * r * r for n, m, r in shapes(matrices, rank))


def lowrank_seconds(matrices, rank, xp=np, clock=time.perf_counter, reps=5, barrier=lambda: None):
    """Mean seconds of one pass over the matrices (after one untimed pass): the products and
    Gram-Schmidt of mpi_impl's PowerSGD, on random float32 data."""
    from mpi_impl.powersgd import orthogonalise
    rng = np.random.default_rng(0)
    work = []
    for n, m, r in shapes(matrices, rank):
        M, Q = (xp.asarray(rng.standard_normal(s).astype(np.float32)) for s in ((n, m), (m, r)))
        work.append((M, Q, xp.empty((n, r), np.float32), xp.empty((n, m), np.float32)))

    def one_pass():
        for M, Q, P, out in work:
            xp.matmul(M, Q, out=P)
            orthogonalise(P)
            xp.matmul(M.T, P, out=Q)
            out[...] = P @ Q.T
    one_pass()
    barrier()
    start = clock()
    for _ in range(reps):
        one_pass()
    return (clock() - start) / reps


def fit_rate(m, capacity):
    """compute.powersgd_gflops from the 2-rank probes' lowrank_s (the median of the rounds), or
    None where the probes did not time it (a sidecar of before it, a model without matrices)."""
    rounds = [p.lowrank for p in m.probes.get(2, [])]
    if not rounds or any(r is None for r in rounds) or not m.model.get("matrices"):
        return None
    rank, seconds = rounds[0][0], float(np.median([s for _, s in rounds]))
    work = flops(m.model["matrices"], rank)
    if not work or seconds <= 0:
        return None
    return work * sharing.ranks_per_device(2, capacity) / seconds / 1e9
