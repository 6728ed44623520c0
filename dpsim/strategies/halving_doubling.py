"""Halving-doubling all-reduce, Rabenseifner's algorithm (R. Rabenseifner, "Optimization of
Collective Reduction Operations", ICCS 2004; Thakur, Rabenseifner & Gropp, IJHPCA 2005): what
MPICH runs for long messages, and mpi_impl/halving_doubling.py's steps.

With p = n a power of two:
  reduce-scatter by recursive halving: log2 p steps. In step k (distance d = 2^k) every rank
                  sends half of the part it still works on (m / 2^(k+1) bytes) to rank ^ d
                  and adds the other half it receives. Afterwards each rank owns 1/p, summed.
  all-gather by recursive doubling: the same steps backwards; the parts double each time.
When n is not a power of two, ranks beyond p first fold their vectors into ranks 0..r-1 and
get the result back at the end (as in recursive doubling).
Cost:  2 log2(p) alpha + 2 (p-1)/p m beta + (p-1)/p m gamma  [+ 2 alpha + 2 m beta + m gamma if r > 0]
The ring's bytes in 2 log2 p steps instead of 2(p-1): the latency of recursive doubling with
the bandwidth of the ring (for a power of two).
"""
from ..symmetry import paired
from .recursive_doubling import fold, unfold


def exchange_step(machine, ranks, p, distance, nbytes, label, reduce):
    moves = paired(machine.cluster, ranks, p, distance, nbytes)       # one dpsim.symmetry step
    if reduce:
        yield from machine.send_reduce(moves, ranks if p == len(ranks) else ranks[:p], nbytes, label)
    else:
        yield machine.send(moves, label)


def allreduce(machine, ranks, nbytes):
    p, pairs = yield from fold(machine, ranks, nbytes)
    distances = [1 << k for k in range(p.bit_length() - 1)]          # 1, 2, 4, ..., p/2
    part = nbytes
    for d in distances:                                               # reduce-scatter
        part /= 2
        yield from exchange_step(machine, ranks, p, d, part, "reduce-scatter", reduce=True)
    for d in reversed(distances):                                     # all-gather
        yield from exchange_step(machine, ranks, p, d, part, "all-gather", reduce=False)
        part *= 2
    yield from unfold(machine, pairs, nbytes)
