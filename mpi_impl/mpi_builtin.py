"""The baseline: MPI's own ``MPI_Allreduce`` (here MPICH's, from the ``mpich`` wheel).

This is what the hand-written algorithms are measured against.  MPICH 5.0.2 picks its
algorithm by collective-selection rules compiled into libmpi (see them with
``strings .venv/lib/libmpi.so.12 | grep '"collective=allreduce"'``; the environment
variable MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE replaces them).  For a built-in
operation such as SUM on an intra-node communicator of p ranks, with q the largest power
of two <= p, it runs

* ``MPIR_Allreduce_intra_recursive_doubling`` when the message is at most 8 bytes or has
  fewer than q elements: our ``recursive-doubling``, log2(q) (alpha + m beta + m gamma);
* ``MPIR_Allreduce_intra_reduce_scatter_allgather`` otherwise: our ``halving-doubling``,
  2 log2(q) alpha + 2 (q - 1)/q m beta + (q - 1)/q m gamma;

each plus 2 alpha + 2 m beta + m gamma when p is not a power of two (costs from Thakur,
Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH",
IJHPCA 2005).  The same rules name a shared-memory algorithm (release-gather) for
single-threaded MPI only; mpi4py initialises MPI with MPI_THREAD_MULTIPLE.  :func:`choice`
is the rule above.

Given the input and the output buffer, as our algorithms are (``MPI_Allreduce(x, buf)``,
not in place on a copy), so that neither side pays a copy the other avoids.  MPICH's
reduce-scatter/all-gather copies the input into the output itself before it starts.
"""
from __future__ import annotations

from . import halving_doubling, recursive_doubling
from .device import load
from .recursive_doubling import largest_power_of_two


def allreduce(buf, wire, x=None):
    """Sum `x` (default: buf itself, in place) over all ranks of wire.comm into buf, with
    MPI_Allreduce."""
    if wire.size == 1:
        load(buf, x)
        return
    wire.bytes_sent += bytes_sent(buf.size, buf.itemsize, wire.size)
    wire.allreduce(buf, x)


def choice(count: int, itemsize: int, nranks: int) -> str:
    """The algorithm MPICH 5.0.2 runs for MPI_Allreduce(SUM) of `count` elements on an
    intra-node communicator of nranks ranks: "recursive-doubling" or "halving-doubling"."""
    if count * itemsize <= 8 or count < largest_power_of_two(nranks):
        return "recursive-doubling"
    return "halving-doubling"


def bytes_sent(count: int, itemsize: int, nranks: int, rank: int = 0) -> int:
    """Bytes per rank of the algorithm MPICH picks (:func:`choice`), averaged over the ranks
    and rounded down: MPI does not tell what it really sent, and MPICH folds other ranks than
    ours when nranks is not a power of two, so only the mean is the same.  `rank` is ignored."""
    if nranks == 1:
        return 0
    module = {"recursive-doubling": recursive_doubling,
              "halving-doubling": halving_doubling}[choice(count, itemsize, nranks)]
    return sum(module.bytes_sent(count, itemsize, nranks, r) for r in range(nranks)) // nranks


def seconds(count: int, itemsize: int, nranks: int, alpha: float, beta: float, gamma: float) -> float:
    """The cost of the algorithm MPICH picks (:func:`choice`)."""
    module = {"recursive-doubling": recursive_doubling,
              "halving-doubling": halving_doubling}[choice(count, itemsize, nranks)]
    return module.seconds(count, itemsize, nranks, alpha, beta, gamma)
