"""Run with 2 ranks: each rank blocks for good inside MPI (a receive nobody sends), the
state a rank is left in when Ctrl-C stops its partner in the middle of an exchange.
Prints "ready" on each rank, then waits; Ctrl-C must still end the job with one line,
"stuck_in_mpi: interrupted", and exit code 130.  With the argument "--no-watch" the ranks
rely on Python's handler alone, which never runs while the main thread is inside MPI."""
import sys

import numpy as np
from mpi4py import MPI

from mpi_impl.errors import interrupted, watch_ctrl_c

comm = MPI.COMM_WORLD
if "--no-watch" not in sys.argv:
    watch_ctrl_c("stuck_in_mpi", comm)
print("ready", flush=True)
try:
    comm.Recv(np.zeros(1), source=(comm.Get_rank() + 1) % comm.Get_size())   # nobody sends
except KeyboardInterrupt:
    interrupted("stuck_in_mpi", comm)
