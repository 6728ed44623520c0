"""Ring all-reduce over MPI-3 shared memory: every rank adds straight from its neighbour's array.

All ranks of one node map one MPI window (``shm_window.SharedBuffer``); each rank's buffer of
n elements lives in it, and every rank can read and write every other rank's buffer.  The
buffer is cut into p chunks as ring.py cuts it, and the steps are the ring's, but no message
is sent: a step reads the left neighbour's chunk where it lies.

1. **Reduce-scatter** (p - 1 steps).  In step s, rank r adds chunk (r - s - 2) of its left
   neighbour's buffer into its own chunk (r - s - 2), in place.  In the last step this
   completes the sum of chunk r, and rank r hands each finished piece straight back into the
   left neighbour's chunk r, which it has just read (``add_and_hand_back``): the all-gather's
   first hop, done while the piece is in cache.  Now rank r holds the sums of chunks r (its
   own) and r + 1 (handed back by its right neighbour).
2. **All-gather** (p - 2 steps).  In step t, rank r copies the finished chunk (r + 2 + t) from
   its right neighbour's buffer into its own.  On 2 ranks there is none: the hand-back
   finished the job.

Between steps every rank waits at a barrier (``SharedBuffer.sync``), so no chunk is read
before its writer has finished it, and none is overwritten while another rank still reads it.

Cost.  Per rank, with c = m/p bytes per chunk, a reduce-scatter step reads 2c and writes c
(an add in place, no copy), the last one also writes c back into cached lines, and an
all-gather step reads c and writes c (one copy):

    memory traffic per rank  =  (p - 1) 3c + c + (p - 2) 2c  =  (5p - 6) m / p   (lower_bound's B / p)
    T_ring_shm  =  (2p - 2) barrier  +  (p - 1)/p m gamma  +  (p - 1)/p m beta_copy

(gamma: seconds per byte added in place, beta_copy: per byte copied within the node).  On 2
ranks the traffic is 2 m per rank, every rank reading its input and writing its result,
which no all-reduce can go below.  The ring over messages moves each of its 2 (p - 1) chunks
with a copy by some core, and adds after the copy; here the reduce-scatter's copies are gone
and the all-gather's first hop costs no memory read.

The gradient must live in the window (as with MPI_Alloc_mem or NCCL's registered buffers):
allocate it with ``SharedBuffer`` and reduce its ``.array``.  One node only; CPU only.
"""
from __future__ import annotations

import numpy as np

from .device import chunk_bounds
from .errors import REDUCIBLE_DTYPES, check_arguments
from .shm_window import SharedBuffer, add_and_hand_back, problem_with  # noqa: F401 (SharedBuffer: the callers' door)


def allreduce(x, shared: SharedBuffer, check: bool = True):
    """Sum x over all ranks of shared.comm, in place; x must be ``shared.array``.
    check: verify the arguments on every rank first (one tiny Allreduce); a bad argument
    raises ValueError/TypeError on every rank."""
    comm = shared.comm
    if check:
        check_arguments(x, comm, dtypes=REDUCIBLE_DTYPES, problem=problem_with(x, shared), about="buffer")
    p, r = comm.Get_size(), comm.Get_rank()
    if p == 1:
        return x
    bounds = chunk_bounds(x.size, p)
    left = shared.of((r - 1) % p)

    def chunk(a, i):
        i %= p
        return a[bounds[i]:bounds[i + 1]]

    right = shared.of((r + 1) % p)
    shared.sync()                                    # every rank's input is in place
    # 1. reduce-scatter: add the left neighbour's partial sum into mine, in place; the last
    #    step completes chunk r and hands it back to the left neighbour
    for s in range(p - 2):
        np.add(chunk(x, r - s - 2), chunk(left, r - s - 2), out=chunk(x, r - s - 2))
        shared.sync()
    add_and_hand_back(chunk(x, r), chunk(left, r))
    shared.sync()
    # 2. all-gather: the right neighbour holds the sums of chunks r + 1 .. r + 2 + t
    for t in range(p - 2):
        np.copyto(chunk(x, r + 2 + t), chunk(right, r + 2 + t))
        shared.sync()
    return x


def bytes_copied(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` copies in one call: chunk r handed back to its left neighbour, and the
    all-gather's p - 2 chunks (every chunk but r and r + 1) copied in.  The reduce-scatter
    adds from the neighbour without a copy."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    size = lambda i: b[i % p + 1] - b[i % p]
    return (count - size(rank + 1)) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_ring_shm above for `count` elements, a barrier taken as alpha and a copy as beta."""
    m = count * itemsize
    return (2 * p - 2) * alpha + (p - 1) / p * m * (beta + gamma)
