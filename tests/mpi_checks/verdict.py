"""What every MPI check script shares: its failures, recorded with the rank (recorder); MPI's
own Allreduce as the oracle; and its end (finish): every rank's failures counted together, a
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


def finish(comm, failures, shown=20):
    bad = comm.allreduce(len(failures))
    for line in failures[:shown]:
        print(line, flush=True)
    if comm.Get_rank() == 0:
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        print(f"{script}: {comm.Get_size()} ranks, {bad} failures", flush=True)
    sys.exit(1 if bad else 0)
