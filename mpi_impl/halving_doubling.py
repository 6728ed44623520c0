"""Halving-doubling all-reduce, Rabenseifner's algorithm: a reduce-scatter by recursive
halving, then an all-gather by recursive doubling (Thakur, Rabenseifner & Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA 2005, section 4.1;
what MPICH runs for long messages).

n ranks; p is the largest power of two <= n and r = n - p.  The vector is cut into p blocks.

1. **Fold** (only if n is not a power of two).  Ranks p..n-1 send their whole vector to
   ranks 0..r-1, which add it in; the folded ranks then wait (as in recursive_doubling.py).
2. **Reduce-scatter by recursive halving** (log2 p steps).  Each rank works on a window of
   blocks, at first all of them.  With distance 1, 2, 4, ..., p/2: the rank and its partner
   rank ^ distance (who has the same window) split the window in two halves; each sends
   the partner the half the partner keeps, and adds the partner's copy of its own half.
   The window halves at every step; at the end each rank holds one block, fully summed.
3. **All-gather by recursive doubling** (log2 p steps).  The same partners in reverse
   order swap their finished windows, which double at every step.
4. **Unfold.**  Ranks 0..r-1 send the result to the rank that folded into them.

Cost (alpha latency per message, beta seconds per byte, gamma seconds per byte reduced,
m bytes in the vector):

    T_hd = 2 log2(p) alpha + 2 (p - 1)/p m beta + (p - 1)/p m gamma
                                                 [+ 2 alpha + 2 m beta + m gamma if r > 0]

the ring's bytes with only 2 log2 p latencies instead of 2 (p - 1).  Every block is summed
by one rank and sent to the others, so every rank ends with the same bits.
"""
from __future__ import annotations

from .device import chunk_bounds, load, scratch
from .recursive_doubling import fold, fold_seconds, largest_power_of_two, unfold


def allreduce(buf, wire, x=None):
    """Sum over all ranks of wire.comm into `buf` (1-D, contiguous): of `x` (left unchanged)
    if given, else of buf's own values, in place."""
    n, r, xp = wire.size, wire.rank, wire.xp
    p = largest_power_of_two(n)
    if n == 1 or p < n:                 # nothing to do, or the fold works in buf itself
        x = load(buf, x)
    x = buf if x is None else x
    if n == 1:
        return

    # 1. fold: ranks p..n-1 add their vectors into ranks 0..r-1, then wait for the result
    if p < n and fold(buf, wire, p, scratch(xp, "halving-doubling", buf.size, buf.dtype)):
        return

    blocks = chunk_bounds(buf.size, p)
    span = lambda a, lo, hi: a[blocks[lo]:blocks[hi]]

    # 2. reduce-scatter by recursive halving: keep one half of the window, send the other.
    #    The first step reads my input; later steps the partial sums already in buf.
    lo, hi, steps, partial = 0, p, [], x
    distance = 1
    while distance < p:
        partner = r ^ distance
        keep, give = _halves(lo, hi, r & distance)
        wire.sendrecv_add(span(partial, *give), partner, span(buf, *keep), partner,
                          base=span(partial, *keep))
        steps.append((partner, keep, give))
        lo, hi, partial = *keep, buf
        distance *= 2

    # 3. all-gather by recursive doubling: undo the halving steps in reverse order
    for partner, keep, give in reversed(steps):
        wire.sendrecv(span(buf, *keep), partner, span(buf, *give), partner)

    # 4. unfold: the folded ranks get the result back
    unfold(buf, wire, p)


def _halves(lo, hi, upper):
    """(kept, given) halves of the block window [lo, hi): the upper half is kept if `upper`."""
    mid = (lo + hi) // 2
    return ((mid, hi), (lo, mid)) if upper else ((lo, mid), (mid, hi))


def bytes_sent(count: int, itemsize: int, nranks: int, rank: int = 0) -> int:
    """Bytes `rank` sends, replaying the schedule above without any data."""
    if nranks == 1:
        return 0
    p = largest_power_of_two(nranks)
    if rank >= p:
        return count * itemsize                     # the fold only
    blocks = chunk_bounds(count, p)
    size = lambda window: blocks[window[1]] - blocks[window[0]]
    lo, hi, sent, distance = 0, p, 0, 1
    while distance < p:
        keep, give = _halves(lo, hi, rank & distance)
        sent += size(give) + size(keep)             # give while halving, keep while doubling
        lo, hi = keep
        distance *= 2
    if rank + p < nranks:
        sent += count                               # the unfold
    return sent * itemsize


def seconds(count: int, itemsize: int, n: int, alpha: float, beta: float, gamma: float) -> float:
    """T_hd above for `count` elements (p the largest power of two <= n): the time with no
    overlap of transfer and addition."""
    p, m = largest_power_of_two(n), count * itemsize
    return 2 * (p.bit_length() - 1) * alpha + (p - 1) / p * m * (2 * beta + gamma) \
        + fold_seconds(count, itemsize, n, alpha, beta, gamma)
