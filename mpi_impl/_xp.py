"""NumPy or CuPy, and the one door through which every algorithm talks to MPI.

Every algorithm in this package is written once, for "xp": the array module of its input
(``numpy`` for CPU arrays, ``cupy`` for GPU arrays).  Arithmetic uses ``xp``; messages go
through a :class:`Wire`, which hides how GPU memory reaches MPI:

* **host staging** (the default for GPU arrays): wait for the GPU, copy the data into a
  host buffer (pinned memory, allocated once and reused), call MPI on the host buffer, copy
  what arrived back to the GPU;
* **CUDA-aware MPI** (``cuda_aware=True`` or ``MPI_IMPL_CUDA_AWARE=1``): wait for the GPU,
  then hand the GPU array to MPI directly (mpi4py understands ``__cuda_array_interface__``).

In both cases the current CUDA stream is synchronised before each MPI call, because MPI
knows nothing about CUDA streams and would otherwise read half-computed data.

CuPy stays optional: it is imported only when a CuPy array shows up.
"""
from __future__ import annotations

import os
import threading

import numpy as np
from mpi4py import MPI


def is_gpu_array(x) -> bool:
    """True for CuPy arrays, found without importing CuPy."""
    return type(x).__module__.split(".")[0] == "cupy"


def array_module(x):
    """``cupy`` if x is a CuPy array, else ``numpy``."""
    if is_gpu_array(x):
        import cupy
        return cupy
    return np


def cuda_aware_from_env() -> bool:
    """Whether the user said their MPI accepts GPU pointers (``MPI_IMPL_CUDA_AWARE=1``)."""
    return os.environ.get("MPI_IMPL_CUDA_AWARE", "").strip().lower() in ("1", "true", "yes", "on")


def chunk_bounds(n: int, parts: int) -> list[int]:
    """Offsets splitting n elements into `parts` nearly equal contiguous chunks.

    Chunk i is ``[bounds[i], bounds[i+1])``; the first ``n % parts`` chunks hold one extra
    element (the same split as ``numpy.array_split``).  Chunks may be empty when n < parts.
    """
    base, extra = divmod(n, parts)
    bounds = [0]
    for i in range(parts):
        bounds.append(bounds[-1] + base + (1 if i < extra else 0))
    return bounds


# Scratch buffers, allocated once per (array module, purpose, dtype) and grown when a larger
# request comes: the algorithms call scratch() every time, and pay for allocation only once.
# One set per thread, so that a communication thread never shares buffers with another.
_per_thread = threading.local()


def scratch(xp, purpose: str, count: int, dtype):
    """A reusable 1-D work array of at least `count` elements (contents undefined)."""
    cache = _per_thread.__dict__.setdefault("buffers", {})
    key = (xp.__name__, purpose, np.dtype(dtype).str)
    buf = cache.get(key)
    if buf is None or buf.size < count:
        buf = _host_empty(count, dtype) if purpose.startswith("host:") else xp.empty(count, dtype)
        cache[key] = buf
    return buf[:count]


def _host_empty(count, dtype):
    """Host memory for staging: pinned (page-locked) if CuPy is around, else plain NumPy."""
    try:
        import cupyx
        return cupyx.empty_pinned((count,), dtype=dtype)
    except Exception:  # no CuPy, or no GPU: ordinary memory still works, only slower
        return np.empty(count, dtype)


def _stream_synchronizer(xp):
    if xp is np:
        return lambda: None
    return lambda: xp.cuda.get_current_stream().synchronize()


def make_wire(comm, xp, cuda_aware: bool | None = None) -> "Wire":
    """A Wire for arrays of module xp: staged through host memory unless MPI is CUDA-aware."""
    if cuda_aware is None:
        cuda_aware = cuda_aware_from_env()
    return Wire(comm, xp, stage=(xp.__name__ != "numpy" and not cuda_aware))


class Wire:
    """MPI point-to-point and collective calls on array views, for NumPy and CuPy alike.

    ``stage=True`` copies through host buffers (what a GPU array needs unless MPI is
    CUDA-aware).  ``bytes_sent`` counts the bytes this rank handed to MPI for other ranks.
    Only uppercase (buffer) mpi4py calls are used: no pickling on the data path.
    """

    def __init__(self, comm, xp=np, stage: bool = False):
        self.comm = comm
        self.xp = xp
        self.stage = stage
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.bytes_sent = 0
        self.bytes_staged = 0  # host<->device copies, for the curious and for tests
        self._sync = _stream_synchronizer(xp)

    # -- staging helpers ------------------------------------------------------------------
    def _outgoing(self, a, slot):
        """A buffer MPI may read with a's contents: a itself, or a host copy of it."""
        if not self.stage:
            return a
        host = scratch(self.xp, "host:" + slot, a.size, a.dtype)
        if hasattr(a, "get"):      # CuPy: device -> host
            a.get(out=host)
        else:                      # NumPy standing in for a device (tests)
            np.copyto(host, a)
        self.bytes_staged += a.nbytes
        return host

    def _incoming(self, a, slot):
        """A buffer MPI may write into for a: a itself, or a host buffer to copy back later."""
        if not self.stage:
            return a
        return scratch(self.xp, "host:" + slot, a.size, a.dtype)

    def _deliver(self, host, a):
        """Copy data that arrived in a host buffer back into a (no-op without staging)."""
        if not self.stage:
            return
        if hasattr(a, "set"):      # CuPy: host -> device
            a.set(host)
        else:
            np.copyto(a, host)
        self.bytes_staged += a.nbytes

    # -- the MPI calls the algorithms use --------------------------------------------------
    def sendrecv(self, send, dest: int, recv, source: int):
        """Send `send` to rank dest while receiving `recv` from rank source."""
        if dest != self.rank:
            self.bytes_sent += send.nbytes
        self._sync()
        out, into = self._outgoing(send, "send"), self._incoming(recv, "recv")
        self.comm.Sendrecv(out, dest, 0, into, source, 0)
        self._deliver(into, recv)

    def send(self, a, dest: int):
        self.bytes_sent += a.nbytes
        self._sync()
        self.comm.Send(self._outgoing(a, "send"), dest, 0)

    def recv(self, a, source: int):
        self._sync()
        into = self._incoming(a, "recv")
        self.comm.Recv(into, source, 0)
        self._deliver(into, a)

    def alltoallv(self, send, send_counts, recv, recv_counts):
        """Rank i gets the i-th piece of `send`; pieces are contiguous, counts in elements."""
        self.bytes_sent += (sum(send_counts) - send_counts[self.rank]) * send.itemsize
        self._sync()
        out, into = self._outgoing(send, "send"), self._incoming(recv, "recv")
        self.comm.Alltoallv([out, (list(send_counts), _offsets(send_counts))],
                            [into, (list(recv_counts), _offsets(recv_counts))])
        self._deliver(into, recv)

    def allgatherv(self, send, recv, recv_counts):
        """Everyone's `send` piece, concatenated in rank order, into `recv` on every rank.

        Counted as sending one's own piece to each of the other size-1 ranks.
        """
        self.bytes_sent += send.nbytes * (self.size - 1)
        self._sync()
        out, into = self._outgoing(send, "send"), self._incoming(recv, "recv")
        self.comm.Allgatherv(out, [into, (list(recv_counts), _offsets(recv_counts))])
        self._deliver(into, recv)

    def allreduce_inplace(self, buf):
        """MPI's own Allreduce(SUM), in place. Bytes are counted by the caller (unknown here)."""
        self._sync()
        host = self._outgoing(buf, "send")
        self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        self._deliver(host, buf)


def _offsets(counts) -> list[int]:
    offsets, total = [], 0
    for c in counts:
        offsets.append(total)
        total += c
    return offsets
