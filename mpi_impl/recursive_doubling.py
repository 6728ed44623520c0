"""Recursive doubling all-reduce: log2 p steps, in each of which every rank swaps its whole
vector with a partner and adds what it got (Thakur, Rabenseifner & Gropp, "Optimization of
Collective Communication Operations in MPICH", IJHPCA 2005, section 4.1; MPICH's choice for
short messages).

n ranks; p is the largest power of two <= n and r = n - p.

1. **Fold** (only if n is not a power of two).  Ranks p..n-1 send their whole vector to
   ranks 0..r-1 (rank p + i to rank i), which add it in.  The folded ranks then wait.
2. **Recursive doubling** (log2 p steps).  With distance 1, 2, 4, ..., p/2: every rank
   swaps its whole vector with rank ^ distance and adds what it received.  After step k
   every rank holds the sum over its group of 2^k ranks; after the last, the sum of all.
3. **Unfold.**  Ranks 0..r-1 send the result to the rank that folded into them.

Cost (alpha latency per message, beta seconds per byte, gamma seconds per byte reduced,
m bytes in the vector):

    T_rd = log2(p) (alpha + m beta + m gamma)    [+ 2 alpha + 2 m beta + m gamma if r > 0]

Few steps, so little latency, but every step moves the whole vector: m log2 p bytes per rank
against the ring's 2 (p - 1)/p m, so it loses for large vectors.  Floating-point addition is
commutative, so both partners compute the same bits and every rank ends with the same result.
Works for any length and any n.  halving_doubling.py folds and unfolds the same way.
"""
from __future__ import annotations

from .device import load, scratch


def largest_power_of_two(n: int) -> int:
    """The largest power of two <= n (n >= 1)."""
    return 1 << (n.bit_length() - 1)


def allreduce(buf, wire, x=None):
    """Sum `buf` (1-D, contiguous) over all ranks of wire.comm, in place; or, if `x` is
    given, the sum of x (copied into buf first: every step swaps the whole vector)."""
    n, r, xp = wire.size, wire.rank, wire.xp
    load(buf, x)                                 # this algorithm works in buf
    if n == 1:
        return
    p = largest_power_of_two(n)
    incoming = scratch(xp, "recursive-doubling", buf.size, buf.dtype)

    # 1. fold: ranks p..n-1 add their vectors into ranks 0..r-1, then wait for the result
    if fold(buf, wire, p, incoming):
        return

    # 2. recursive doubling: swap the whole vector with rank ^ distance, add it
    distance = 1
    while distance < p:
        partner = r ^ distance
        wire.sendrecv(buf, partner, incoming, partner)
        xp.add(buf, incoming, out=buf)
        distance *= 2

    # 3. unfold: the folded ranks get the result back
    unfold(buf, wire, p)


def fold(buf, wire, p: int, incoming) -> bool:
    """Step 1: rank p + i sends its vector to rank i, which adds it in (i < n - p).
    Returns True on a folded rank, which then waits for, and receives, the finished sum."""
    r = wire.rank
    if r >= p:
        wire.send(buf, r - p)
        wire.recv(buf, r - p)          # sent by unfold() once the p ranks have finished
        return True
    if r + p < wire.size:
        wire.recv(incoming, r + p)
        wire.xp.add(buf, incoming, out=buf)
    return False


def unfold(buf, wire, p: int):
    """The last step: rank i sends the finished sum to rank p + i, which folded into it."""
    if wire.rank + p < wire.size:
        wire.send(buf, wire.rank + p)


def bytes_sent(count: int, itemsize: int, nranks: int, rank: int = 0) -> int:
    """Bytes `rank` sends: m per doubling step, plus m to fold or to unfold."""
    if nranks == 1:
        return 0
    p = largest_power_of_two(nranks)
    m = count * itemsize
    if rank >= p:
        return m                                   # the fold only
    steps = p.bit_length() - 1                     # log2 p
    return steps * m + (m if rank + p < nranks else 0)


def seconds(count: int, itemsize: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """log2(p) (alpha + m beta + m gamma), plus the fold and unfold when n is not a power of
    two (2 alpha + 2 m beta + m gamma; p the largest power of two <= n)."""
    p, m = largest_power_of_two(n), count * itemsize
    return (p.bit_length() - 1) * (alpha + m * beta + m * gamma) \
        + fold_seconds(count, itemsize, n, alpha, beta, gamma)


def fold_seconds(count: int, itemsize: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """The fold and unfold of n - p ranks (p the largest power of two <= n): one message of
    the whole vector in, one addition, one message out; 0 when n is a power of two."""
    m = count * itemsize
    return 2 * (alpha + m * beta) + m * gamma if largest_power_of_two(n) < n else 0.0
