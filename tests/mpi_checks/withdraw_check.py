"""Run alone (one process): after an error inside Wire.exchange, no receive of it stays
posted.  Two receives from this rank are posted, one message is sent; the callback for the
first raises.  A later message must land in the later receive, not in the abandoned
buffer of the first call (where a receive left pending would take it, and the later
receive would wait forever).  Prints "withdraw_check: ok" or exits 1."""
import sys

import numpy as np
from mpi4py import MPI

from mpi_impl.wire import Wire

comm = MPI.COMM_SELF
wire = Wire(comm, segment=0)
a, b, c = np.ones(4), np.zeros(4), np.zeros(4)


def fail(k):
    raise RuntimeError("failed on purpose")


try:
    wire.exchange([(a, 0)], [(b, 0), (c, 0)], arrived=fail)
except RuntimeError:
    pass
later, landed = np.full(4, 7.0), np.zeros(4)
request = comm.Isend(later, 0, 0)
comm.Recv(landed, 0, 0)
request.Wait()
if not (landed == 7).all() or c.any():
    print(f"withdraw_check: the later message landed in {'the abandoned buffer' if c.any() else '?'}")
    sys.exit(1)
print("withdraw_check: ok")
