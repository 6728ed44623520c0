"""Recursive doubling all-reduce (Thakur, Rabenseifner & Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005), the classic choice for short messages;
mpi_impl/recursive_doubling.py runs the same steps.

With p = n a power of two: log2 p steps; in step k every rank swaps its whole m-byte vector
with the rank whose number differs in bit k, and adds what it got.
When n is not a power of two, let p be the largest power of two below n and r = n - p: first
ranks p..n-1 fold their vectors into ranks 0..r-1, then the p ranks double, then ranks
0..r-1 send the result back.
Cost:  log2(p) (alpha + m beta + m gamma)  [+ 2 alpha + 2 m beta + m gamma if r > 0]
Few steps (good for latency) but every step moves the whole vector: poor for big gradients.
An exchange among every GPU is one dpsim.symmetry step (symmetry.paired), simulated one flow
per kind.
"""
from ..symmetry import paired


def fold(machine, ranks, nbytes):
    """Ranks beyond the largest power of two p add their vectors into ranks 0..r-1.
    Returns (p, pairs): the pairs (extra rank, partner) that unfold() serves afterwards."""
    n = len(ranks)
    p = 1 << (n.bit_length() - 1)
    pairs = list(zip(ranks[p:], ranks[:n - p]))
    if pairs:
        yield machine.send([(hi, lo, nbytes) for hi, lo in pairs], "fold")
        yield machine.reduce([lo for _, lo in pairs], nbytes)
    return p, pairs


def unfold(machine, pairs, nbytes):
    """The folded-away ranks get the finished vector from their partners."""
    if pairs:
        yield machine.send([(lo, hi, nbytes) for hi, lo in pairs], "unfold")


def allreduce(machine, ranks, nbytes):
    p, pairs = yield from fold(machine, ranks, nbytes)
    distance = 1
    while distance < p:
        yield machine.send(paired(machine.cluster, ranks, p, distance, nbytes), "exchange")
        yield machine.reduce(ranks if p == len(ranks) else ranks[:p], nbytes)
        distance *= 2
    yield from unfold(machine, pairs, nbytes)
