"""What every MPI check script shares: its failures, recorded with the rank (recorder); MPI's
own Allreduce as the oracle, and a sum's rounding bound against it (close_enough); and its
end (finish): every rank's failures counted together, a
few printed, and the job's exit code (1 if any rank failed)."""
import os
import sys

import numpy as np
from mpi4py import MPI


def recorder(comm):
    """(failures, fail): the list finish() counts, and fail(msg), which adds msg to it with the rank."""
    failures, tag = [], f"[rank {comm.Get_rank()}/{comm.Get_size()}]"
    return failures, lambda msg: failures.append(f"{tag} {msg}")


def oracle(comm, x):
    """MPI's own Allreduce (sum) of x: what every all-reduce is checked against."""
    ref = np.empty_like(x)
    comm.Allreduce(x, ref, op=MPI.SUM)
    return ref


def close_enough(comm, y, ref, x):
    """Whether y (a sum over the ranks of comm of each rank's x) is ref, MPI's sum, to rounding:
    any summation order is within (p - 1) eps sum |x| of the exact sum; 4x that is allowed.
    Whole numbers must be exact."""
    if y.dtype.kind == "i":
        return np.array_equal(y, ref)
    bound = np.abs(x).astype(np.float64)
    comm.Allreduce(MPI.IN_PLACE, bound, op=MPI.SUM)
    eps = np.finfo(y.dtype).eps
    return bool(np.all(np.abs(y.astype(np.float64) - ref) <= 4 * max(comm.Get_size() - 1, 1) * eps * bound))


def same_on_all_ranks(comm, y):
    """True if y is bitwise the same on every rank (min == max elementwise, NaN-free data)."""
    lo, hi = y.copy(), y.copy()
    comm.Allreduce(MPI.IN_PLACE, lo, op=MPI.MIN)
    comm.Allreduce(MPI.IN_PLACE, hi, op=MPI.MAX)
    return np.array_equal(lo, hi)


def finish(comm, failures, shown=20):
    bad = comm.allreduce(len(failures))
    for line in failures[:shown]:
        print(line, flush=True)
    if comm.Get_rank() == 0:
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        print(f"{script}: {comm.Get_size()} ranks, {bad} failures", flush=True)
    sys.exit(1 if bad else 0)
