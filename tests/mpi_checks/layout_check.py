"""Run under mpiexec (2+ ranks): every exact algorithm sums arrays of any memory layout.

A strided (non-contiguous) x or out, on every rank or on one rank only, must give MPI's own
Allreduce of the same values (the oracle, on contiguous copies), leave x unchanged, and
leave the communicator in step for the next call.  Exits 1 on any failure.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from verdict import finish

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
ALGOS = [a for a in mpi_impl.ALGORITHMS if a != "nccl"]
failures = []


def oracle(values):
    total = np.ascontiguousarray(values).copy()
    comm.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
    return total


def layouts():
    """(name, x, out) per case: x holds 2 * 7 + 1 values of this rank, laid out differently."""
    base = np.arange(60.0) * (rank + 1)
    grid = base[:30].reshape(5, 6)
    yield "strided x on every rank", base[::4], None
    yield "strided x on rank 0 only", base[::4] if rank == 0 else base[::4].copy(), None
    yield "transposed x", grid.T, None
    yield "strided out", base[:15].copy(), np.empty(30)[::2]
    yield "strided x in place", base.copy()[1::4], "x"


with mpi_impl.abort_on_error():
    for algo in ALGOS:
        for segment in (0, 16):
            for name, x, out in layouts():
                before = x.copy()
                in_place = isinstance(out, str)
                target = x if in_place else out
                try:
                    got = mpi_impl.allreduce(x, algo, out=target, segment=segment)
                except Exception as exc:
                    failures.append(f"{algo} {name}: {type(exc).__name__}: {exc}")
                    got = None
                want = oracle(before)
                if got is not None and not np.array_equal(got, want):
                    failures.append(f"{algo} segment {segment} {name}: {got.ravel()[:4]}... != {want.ravel()[:4]}...")
                if out is None and not np.array_equal(x, before):
                    failures.append(f"{algo} {name}: x was modified")
                if target is not None and got is not target:
                    failures.append(f"{algo} {name}: the result is not out")
                total = mpi_impl.allreduce(np.full(5, rank + 1.0), "ring")
                if not np.all(total == p * (p + 1) / 2):
                    failures.append(f"{algo} {name}: the next all-reduce gave {total}")

finish(comm, [f"[rank {rank}/{p}] {line}" for line in failures])
