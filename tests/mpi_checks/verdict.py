"""The end of an MPI check script: every rank's failures counted together, a few printed, and
the job's exit code (1 if any rank failed)."""
import os
import sys


def finish(comm, failures, shown=20):
    bad = comm.allreduce(len(failures))
    for line in failures[:shown]:
        print(line, flush=True)
    if comm.Get_rank() == 0:
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        print(f"{script}: {comm.Get_size()} ranks, {bad} failures", flush=True)
    sys.exit(1 if bad else 0)
