"""Run under mpiexec: a shared-memory all-reduce (argv[1]: shm_ring, the default, or
shm_halving_doubling) against MPI's own Allreduce (the oracle).

Lengths divisible by p and not (0, 1, fewer than the ranks, odd, larger), float32 and
float64, each reduced several times in a row in the same window with fresh values (a step
that read a chunk before its neighbour finished it, or a call that ran into the next one,
shows as a wrong sum, and so does a hand-back into the wrong rank's chunk).  Every rank must
end with the same bits.  Also: an array not from the window is refused on every rank.
Prints every mismatch and exits 1 if there was any, on every rank.
"""

import importlib
import sys

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl.shm_window import SharedBuffer
from verdict import close_enough as close_to, finish, oracle, recorder

algorithm = importlib.import_module(f"mpi_impl.{sys.argv[1] if len(sys.argv) > 1 else 'shm_ring'}")
comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
LENGTHS = sorted({0, 1, 2, max(p - 1, 0), p, p + 1, 7, 33, 1000, 4097, 3 * 4096, 100_003})
CALLS = 4
failures, fail = recorder(comm)


def close_enough(y, ref, x):
    return close_to(comm, y, ref, x)


def refused(x, shared):
    try:
        algorithm.allreduce(x, shared)
    except ValueError as e:
        return "not the shared buffer's array" in str(e)
    return False


with mpi_impl.abort_on_error():
    for dtype in ("float32", "float64"):
        for n in LENGTHS:
            shared = SharedBuffer(n, dtype, comm)
            for call in range(CALLS):
                rng = np.random.default_rng(10_000 * rank + 10 * n + call)
                x = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)
                shared.array[:] = x
                y = algorithm.allreduce(shared.array, shared, check=call == 0)
                ref = oracle(comm, x)
                where = f"n={n} {dtype} call {call}"
                if y is not shared.array:
                    fail(f"{where}: did not return the shared array")
                if not close_enough(shared.array, ref, x):
                    fail(f"{where}: differs from MPI_Allreduce by {np.abs(shared.array - ref).max()}")
                rank0 = comm.bcast(shared.array.copy() if rank == 0 else None, root=0)
                if not np.array_equal(shared.array, rank0):
                    fail(f"{where}: rank {rank}'s sum is not rank 0's, bit for bit")
            if n and not refused(shared.array.copy(), shared):
                fail(f"n={n} {dtype}: a copy of the shared array was not refused")
            shared.free()

finish(comm, failures)
