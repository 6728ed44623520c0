"""Ring all-reduce over MPI-3 shared memory: every rank adds straight from its neighbour's array.

All ranks of one node map one MPI window (``MPI.Win.Allocate_shared``); each rank's buffer
of n elements lives in it, and every rank can read every other rank's buffer
(``Shared_query``).  The buffer is cut into p chunks as ring.py cuts it, and the steps are the
ring's, but no message is sent: a step reads the left neighbour's chunk where it lies.

1. **Reduce-scatter** (p - 1 steps).  In step s, rank r adds chunk (r - s - 1) of its left
   neighbour's buffer into its own chunk (r - s - 1), in place.  After p - 1 steps rank r
   holds the complete sum of chunk (r + 1).
2. **All-gather** (p - 1 steps).  In step s, rank r copies the finished chunk (r - s) from
   its left neighbour's buffer into its own.

Between steps every rank waits at a barrier (``Win.Sync``, ``Barrier``, ``Win.Sync``: the
MPI-3 way to make one rank's stores visible to another's loads), so no chunk is read before
its writer has finished it, and none is overwritten while a neighbour still reads it.

Cost.  Per rank, with c = m/p bytes per chunk, a reduce-scatter step reads 2c and writes c
(an add in place, no copy), an all-gather step reads c and writes c (one copy):

    memory traffic per rank  =  (p - 1) (3c + 2c)  =  5 (p - 1) m / p     (lower_bound's B / p)
    T_ring_shm  =  (2 (p - 1) + 1) barrier  +  (p - 1)/p m gamma  +  (p - 1)/p m beta_copy

(gamma: seconds per byte added in place, beta_copy: per byte copied within the node).  The
ring over messages moves each of its 2 (p - 1) chunks with a copy by some core, and adds
after the copy; here the reduce-scatter's copies are gone.

The gradient must live in the window (as with MPI_Alloc_mem or NCCL's registered buffers):
allocate it with ``SharedBuffer`` and reduce its ``.array``.  One node only; CPU only.
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .device import chunk_bounds, is_gpu_array
from .errors import REDUCIBLE_DTYPES, check_arguments


class SharedBuffer:
    """`count` elements of `dtype` per rank in one MPI shared-memory window over `comm`
    (collective).  ``.array``: this rank's buffer (NumPy); ``.of(rank)``: any rank's buffer
    on the node.  Raises ValueError on every rank if comm spans more than one node."""

    def __init__(self, count: int, dtype=np.float32, comm=None):
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        node = self.comm.Split_type(MPI.COMM_TYPE_SHARED)
        on_node = node.Get_size()
        node.Free()
        if on_node != self.comm.Get_size():
            raise ValueError(f"shm_ring needs every rank on one node: the communicator spans "
                             f"{self.comm.Get_size()} ranks, {on_node} on this node; use ring")
        self.dtype = np.dtype(dtype)
        self.count = count
        self.win = MPI.Win.Allocate_shared(count * self.dtype.itemsize, self.dtype.itemsize,
                                           comm=self.comm)
        self.win.Lock_all(MPI.MODE_NOCHECK)           # one passive epoch: loads and stores at will
        self._views = [self._view(r) for r in range(self.comm.Get_size())]
        self.array = self._views[self.comm.Get_rank()]

    def _view(self, rank):
        memory, _ = self.win.Shared_query(rank)
        return np.frombuffer(memory, self.dtype, self.count)

    def of(self, rank: int):
        return self._views[rank]

    def sync(self):
        """Every rank's stores so far are visible to every rank's loads after it (collective)."""
        self.win.Sync()
        self.comm.Barrier()
        self.win.Sync()

    def free(self):
        self._views = self.array = None
        self.win.Unlock_all()
        self.win.Free()


def problem_with(x, shared: SharedBuffer):
    """None if x is the shared buffer's own array, else why not (one line)."""
    if is_gpu_array(x):
        return "shm_ring reduces host memory only, not a GPU (CuPy) array; use ring or nccl"
    if x is not shared.array:
        return ("x is not the shared buffer's array: allocate it with "
                "shm_ring.SharedBuffer(count, dtype, comm) and reduce its .array in place")
    return None


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

    shared.sync()                                    # every rank's input is in place
    # 1. reduce-scatter: add the left neighbour's partial sum into mine, in place
    for s in range(p - 1):
        np.add(chunk(x, r - s - 1), chunk(left, r - s - 1), out=chunk(x, r - s - 1))
        shared.sync()
    # 2. all-gather: rank r owns the full sum of chunk r + 1; copy the finished chunks around
    for s in range(p - 1):
        np.copyto(chunk(x, r - s), chunk(left, r - s))
        shared.sync()
    return x


def bytes_copied(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` copies from its neighbour in one call: the all-gather's p - 1 chunks
    (every chunk but r + 1).  The reduce-scatter adds from the neighbour without a copy."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    return (count - (b[(rank + 1) % p + 1] - b[(rank + 1) % p])) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_ring_shm above for `count` elements, a barrier taken as alpha and a copy as beta."""
    m = count * itemsize
    return (2 * (p - 1) + 1) * alpha + (p - 1) / p * m * (beta + gamma)
