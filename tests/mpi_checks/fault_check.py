"""Run under mpiexec: one rank fails in the middle of a loop of ring all-reduces.

    python tests/mpi_checks/fault_check.py MODE

MODE is how rank 1 fails after a few iterations while the others are inside collectives:
  kill       SIGKILL itself (as the kernel's OOM killer would)
  exit       os._exit(1) (a crash without cleanup)
  raise      raise inside mpi_impl.abort_on_error()
  excepthook raise with mpi_impl.install_excepthook() installed and nothing catching it
The test expects the whole job to end, non-zero, well within its time limit.
"""
import os
import signal
import sys

import numpy as np
from mpi4py import MPI

import mpi_impl

mode = sys.argv[1]
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
if mode == "excepthook":
    mpi_impl.install_excepthook()


def loop():
    x = np.ones(100_000)
    for i in range(10_000):
        if rank == 1 and i == 5:
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif mode == "exit":
                os._exit(1)
            else:
                raise RuntimeError("rank 1 failed on purpose (fault_check)")
        mpi_impl.allreduce(x, "ring")
    print("fault_check: the loop finished, which it should not have", flush=True)


if mode == "raise":
    with mpi_impl.abort_on_error():
        loop()
    print(f"fault_check: rank {rank} went on after abort_on_error, which it should not have",
          flush=True)
else:
    loop()
