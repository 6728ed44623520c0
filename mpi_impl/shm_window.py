"""What the shared-memory all-reduces share: one MPI-3 window over the node, and the step
that adds a neighbour's piece and hands the sum back while it is still in cache.

``SharedBuffer`` maps one window (``MPI.Win.Allocate_shared``) in which every rank of the
node has its buffer, and every rank can read and write every other rank's
(``Shared_query``).  ``sync`` is the MPI-3 way to make one rank's stores visible to another's
loads (``Win.Sync``, ``Barrier``, ``Win.Sync``).

``add_and_hand_back(mine, theirs)`` is the last adding step of shm_ring.py and
shm_halving_doubling.py: mine += theirs, then theirs = mine, one piece of PIECE_BYTES at a
time.  The piece's lines of both arrays were just read by the add, so the copy back reads and
writes cache, not memory: per byte of the piece, memory sees the add's 2 reads and 1 write
plus the write-back of theirs, 4 bytes, against 5 for an add followed later by a copy of the
finished chunk (which reads it from memory again and writes it).
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .device import is_gpu_array

PIECE_BYTES = 256 << 10     # a piece of each array, 512 KiB together: within any x86 core's L2 (1-4 MiB)


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
            raise ValueError(f"a shared-memory all-reduce needs every rank on one node: the communicator "
                             f"spans {self.comm.Get_size()} ranks, {on_node} on this node; use ring")
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
        return "a shared-memory all-reduce reduces host memory only, not a GPU (CuPy) array; use ring or nccl"
    if x is not shared.array:
        return ("x is not the shared buffer's array: allocate it with "
                "SharedBuffer(count, dtype, comm) and reduce its .array in place")
    return None


def add_and_hand_back(mine, theirs):
    """mine += theirs, then theirs[:] = mine, piece by piece (see the module docstring)."""
    piece = max(1, PIECE_BYTES // mine.itemsize)
    for lo in range(0, mine.size, piece):
        a, b = mine[lo:lo + piece], theirs[lo:lo + piece]
        np.add(a, b, out=a)
        np.copyto(b, a)
