"""Gradient synchronisation strategies, one module each, named as in dpsim.vocabulary.

Every module has `allreduce(machine, ranks, nbytes)`, a SimPy generator that finishes when every
rank holds the sum; its docstring gives the alpha-beta-gamma cost that dpsim.analytic writes
as a formula. Compression wraps a strategy: `fp16` halves the bytes of any of them; `1bit`
replaces the exchange with CNTK's striped one (onebit.py).

A strategy that changes more of the iteration than the sync says so with optional hooks
(dataparallel.py has them all); the engine calls them for every strategy, defaulting to:
  ONE_PROCESS_PER_NODE = False                   one training process per GPU
  before_forward(machine, ranks, work, batch)       nothing moves before forward
  after_forward(machine, ranks, work, batch)        nothing moves after forward
  broadcast_weights(machine, ranks, work)           every GPU updates its own copy: nothing to send
  updaters(ranks) -> ranks                       every GPU applies the update
  check(sc)                                      any scenario will do (raise ScenarioError if not)
  update_fraction(gpus) -> 1.0                   the share of the parameters each updater updates
  forward_pass, backward_pass = None             the engine computes each pass whole; a strategy that
                                                 gathers parameters unit by unit (zero3.py) runs the pass:
                                                 pass(machine, ranks, work, compute, overlap, sync)
Sharded strategies (zero1, zero2, zero3) reduce-scatter in `allreduce` and all-gather in their hooks.
Compression `powersgd` and `topk` wrap a strategy like fp16 (powersgd.py, topk.py).
"""
from functools import partial

from ..vocabulary import MIB

from . import (dataparallel, fp16, halving_doubling, hierarchical, mpi, onebit, ps, recursive_doubling, ring,
               sharded_ps)
from . import byteps, nvls, torus2d, tree
from . import powersgd, topk, zero1, zero2, zero3

MODULES = {
    "ring": ring,
    "recursive-doubling": recursive_doubling,
    "halving-doubling": halving_doubling,
    "ps": ps,
    "sharded-ps": sharded_ps,
    "hierarchical": hierarchical,
    "dataparallel": dataparallel,
    "mpi": mpi,
    # --- issue 27: NCCL's trees, 2D torus, BytePS, NVLink SHARP
    "double-tree": tree,
    "torus2d": torus2d,
    "byteps": byteps,
    "nvls": nvls,
    "zero1": zero1,         # dpsim.vocabulary.SHARDED
    "zero2": zero2,
    "zero3": zero3,
}


def _nothing(*args):
    return
    yield


DEFAULT_HOOKS = {
    "ONE_PROCESS_PER_NODE": False,
    "before_forward": _nothing,
    "after_forward": _nothing,
    "broadcast_weights": _nothing,
    "updaters": lambda ranks: ranks,
    "check": lambda sc: None,
    "update_fraction": lambda gpus: 1.0,
    "forward_pass": None,
    "backward_pass": None,
}


PULLS_BEFORE_FORWARD = ("ps", "byteps")      # strategies with a pull of their own (sync.ps_pull)


def pull_for(sync):
    """The pull a [sync] table runs before forward (sync.ps_pull = "before-forward"), or None."""
    if sync.ps_pull != "before-forward":
        return None
    if sync.strategy == "ps":
        return partial(ps.pull, location=sync.ps_location)
    return MODULES[sync.strategy].pull


def hook(strategy: str, name: str):
    """The strategy's hook `name`, or the default (strategy "none": every default)."""
    return getattr(MODULES.get(strategy), name, DEFAULT_HOOKS[name])


def allreduce_for(sync, compression=None, cpu_update_s_per_param=0.0, buckets=()):
    """The allreduce generator function a [sync] table asks for (compression: override;
    cpu_update_s_per_param: the CPU parameter server's update cost, when it does the update;
    buckets: the workload's, in the order they are synchronised, which PowerSGD reads)."""
    compression = sync.compression if compression is None else compression
    if compression == "1bit":
        return onebit.allreduce
    chosen = MODULES[sync.strategy].allreduce
    if sync.strategy == "ps":
        chosen = partial(chosen, location=sync.ps_location, update_s_per_param=cpu_update_s_per_param)
    if sync.ps_pull == "before-forward":
        chosen = partial(chosen, with_pull=False)
    if sync.strategy == "byteps" and sync.ps_partition_mib:
        chosen = partial(chosen, partition=sync.ps_partition_mib * MIB)
    if sync.strategy == "nvls":
        chosen = partial(chosen, efficiency=sync.nvls_efficiency)
    if sync.strategy == "torus2d":
        chosen = partial(chosen, width=sync.torus_x)
    if compression == "powersgd":
        return powersgd.wrap(chosen, sync.powersgd_rank, buckets, local_error=sync.powersgd_error == "local")
    if compression == "topk":
        return topk.wrap(chosen, sync.topk_ratio)
    return fp16.wrap(chosen) if compression == "fp16" else chosen
