"""Run under mpiexec: the ring reduce-scatter and all-gather against MPI's own
Reduce_scatter and Allgatherv (the oracles), for lengths 0, 1, fewer than the ranks, odd
and larger, float and integer dtypes, whole messages and odd segments, and the out= forms
(out being x's own chunk).  Also the bytes each rank sent against the closed form
(p - 1)/p of the buffer.  Prints every mismatch; exits 1 if there was any, on every rank.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl.all_gather import all_gather, bytes_sent as all_gather_bytes
from mpi_impl.reduce_scatter import bytes_sent as reduce_scatter_bytes, reduce_scatter
from mpi_impl.wire import Wire
from verdict import finish, recorder

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
LENGTHS = sorted({0, 1, 2, max(p - 1, 0), p, p + 1, 7, 33, 1001})
failures, fail = recorder(comm)



def counts(n):
    """MPI's receive counts for a split of n like numpy.array_split (the oracle's own)."""
    return [len(part) for part in np.array_split(np.arange(n), p)]


def within_rounding(y, ref, x_abs_sum, dtype):
    if np.dtype(dtype).kind == "i":
        return np.array_equal(y, ref)
    eps = np.finfo(dtype).eps
    return bool(np.all(np.abs(y.astype(np.float64) - ref) <= 4 * max(p - 1, 1) * eps * x_abs_sum))


with mpi_impl.abort_on_error():
    for dtype in ("float64", "float32", "int32"):
        for n in LENGTHS:
            rng = np.random.default_rng([n, rank])
            x = (rng.standard_normal(n) * 100).astype(dtype)
            c = counts(n)
            lo = sum(c[:rank])
            ref = np.empty(c[rank], dtype)
            comm.Reduce_scatter(x, ref, recvcounts=c, op=MPI.SUM)
            bound = np.abs(x).astype(np.float64)
            comm.Allreduce(MPI.IN_PLACE, bound)
            for segment in (0, 40):
                wire = Wire(comm, np, segment=segment)
                got = reduce_scatter(x, wire, np.empty(c[rank], dtype))
                if not within_rounding(got, ref, bound[lo:lo + c[rank]], dtype):
                    fail(f"reduce_scatter n={n} {dtype} segment={segment}: {got[:4]} != {ref[:4]}")
                if wire.bytes_sent != reduce_scatter_bytes(n, x.itemsize, p, rank):
                    fail(f"reduce_scatter n={n} sent {wire.bytes_sent} bytes, "
                         f"counted {reduce_scatter_bytes(n, x.itemsize, p, rank)}")
                total = comm.allreduce(wire.bytes_sent)
                if total != (p - 1) * n * x.itemsize:       # each chunk crosses p - 1 links
                    fail(f"reduce_scatter n={n}: {total} bytes in all, not (p-1) n s")
            in_place = x.copy()
            mpi_impl.reduce_scatter(in_place, out=in_place[lo:lo + c[rank]])
            if not within_rounding(in_place[lo:lo + c[rank]], ref, bound[lo:lo + c[rank]], dtype):
                fail(f"reduce_scatter into x's own chunk n={n} {dtype}")
            mine = x[lo:lo + c[rank]].copy()
            whole = np.empty(n, dtype)
            comm.Allgatherv(mine, [whole, c])
            wire = Wire(comm, np)
            got = all_gather(mine, wire, np.empty(n, dtype))
            if not np.array_equal(got, whole):
                fail(f"all_gather n={n} {dtype}: {got[:4]} != {whole[:4]}")
            if comm.allreduce(wire.bytes_sent) != (p - 1) * n * x.itemsize:
                fail(f"all_gather n={n}: bytes in all not (p-1) n s")
            if wire.bytes_sent != all_gather_bytes(n, x.itemsize, p, rank):
                fail(f"all_gather n={n}: bytes_sent formula disagrees")
            again = mpi_impl.all_gather(mine, count=n)
            own = whole.copy()
            mpi_impl.all_gather(own[lo:lo + c[rank]], out=own)
            if not (np.array_equal(again, whole) and np.array_equal(own, whole)):
                fail(f"mpi_impl.all_gather n={n} {dtype}")
    # bad arguments raise on every rank alike (a wrong chunk length on one rank only)
    try:
        right = counts(p + 2)[rank]
        mpi_impl.all_gather(np.zeros(right + 1 if rank == 0 else right), count=p + 2)
        fail("a wrong chunk length was accepted")
    except ValueError:
        pass

finish(comm, failures)
