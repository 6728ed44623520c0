"""Gradient synchronisation strategies, one module each. Every module's `allreduce(comm,
ranks, nbytes)` is a SimPy generator; its docstring gives the alpha-beta-gamma cost that
dpsim.analytic writes as a formula."""
from functools import partial

from . import dataparallel, hierarchical, ps, ring, sharded_ps, tree


def allreduce_for(sync):
    """The allreduce generator function a [sync] table asks for."""
    table = {
        "ring": ring.allreduce,
        "ps": partial(ps.allreduce, location=sync.ps_location),
        "sharded-ps": sharded_ps.allreduce,
        "tree": tree.allreduce,
        "hierarchical": hierarchical.allreduce,
        "dataparallel": dataparallel.allreduce,
    }
    return table[sync.strategy]
