"""All-reduce with NVIDIA's NCCL, through CuPy's bindings (``cupy.cuda.nccl``).

NCCL runs the ring (or a tree) on the GPUs themselves, over NVLink, PCIe or InfiniBand,
without going through MPI or host memory.  MPI is used only once per communicator, to hand
every rank the NCCL unique id.  For large messages NCCL's ring costs, as any ring
(Patarasuk & Yuan 2009),

    T_nccl ~ 2 (p - 1) alpha  +  2 (p - 1)/p  m beta  +  (p - 1)/p  m gamma

with alpha and beta those of the GPU interconnect.  Needs CuPy with NCCL and CuPy arrays.
"""
from __future__ import annotations

from .device import CUPY_HINT

_communicators: dict = {}   # one NCCL communicator per MPI communicator


def _nccl_module():
    try:
        from cupy.cuda import nccl
    except Exception as exc:
        raise RuntimeError(f"algo='nccl' needs CuPy built with NCCL ({CUPY_HINT}) "
                           f"and a GPU; importing cupy.cuda.nccl failed: {exc}") from exc
    if not getattr(nccl, "available", True):
        raise RuntimeError("algo='nccl': this CuPy was built without NCCL support")
    return nccl


def _communicator(comm, nccl):
    key = comm.py2f()
    if key not in _communicators:
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)          # setup only: a small tuple, pickled once
        _communicators[key] = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())
    return _communicators[key]


def allreduce(buf, wire, x=None):
    """Sum the CuPy array `x` (default: buf, in place) over all ranks of wire.comm into
    buf, with ncclAllReduce (which reads x and writes buf itself)."""
    if wire.xp.__name__ != "cupy":
        raise TypeError("algo='nccl' needs CuPy (GPU) arrays; use 'ring' or 'mpi' for NumPy")
    nccl = _nccl_module()
    types = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
             "int32": nccl.NCCL_INT32, "int64": nccl.NCCL_INT64}
    comm = _communicator(wire.comm, nccl)
    stream = wire.xp.cuda.get_current_stream()
    source = buf if x is None else x
    comm.allReduce(source.data.ptr, buf.data.ptr, buf.size, types[str(buf.dtype)],
                   nccl.NCCL_SUM, stream.ptr)
    stream.synchronize()
    wire.bytes_sent += bytes_sent(buf.size, buf.itemsize, wire.size)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Nominal bytes per rank for NCCL's ring: 2 (p - 1)/p m (NCCL does not report them)."""
    return 2 * (p - 1) * count * itemsize // p


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """A ring's cost (ring.seconds); NCCL's real rings depend on the GPUs' links."""
    from . import ring
    return ring.seconds(count, itemsize, p, alpha, beta, gamma)
