"""NumPy or CuPy: where a program's arrays live, and the buffers the algorithms work in.

Every algorithm in this package is written once, for "xp": the array module of its input
(``numpy`` for CPU arrays, ``cupy`` for GPU arrays).  This module holds what depends on
that choice:

* **the array module** of an array (:func:`array_module`, :func:`is_gpu_array`), found
  without importing CuPy: CuPy is imported only when a CuPy array shows up, or when
  :func:`pick_device` is asked for a GPU;
* **the device choice** (:func:`pick_device`), the one place where a program
  (mpi_impl.train, mpi_impl.bench, course/calibrate.py, course/probe.py) chooses between
  the two, and :func:`missing_cupy`, the check that a GPU run can start at all;
* **BLAS threads** (:func:`limit_blas_threads`): ranks sharing a machine share its cores;
* **buffers**: how a buffer is cut into chunks (:func:`chunk_bounds`), and reusable scratch
  arrays (:func:`scratch`), pinned host memory for staging when CuPy is around.

How the arrays reach MPI is wire.py's business.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

# ------------------------------------------------------------------ the array module


def is_gpu_array(x) -> bool:
    """True for CuPy arrays, found without importing CuPy."""
    return type(x).__module__.split(".")[0] == "cupy"


def array_module(x):
    """``cupy`` if x is a CuPy array, else ``numpy``."""
    if is_gpu_array(x):
        import cupy
        return cupy
    return np


def stream_synchronizer(xp):
    """A function that blocks until the device of module xp has finished its queued work
    (the current CUDA stream for CuPy; nothing to wait for with NumPy)."""
    if xp is np:
        return _nothing
    return lambda: xp.cuda.get_current_stream().synchronize()


def _nothing():
    pass


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


# How to get CuPy: this checkout's extra for the CUDA installed (pyproject.toml).
CUPY_HINT = 'pip install -e ".[gpu]" (CUDA 12) or ".[gpu-cuda13]" (CUDA 13)'


def missing_cupy(kind: str) -> str | None:
    """Why a program cannot run on device `kind` here, in one line: "gpu" needs CuPy.
    None when it can ("cpu" always can).  Imports CuPy to find out."""
    if kind != "gpu":
        return None
    try:
        import cupy
    except ImportError:
        return f"--device gpu needs CuPy: {CUPY_HINT}, or use --device cpu"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:          # no driver, or a CuPy built for another CUDA
        return f"CuPy {cupy.__version__} finds no usable GPU ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    return None if count else f"CuPy {cupy.__version__} sees no GPU"


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
    return Device(cupy, stream_synchronizer(cupy), gpus)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                      # not Linux
        return os.cpu_count() or 1


# ------------------------------------------------------------------ BLAS threads

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
    """A reusable 1-D work array of at least `count` elements (contents undefined).
    A `purpose` starting with "host:" gives host memory, for staging."""
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
