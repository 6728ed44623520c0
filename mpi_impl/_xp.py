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

**Pipelining.**  A step that receives a chunk and adds it (ring, halving-doubling,
sharded-ps) goes through :meth:`Wire.sendrecv_add` (or :meth:`Wire.exchange_add`, the same for
many messages at once), which cuts the chunk into segments of
``wire.segment`` bytes (default :data:`SEGMENT_BYTES`) and keeps two in flight: segment s+1
travels (and, when staged, is copied to and from the host) while segment s is added.  On a
CPU the gain is mostly the cache: a segment is added while it is still in L2, instead of a
whole chunk read back from memory.  ``segment=None`` gives the textbook step: send the whole
chunk, wait, then add.

CuPy stays optional: it is imported only when a CuPy array shows up, or when
:func:`pick_device` is asked for a GPU.  :func:`pick_device` is the one place where a
program (mpi_impl.train, mpi_impl.bench, course/calibrate.py, course/probe.py) chooses
between the two.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
from dpsim import vocabulary
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


# ------------------------------------------------------------------ choosing the device

@dataclass(frozen=True)
class Device:
    """Where a program's arrays live.

    xp: ``numpy`` or ``cupy``.  wait(): block until the device has finished the work queued
    so far (nothing to wait for on the CPU).  parallel: how many devices can compute at
    the same time, the cores usable by this process or the GPUs of this machine.
    """
    xp: object
    wait: object
    parallel: int

    def clock(self) -> float:
        """time.perf_counter(), read after the device's queued work has finished."""
        self.wait()
        return time.perf_counter()


def pick_device(kind: str = "cpu", comm=None, workers: int = 0) -> Device:
    """NumPy on the CPU, or CuPy on a GPU, for this rank of `comm` (default COMM_WORLD).

    "cpu": NumPy, with each rank's BLAS threads limited so that the ranks sharing this
    machine share its cores (:func:`limit_blas_threads`).  "gpu": CuPy on GPU
    local_rank % GPUs, local_rank being the rank among those on the same machine, so that
    the ranks of a node spread over its GPUs.  `workers`: busy loader processes each rank
    starts, which need cores too.  Collective over comm (it asks which ranks share the
    machine): call it on every rank.  Rank 0 says once when the ranks outnumber the cores.
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank, local_ranks = local.Get_rank(), local.Get_size()
    local.Free()
    if kind == "cpu":
        speak = comm.Get_rank() == 0
        if speak and local_ranks > usable_cores():
            print(f"note: {local_ranks} ranks on {usable_cores()} cores: they take turns on the cores "
                  f"(each computes at about {usable_cores()}/{local_ranks} speed) and wait for each other to "
                  f"be scheduled; see lecture 06, section 5", flush=True)
        limit_blas_threads(local_ranks * (1 + workers), speak)
        return Device(np, _nothing, usable_cores())
    if kind != "gpu":
        raise ValueError(f"unknown device {kind!r}; choose cpu or gpu")
    import cupy
    gpus = cupy.cuda.runtime.getDeviceCount()
    cupy.cuda.Device(local_rank % gpus).use()
    return Device(cupy, lambda: cupy.cuda.get_current_stream().synchronize(), gpus)


def _nothing():
    pass


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # not Linux
        return os.cpu_count() or 1


BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_blas_threads(local_ranks: int, speak: bool = True):
    """Share the cores between the `local_ranks` busy processes of this machine (ranks and
    their loader workers).

    NumPy's BLAS starts one thread per core in every process, so N ranks on one machine
    would run N x cores threads that spin while they wait: a matmul can become tens of
    times slower. Unless the user set OMP_NUM_THREADS (or OPENBLAS_/MKL_NUM_THREADS), give
    each rank cores // local_ranks threads (with threadpoolctl, which comes with
    scikit-learn), or, if `speak`, say how to do it.
    """
    if local_ranks == 1 or any(v in os.environ for v in BLAS_THREAD_VARIABLES):
        return
    threads = max(1, usable_cores() // local_ranks)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        if speak:
            print(f"note: {local_ranks} processes share {usable_cores()} cores; set OMP_NUM_THREADS="
                  f"{threads} (or pip install threadpoolctl) to keep BLAS threads from competing",
                  flush=True)
        return
    threadpool_limits(threads, user_api="blas")


# ------------------------------------------------------------------ buffers

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


def overlaps(xp, a, b) -> bool:
    """Whether arrays a and b may share memory (True when the module cannot tell)."""
    check = getattr(xp, "may_share_memory", None)
    return True if check is None else bool(check(a, b))


def load(buf, x):
    """buf, holding x's values: x copied in, unless x is None or buf itself.  The algorithms
    that work in buf (and every algorithm on one rank) start with it."""
    if x is not None and x is not buf:
        array_module(buf).copyto(buf, x)
    return buf


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


#: Bytes per pipeline segment (1 MiB, dpsim.vocabulary's, shared with the simulator).
#: Measured on a 2-core machine (2 ranks, ring, 16 and 64 MiB): 256 KiB to 4 MiB all do
#: well, 64 KiB pays too many messages; mpi_impl.bench --segment compares sizes on yours.
SEGMENT_BYTES = vocabulary.SEGMENT_BYTES


def make_wire(comm, xp, cuda_aware: bool | None = None, segment: int | None = SEGMENT_BYTES) -> "Wire":
    """A Wire for arrays of module xp: staged through host memory unless MPI is CUDA-aware."""
    if cuda_aware is None:
        cuda_aware = cuda_aware_from_env()
    return Wire(comm, xp, stage=(xp.__name__ != "numpy" and not cuda_aware), segment=segment)


class Wire:
    """MPI point-to-point and collective calls on array views, for NumPy and CuPy alike.

    ``stage=True`` copies through host buffers (what a GPU array needs unless MPI is
    CUDA-aware).  ``segment``: bytes per pipeline segment, or None for whole messages.
    ``bytes_sent`` counts the bytes this rank handed to MPI for other ranks.
    Only uppercase (buffer) mpi4py calls are used: no pickling on the data path.
    """

    def __init__(self, comm, xp=np, stage: bool = False, segment: int | None = SEGMENT_BYTES):
        if segment is not None and int(segment) < 1:
            raise ValueError(f"segment must be a positive number of bytes or None, not {segment!r}")
        self.comm = comm
        self.xp = xp
        self.stage = stage
        self.segment = None if segment is None else int(segment)
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
        if self.stage and self.segment:        # copies to and from the host overlap MPI
            return self._pipelined([(send, dest)], [source], recv, base=None)
        if dest != self.rank:
            self.bytes_sent += send.nbytes
        self._sync()
        out, into = self._outgoing(send, "send"), self._incoming(recv, "recv")
        self.comm.Sendrecv(out, dest, 0, into, source, 0)
        self._deliver(into, recv)

    def sendrecv_add(self, send, dest: int, into, source: int, base=None):
        """Send `send` to rank dest; receive as many values as `into` holds from rank source
        and store ``base + received`` in `into` (base defaults to into: add in place).

        Pipelined in segments of self.segment bytes (see the module docstring).  With
        segment=None, the textbook step: the whole message, then the whole addition."""
        return self.exchange_add([(send, dest)], [source], into, base)

    def exchange_add(self, sends, sources, into, base=None):
        """Send every (array, dest) of `sends` and receive a copy as long as `into` from
        every rank in `sources`, all at once; store ``base + the copies`` in `into`, added
        in the order of `sources` (the same bits whatever order they land in).  base
        defaults to into: add in place.  sendrecv_add is this with one message each way."""
        base = into if base is None else base
        if self.segment:
            return self._pipelined(sends, sources, into, base)
        landing = scratch(self.xp, "landing", len(sources) * into.size, into.dtype)
        copies = [landing[k * into.size:(k + 1) * into.size] for k in range(len(sources))]
        self.exchange(sends, list(zip(copies, sources)))
        self.xp.add(base, copies[0], out=into)
        for copy in copies[1:]:
            self.xp.add(into, copy, out=into)

    def _pipelined(self, sends, sources, into, base):
        """Segment i of every message in `sends` goes out and segment i of every copy of
        `into` comes in from `sources` (each side cuts its own message, so the counts match);
        two segments are in flight while the one before them is delivered and, unless base
        is None, added: into = base + the copies.  When base is separate memory (not into),
        the first copy lands in `into` itself and base is added in place ("straight"), which
        moves 3 bytes of memory per byte added where adding into a third array moves 4 (the
        write needs its cache line read first).  base None: one source, nothing added."""
        xp, seg = self.xp, max(1, self.segment // into.itemsize)
        cut = lambda a, i: a[i * seg:(i + 1) * seg]
        count = lambda a: -(-a.size // seg)             # segments of a; 0 for an empty message
        straight = base is None or not overlaps(xp, base, into)
        apart = len(sources) - straight                 # copies that land in scratch, per segment
        landing = scratch(xp, "landing", 2 * apart * seg, into.dtype) if apart else None
        self.bytes_sent += sum(a.nbytes for a, dest in sends if dest != self.rank)
        self._sync()                            # send's data (and base) are computed
        recvs = count(into)

        def post(i):
            """Start segment i: its receives and its sends.  Slot i % 2 is free again: its
            last user, segment i - 2, was delivered and added before this is called."""
            size = cut(into, i).size
            targets = [cut(into, i)] if straight else []
            targets += [landing[((i % 2) * apart + k) * seg:][:size] for k in range(apart)]
            if self.stage:
                self._sync()                    # the GPU has finished copying slot i % 2 up
            hosts = [self._incoming(t, f"recv{k}.{i % 2}") for k, t in enumerate(targets)]
            requests = []
            if i < recvs:
                requests += [self.comm.Irecv(h, source, 0) for h, source in zip(hosts, sources)]
            requests += [self.comm.Isend(self._outgoing(cut(a, i), f"send{k}.{i % 2}"), dest, 0)
                         for k, (a, dest) in enumerate(sends) if i < count(a)]
            return requests, targets, hosts

        steps = max([recvs] + [count(a) for a, _ in sends])
        pending = post(0) if steps else None
        for i in range(steps):
            ahead = post(i + 1) if i + 1 < steps else None
            requests, targets, hosts = pending
            MPI.Request.Waitall(requests)
            if i < recvs:
                for host, target in zip(hosts, targets):
                    self._deliver(host, target)
                if base is not None:
                    out, first = cut(into, i), targets[0]
                    if straight:
                        xp.add(first, cut(base, i), out=out)
                    else:
                        xp.add(cut(base, i), first, out=out)
                    for copy in targets[1:]:
                        xp.add(out, copy, out=out)
            pending = ahead

    def send(self, a, dest: int):
        self.bytes_sent += a.nbytes
        self._sync()
        self.comm.Send(self._outgoing(a, "send"), dest, 0)

    def recv(self, a, source: int):
        self._sync()
        into = self._incoming(a, "recv")
        self.comm.Recv(into, source, 0)
        self._deliver(into, a)

    def exchange(self, sends, receives, arrived=None):
        """Post every (array, peer) of `sends` and every (array, peer) of `receives` at
        once, and call arrived(k), if given, as soon as receive k has landed (in the order
        of `receives`, while the later ones are still travelling).  Returns when everything
        has been sent.

        The receives are awaited one by one in order, not with Waitany: with ranks
        outnumbering the cores, MPICH's Waitany completed an all-to-all many times slower
        than Wait on each request in turn (mpi_impl/README.md, "All-to-all")."""
        self._sync()
        out = [self._outgoing(a, f"xsend{k}") for k, (a, _) in enumerate(sends)]
        into = [self._incoming(a, f"xrecv{k}") for k, (a, _) in enumerate(receives)]
        posted = [self.comm.Irecv(h, peer, 0) for h, (_, peer) in zip(into, receives)]
        sent = [self.comm.Isend(h, peer, 0) for h, (_, peer) in zip(out, sends)]
        self.bytes_sent += sum(a.nbytes for a, peer in sends if peer != self.rank)
        for k, request in enumerate(posted):
            request.Wait()
            self._deliver(into[k], receives[k][0])
            if arrived:
                arrived(k)
        MPI.Request.Waitall(sent)

    def allreduce(self, buf, x=None):
        """MPI's own Allreduce(SUM) of x into buf (in place if x is None or buf).  Bytes are
        counted by the caller (MPI does not say)."""
        self._sync()
        if x is None or x is buf:
            host = self._outgoing(buf, "send")
            self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        else:
            host = self._incoming(buf, "recv")
            self.comm.Allreduce(self._outgoing(x, "send"), host, op=MPI.SUM)
        self._deliver(host, buf)
