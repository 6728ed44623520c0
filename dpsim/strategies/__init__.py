"""Gradient synchronisation strategies, one module each. Every module's `allreduce(comm,
ranks, nbytes)` is a SimPy generator; its docstring gives the alpha-beta-gamma cost that
dpsim.analytic writes as a formula. Compression wraps a strategy: `fp16` halves the bytes of
any of them; `1bit` replaces the exchange with CNTK's striped one (onebit.py)."""
from functools import partial

from . import dataparallel, fp16, hierarchical, onebit, ps, ring, sharded_ps, tree


def allreduce_for(sync, compression=None, cpu_update_s_per_param=0.0):
    """The allreduce generator function a [sync] table asks for (compression: override;
    cpu_update_s_per_param: the CPU parameter server's update cost, when it does the update)."""
    table = {
        "ring": ring.allreduce,
        "ps": partial(ps.allreduce, location=sync.ps_location, update_s_per_param=cpu_update_s_per_param),
        "sharded-ps": sharded_ps.allreduce,
        "tree": tree.allreduce,
        "hierarchical": hierarchical.allreduce,
        "dataparallel": dataparallel.allreduce,
    }
    compression = sync.compression if compression is None else compression
    if compression == "1bit":
        return onebit.allreduce
    if compression == "fp16":
        return fp16.wrap(table[sync.strategy])
    return table[sync.strategy]
