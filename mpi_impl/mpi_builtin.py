"""The baseline: MPI's own ``MPI_Allreduce`` (here MPICH's, from the ``mpich`` wheel).

This is what the hand-written algorithms are measured against.  MPICH picks an algorithm
by message size and rank count (Thakur, Rabenseifner & Gropp 2005): recursive doubling for
short messages, Rabenseifner's reduce-scatter + all-gather for long ones, so its cost is
about

    T_mpi ~ 2 log2(p) alpha + 2 (p - 1)/p m beta + (p - 1)/p m gamma      (long messages)

Called in place (``MPI.IN_PLACE``) on a copy of the input, exactly as the other algorithms
work, so all of them pay the same copy.
"""
from __future__ import annotations


def allreduce(buf, wire):
    """Sum `buf` over all ranks of wire.comm, in place, with MPI_Allreduce."""
    if wire.size == 1:
        return
    wire.bytes_sent += bytes_sent(buf.size, buf.itemsize, wire.size)
    wire.allreduce_inplace(buf)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Nominal bytes per rank: 2 (p - 1)/p m, the lower bound MPICH reaches for long messages.

    MPI does not tell us what it really sent; this is the textbook figure, not a count.
    """
    return 2 * (p - 1) * count * itemsize // p
