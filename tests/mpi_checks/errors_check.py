"""Run under mpiexec (2+ ranks): bad arguments raise the same exception on every rank.

Each case gives every rank its own arguments (some wrong only on one rank), expects one
exception type and a message naming the allowed values, and afterwards checks that the
communicator still works (no rank left behind in a collective).  Exits 1 on any failure.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from verdict import finish

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
failures = []

ones = lambda n=10, dtype="float64": np.ones(n, dtype)
CASES = [
    # name, call, expected exception, words the message must contain
    ("unknown algo", lambda: mpi_impl.allreduce(ones(), "bogus"), ValueError,
     ["'bogus'", "ring", "recursive-doubling", "halving-doubling"]),
    ("old name tree", lambda: mpi_impl.allreduce(ones(), "tree"), ValueError,
     ["'tree' is gone", "recursive-doubling", "halving-doubling"]),
    ("old name tree on rank 1", lambda: mpi_impl.allreduce(ones(), "tree" if rank == 1 else "ring"),
     ValueError, ["halving-doubling"]),
    ("unknown algo on rank 1", lambda: mpi_impl.allreduce(ones(), "bogus" if rank == 1 else "ring"),
     ValueError, ["ring"]),
    ("different algos", lambda: mpi_impl.allreduce(ones(), "ring" if rank else "halving-doubling"),
     ValueError, ["same on every rank"]),
    ("1bit is not an exact algo", lambda: mpi_impl.allreduce(ones(), "1bit"), ValueError, ["ring"]),
    ("object dtype", lambda: mpi_impl.allreduce(np.array([object()] * 3)), TypeError, ["float32"]),
    ("bool on rank 0", lambda: mpi_impl.allreduce(ones(3, bool if rank == 0 else "float64")),
     TypeError, ["float64"]),
    ("strings", lambda: mpi_impl.allreduce(np.array(["a", "b"])), TypeError, ["float32"]),
    ("lengths differ", lambda: mpi_impl.allreduce(ones(10 + rank), "ring"), ValueError, ["lengths"]),
    ("dtypes differ", lambda: mpi_impl.allreduce(ones(4, "float32" if rank == 0 else "float64")),
     TypeError, ["float32"]),
    ("bad out on rank 1", lambda: mpi_impl.allreduce(ones(4), out=np.empty(5 if rank == 1 else 4)),
     ValueError, ["out"]),
    ("nccl with NumPy", lambda: mpi_impl.allreduce(ones(), "nccl"), TypeError, ["CuPy"]),
    ("1bit int dtype", lambda: mpi_impl.OneBitAllreduce()(ones(8, "int32")), TypeError, ["float32"]),
    ("1bit lengths differ", lambda: mpi_impl.OneBitAllreduce()(ones(100 * (rank + 1))),
     ValueError, ["lengths"]),
    ("1bit bad block", lambda: mpi_impl.OneBitAllreduce(block=0), ValueError, ["block"]),
    ("1bit block differs", lambda: mpi_impl.OneBitAllreduce(block=256 + rank)(ones(1000)),
     ValueError, ["block", "every rank"]),
]



def read_only(n=4):
    a = np.empty(n)
    a.flags.writeable = False
    return a


# One rank's mistake, refused before any message is posted: the SAME one line on every rank
SAME_ON_EVERY_RANK = [
    ("read-only out on rank 0", lambda: mpi_impl.allreduce(ones(4), out=read_only() if rank == 0
                                                           else np.empty(4)), ValueError, ["read-only"]),
    ("read-only out on the last rank", lambda: mpi_impl.allreduce(
        ones(4), "halving-doubling", out=read_only() if rank == p - 1 else np.empty(4)),
     ValueError, ["read-only", f"rank {p - 1}"]),
    ("read-only x in place on rank 1", lambda: mpi_impl.allreduce(
        read_only() if rank == 1 else ones(4), "sharded-ps", out=read_only() if rank == 1 else None),
     ValueError, ["read-only"]),
    ("out of another length on rank 1", lambda: mpi_impl.allreduce(
        ones(4), "mpi", out=np.empty(5 if rank == 1 else 4)), ValueError, ["out", "rank 1"]),
]

with mpi_impl.abort_on_error():
    for name, call, expected, words in CASES + SAME_ON_EVERY_RANK:
        try:
            call()
            failures.append(f"{name}: no exception (expected {expected.__name__})")
        except expected as exc:
            missing = [w for w in words if w not in str(exc)]
            if missing:
                failures.append(f"{name}: message {str(exc)!r} lacks {missing}")
            if (name, call, expected, words) in SAME_ON_EVERY_RANK:
                said = comm.allgather(str(exc))
                if len(set(said)) != 1 or "\n" in said[0]:
                    failures.append(f"{name}: the ranks said different things: {said}")
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc} (expected {expected.__name__})")
        # the communicator must still be in step on every rank (nothing left pending)
        total = mpi_impl.allreduce(np.full(5, rank + 1.0), "ring")
        if not np.all(total == p * (p + 1) / 2):
            failures.append(f"{name}: the next all-reduce gave {total}")

finish(comm, [f"[rank {rank}/{p}] {line}" for line in failures])
