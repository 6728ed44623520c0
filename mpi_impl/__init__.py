"""mpi_impl: readable mpi4py all-reduce algorithms on NumPy (CPU) and CuPy (GPU) arrays.

Run under ``mpiexec``::

    import mpi_impl
    total = mpi_impl.allreduce(x, algo="ring")     # sum over ranks, same type as x
    onebit = mpi_impl.OneBitAllreduce()            # 1-bit SGD exchange, keeps residuals
    approx = onebit(x)

One file per algorithm (ring.py, recursive_doubling.py, halving_doubling.py, ps.py,
sharded_ps.py, mpi_builtin.py, nccl.py, onebit.py); each docstring gives the algorithm's
alpha-beta-gamma cost.  They compute with device.py's array module and talk through
wire.py's Wire, whose receive-and-add steps run in segments (pipeline.py).  The names are
dpsim.vocabulary's, shared with the simulator (the one module of dpsim imported here).
See README.md.

Importing this package only imports mpi4py (which initialises MPI), after asking MPICH for
single-copy messages where the kernel allows them (single_copy.py); CuPy is imported only
when a CuPy array is passed.
"""
from __future__ import annotations

from . import single_copy

single_copy.enable()          # before MPI starts; a program that imported mpi4py first keeps MPICH's default

from mpi4py import MPI  # noqa: E402

from dpsim.vocabulary import unknown_algorithm

from . import all_gather as _all_gather
from . import halving_doubling, mpi_builtin, nccl, ps, recursive_doubling, ring, sharded_ps
from . import reduce_scatter as _reduce_scatter
from .device import array_module, chunk_bounds, is_gpu_array, load, missing_cupy, pick_device
from .errors import REDUCIBLE_DTYPES, abort_on_error, check_arguments, install_excepthook
from .onebit import OneBitAllreduce
from .wire import SEGMENT_BYTES, make_wire

#: the exact all-reduce algorithms, named as in dpsim.vocabulary.ALGORITHMS
ALGORITHMS = ("ring", "recursive-doubling", "halving-doubling", "ps", "sharded-ps", "mpi", "nccl")

_MODULES = {"ring": ring, "recursive-doubling": recursive_doubling,
            "halving-doubling": halving_doubling, "ps": ps, "sharded-ps": sharded_ps,
            "mpi": mpi_builtin, "nccl": nccl}

#: bytes this process has sent to other ranks, per algorithm, since it started
#: (counted message by message; "mpi" and "nccl" hold the nominal 2 (p-1)/p m per call)
bytes_sent_by_algo = {name: 0 for name in ALGORITHMS}

__all__ = ["ALGORITHMS", "allreduce", "bytes_sent", "seconds", "SEGMENT_BYTES", "OneBitAllreduce", "abort_on_error",
           "install_excepthook", "bytes_sent_by_algo", "REDUCIBLE_DTYPES", "pick_device", "missing_cupy",
           "reduce_scatter", "all_gather", "chunk_bounds"]


def allreduce(x, algo: str = "ring", comm=None, *, out=None, cuda_aware: bool | None = None,
              check: bool = True, segment: int = SEGMENT_BYTES):
    """Return the elementwise sum of `x` over all ranks of `comm` (default COMM_WORLD).

    x: a NumPy or CuPy array (any shape and memory layout: a strided view is copied into a
    contiguous buffer first; float32, float64, int32 or int64), the same size
    and dtype on every rank; it is not modified (unless out=x).  The result has x's shape, dtype and type.
    algo: one of ALGORITHMS (an old name such as "tree" raises ValueError with the new
    names).  cuda_aware: hand GPU arrays straight to MPI instead of staging
    them through host memory (default: the MPI_IMPL_CUDA_AWARE environment variable).
    check: verify the arguments agree across ranks first (one tiny Allreduce); bad
    arguments raise ValueError/TypeError on every rank.  Turn off only in timing loops
    whose arguments were already checked.
    out: a writable array of x's shape, dtype and type (any layout) to write the result into (reused between
    calls, it saves allocating a new array each time); ``out=x`` reduces x in place.
    segment: bytes per pipeline segment of ring, halving-doubling and sharded-ps (default
    SEGMENT_BYTES, 1 MiB), or 0 for their textbook steps (whole chunks, then the adds), as
    dpsim's sync.segment_mib = 0; None means 0 too.
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    xp = array_module(x)
    if xp.__name__ == "numpy":
        x = xp.asarray(x)
    problem = _out_problem(x, out)
    if check:
        check_arguments(x, comm, algo=algo, algorithms=ALGORITHMS, device=is_gpu_array(x),
                        problem=problem, about="out")
    if problem:
        raise ValueError(problem)
    if algo not in _MODULES:
        raise ValueError(unknown_algorithm(algo, ALGORITHMS))

    if out is None:
        out = xp.empty(x.shape, x.dtype)
    result = out if out.flags.c_contiguous else xp.empty(x.shape, x.dtype)  # copied back below
    flat = result.reshape(-1)
    if out is x:
        source = flat                                # in place (in a contiguous copy if need be)
        load(result, x)
    elif xp.may_share_memory(out, x) or not x.flags.c_contiguous:
        source = xp.ascontiguousarray(x).copy().reshape(-1)  # a strided or overlapping x: a copy
    else:
        source = x.reshape(-1)
    wire = make_wire(comm, xp, cuda_aware, segment)
    _MODULES[algo].allreduce(flat, wire, source)
    if result is not out:
        out[...] = result
    bytes_sent_by_algo[algo] += wire.bytes_sent
    return out


def _out_problem(x, out):
    """Why `out` cannot take x's sum (one line), or None: it must be an array of x's type,
    shape and dtype, and writable; any memory layout will do."""
    if out is None:
        return None
    if type(out) is not type(x) or out.shape != x.shape or out.dtype != x.dtype:
        return "out must be an array of the same type, shape and dtype as x"
    if not getattr(out.flags, "writeable", True):
        return "out is read-only (flags.writeable is False); pass a writable array"
    return None


def bytes_sent(algo: str, count: int, itemsize: int, nranks: int, rank: int = 0) -> int:
    """Bytes `rank` sends in one all-reduce of `count` elements of `itemsize` bytes."""
    if algo not in _MODULES:
        raise ValueError(unknown_algorithm(algo, ALGORITHMS))
    return _MODULES[algo].bytes_sent(count, itemsize, nranks, rank)


def seconds(algo: str, count: int, itemsize: int, nranks: int, alpha: float, beta: float,
            gamma: float) -> float:
    """The alpha-beta-gamma time of one all-reduce of `count` elements with `algo`, as its
    file's docstring states it: alpha seconds per message, beta per byte sent, gamma per
    byte added, nothing overlapped.  mpi_impl.bench prints it as the "bound"."""
    if algo not in _MODULES:
        raise ValueError(unknown_algorithm(algo, ALGORITHMS))
    if nranks == 1:
        return 0.0
    return _MODULES[algo].seconds(count, itemsize, nranks, alpha, beta, gamma)


def reduce_scatter(x, comm=None, *, out=None, cuda_aware: bool | None = None, check: bool = True,
                   segment: int = SEGMENT_BYTES):
    """This rank's chunk of the elementwise sum of `x` over all ranks (ring, reduce_scatter.py).

    x: 1-D NumPy or CuPy array, the same length and dtype on every rank, left unchanged.
    Rank r gets chunk r of ``chunk_bounds(x.size, p)`` (the split of numpy.array_split,
    MPI's Reduce_scatter with those counts).  out: an array of that chunk's length to write
    into (it may be x's own chunk r); check and segment as for allreduce.
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    xp = array_module(x)
    p, r = comm.Get_size(), comm.Get_rank()
    bounds = chunk_bounds(x.size, p)
    length = bounds[r + 1] - bounds[r]
    problem = None
    if getattr(x, "ndim", 1) != 1:
        problem = "reduce_scatter takes a 1-D array"
    elif out is not None and (type(out) is not type(x) or out.shape != (length,) or out.dtype != x.dtype):
        problem = f"out must be a 1-D array of this rank's chunk length {length} and x's type and dtype"
    if check:
        check_arguments(x, comm, device=is_gpu_array(x), problem=problem, about="x or out")
    if problem:
        raise ValueError(problem)
    out = xp.empty(length, x.dtype) if out is None else out
    return _reduce_scatter.reduce_scatter(x, make_wire(comm, xp, cuda_aware, segment), out)


def all_gather(mine, comm=None, *, out=None, count: int | None = None,
               cuda_aware: bool | None = None, check: bool = True):
    """The whole 1-D array of which rank r holds chunk r, `mine` (ring, all_gather.py).

    Give `out` (the whole length, written and returned) or `count` (its length); chunk r is
    ``chunk_bounds(count, p)``'s r-th, so `mine` has that length on rank r.
    """
    comm = comm if comm is not None else MPI.COMM_WORLD
    xp = array_module(mine)
    p, r = comm.Get_size(), comm.Get_rank()
    count = out.size if out is not None else count
    problem = None
    if count is None:
        problem, count = "all_gather needs out or count", 0
    bounds = chunk_bounds(count, p)
    length = bounds[r + 1] - bounds[r]
    if problem is None and (getattr(mine, "ndim", 1) != 1 or mine.size != length):
        problem = f"rank {r}'s chunk must be 1-D with {length} of the {count} elements"
    elif problem is None and out is not None and (out.ndim != 1 or out.dtype != mine.dtype
                                                  or type(out) is not type(mine)):
        problem = "out must be a 1-D array of mine's type and dtype"
    if check:
        whole = xp.empty(0, mine.dtype)
        check_arguments(whole, comm, device=is_gpu_array(mine), problem=problem,
                        about="chunk or out", same={"the total length": count})
    if problem:
        raise ValueError(problem)
    out = xp.empty(count, mine.dtype) if out is None else out
    return _all_gather.all_gather(mine, make_wire(comm, xp, cuda_aware), out)
