"""Run under mpiexec: PowerSGD (mpi_impl/powersgd.py) and top-k (mpi_impl/topk.py) against
MPI's own Allreduce and closed forms written out here:

* PowerSGD at rank min(rows, cols) of every matrix gives the exact sum (to rounding); at
  rank 1 it does not, but the approximation plus every rank's residual is the exact sum
  (error feedback loses nothing); P^ has orthonormal columns; the bytes each rank sent,
  averaged over ranks, are 2 (p-1)/p s (sum of (rows + cols) r + vector lengths).
* top-k with ratio 1 gives the exact sum (bit for bit on integer-valued data) and a zero
  residual; with ratio 0.3 the sum equals the scatter-add of every rank's k largest |values|
  found here by a full sort and gathered with MPI's Allgather; approximation + residuals is
  the exact sum; each rank sends (p-1) k (s + 4) bytes.
Prints every mismatch; exits 1 if there was any, on every rank.
"""
import math

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl.powersgd import PowerSGD, orthogonalise
from mpi_impl.topk import TopK
from verdict import finish, recorder

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
failures, fail = recorder(comm)
# a bucket: a 7 x 5 matrix, a vector of 5, a 4 x 9 matrix, conv kernels 3 x 2 x 3 x 3, a vector of 3
ARRAYS = [(0, (7, 5)), (35, (5,)), (40, (4, 9)), (76, (3, 2, 3, 3)), (130, (3,))]
N = 133



def total(x):
    out = np.empty_like(x)
    comm.Allreduce(x, out, op=MPI.SUM)
    return out


def gradient(seed, integers=False):
    rng = np.random.default_rng([seed, rank])
    return rng.integers(-50, 50, N).astype(np.float64) if integers else rng.standard_normal(N)


def check_powersgd():
    full = max(min(shape[0], math.prod(shape[1:])) for _, shape in ARRAYS if len(shape) > 1)
    exact = PowerSGD(ARRAYS, comm, rank=full, error_feedback=False)   # zeros stay zeros
    for step in range(4):                                    # warm-started Q from step 2 on
        g = gradient(step)
        if step == 2:          # a rank-deficient sum (dead units, blank pixels, a layer
            g[0:35] = 0        # with no gradient) leaves a rank-deficient Q for step 3
            g[40:76].reshape(4, 9)[1:] = 0
            g[76:130].reshape(3, 18)[:, 5:] = 0
        if not np.allclose(exact(g), total(g), rtol=1e-9, atol=1e-9):
            fail(f"powersgd at full rank is not the exact sum (step {step})")
    coder, residual_before = PowerSGD(ARRAYS, comm, rank=1), np.zeros(N)
    for step in range(3):
        g = gradient(10 + step)
        approx = coder(g)
        corrected_sum = total(g + residual_before)
        if np.allclose(approx, corrected_sum, rtol=1e-6, atol=1e-6):
            fail("powersgd at rank 1 reproduced the exact sum: the check could not tell")
        if not np.allclose(approx + total(coder.residual), corrected_sum, rtol=1e-9, atol=1e-9):
            fail(f"powersgd: approximation + residuals != the sum of corrected gradients (step {step})")
        residual_before = coder.residual.copy()
    values = sum((s[0] + math.prod(s[1:])) * 1 if len(s) > 1 else s[0] for _, s in ARRAYS)
    want = 2 * (p - 1) / p * values * 8 * 3                  # rank 1, float64, 3 calls
    if not math.isclose(comm.allreduce(coder.bytes_sent) / p, want, rel_tol=1e-12):
        fail(f"powersgd bytes {comm.allreduce(coder.bytes_sent) / p} != closed form {want}")
    P = orthogonalise(np.random.default_rng(1).standard_normal((9, 4)))
    if not np.allclose(P.T @ P, np.eye(4), atol=1e-12):
        fail("orthogonalise: columns are not orthonormal")


def largest(c, k):
    """The k indices of the largest |c|, by a full sort (ties broken towards lower indices)."""
    return np.sort(np.argsort(-np.abs(c), kind="stable")[:k])


def check_topk():
    g = gradient(0, integers=True)
    coder = TopK(comm, 1.0)
    if not np.array_equal(coder(g), total(g)) or np.any(coder.residual):
        fail("top-k with ratio 1 is not the exact sum with a zero residual")
    coder, residual = TopK(comm, 0.3), np.zeros(N)
    k = math.ceil(0.3 * N)
    for step in range(3):
        g = gradient(20 + step)
        corrected = g + residual
        mine = largest(corrected, k)
        every_index = np.empty(k * p, np.int64)
        every_value = np.empty(k * p)
        comm.Allgather(mine.astype(np.int64), every_index)
        comm.Allgather(corrected[mine], every_value)
        want = np.zeros(N)
        np.add.at(want, every_index, every_value)
        got = coder(g)
        if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
            fail(f"top-k 0.3 differs from the scatter-add of everyone's top k (step {step})")
        if not np.allclose(got + total(coder.residual), total(corrected), rtol=1e-9, atol=1e-9):
            fail(f"top-k: approximation + residuals != the sum of corrected gradients (step {step})")
        residual = coder.residual.copy()
    if coder.bytes_sent != 3 * (p - 1) * k * (8 + 4):
        fail(f"top-k bytes {coder.bytes_sent} != 3 (p-1) k (s + 4) = {3 * (p - 1) * k * 12}")


with mpi_impl.abort_on_error():
    check_powersgd()
    check_topk()

finish(comm, failures)
