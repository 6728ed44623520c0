"""Rabenseifner's all-reduce: recursive-halving reduce-scatter, then recursive-doubling
all-gather (Thakur, Rabenseifner & Gropp 2005, section 4.1; MPICH's long-message algorithm).

Think of the ranks as the leaves of a binary tree of depth log2(p).

1. **Fold** (only if p is not a power of two).  With p' the largest power of two <= p and
   rem = p - p', the first 2 rem ranks pair up: each even rank sends its whole buffer to the
   odd rank after it, which adds it in.  The even ranks then sit out; p' ranks remain.
2. **Reduce-scatter by recursive halving** (log2 p' steps).  Each rank exchanges half of its
   current window with the partner whose rank differs in one bit (the highest bit first),
   keeps one half and adds the partner's copy of it.  The window halves at every step; at
   the end rank i holds the full sum of block i.
3. **All-gather by recursive doubling** (log2 p' steps).  The same partners in reverse
   order swap their finished windows, which double every step.
4. **Unfold.**  Each odd rank of step 1 sends the result to the even rank that sat out.

Cost with p a power of two (alpha latency, beta seconds per byte, gamma seconds per byte
reduced, m bytes):

    T_rab = 2 log2(p) alpha  +  2 (p - 1)/p  m beta  +  (p - 1)/p  m gamma

the ring's bandwidth with only 2 log2(p) latencies.  Otherwise the fold and unfold add
2 alpha + 2 m beta + m gamma (Thakur et al. 2005).
"""
from __future__ import annotations

from ._xp import chunk_bounds, scratch


def _power_of_two_below(p: int) -> int:
    q = 1
    while q * 2 <= p:
        q *= 2
    return q


def allreduce(buf, wire):
    """Sum `buf` (1-D, contiguous) over all ranks of wire.comm, in place."""
    p, r, xp = wire.size, wire.rank, wire.xp
    if p == 1:
        return
    q = _power_of_two_below(p)      # ranks that take part in halving/doubling
    rem = p - q
    incoming = scratch(xp, "tree", buf.size, buf.dtype)

    # 1. fold the extra ranks into their odd neighbours
    if r < 2 * rem:
        if r % 2 == 0:
            wire.send(buf, r + 1)
            wire.recv(buf, r + 1)    # 4. (for the even rank) the finished result comes back
            return
        wire.recv(incoming, r - 1)
        xp.add(buf, incoming, out=buf)
        me = r // 2
    else:
        me = r - rem

    def real_rank(i):               # position among the q active ranks -> rank in comm
        return 2 * i + 1 if i < rem else i + rem

    blocks = chunk_bounds(buf.size, q)
    span = lambda lo, hi: buf[blocks[lo]:blocks[hi]]

    # 2. reduce-scatter by recursive halving: keep one half of the window, send the other
    lo, hi, steps = 0, q, []
    mask = q // 2
    while mask >= 1:
        partner = me ^ mask
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if me & mask == 0 else ((mid, hi), (lo, mid))
        kept = span(*keep)
        part = incoming[:kept.size]
        wire.sendrecv(span(*give), real_rank(partner), part, real_rank(partner))
        xp.add(kept, part, out=kept)
        steps.append((partner, keep, give))
        lo, hi = keep
        mask //= 2

    # 3. all-gather by recursive doubling: undo the halving steps in reverse order
    for partner, keep, give in reversed(steps):
        wire.sendrecv(span(*keep), real_rank(partner), span(*give), real_rank(partner))

    # 4. unfold: hand the result to the rank that sat out
    if r < 2 * rem:
        wire.send(buf, r - 1)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends, replaying the schedule above without any data."""
    if p == 1:
        return 0
    q = _power_of_two_below(p)
    rem = p - q
    if rank < 2 * rem and rank % 2 == 0:
        return count * itemsize                     # the fold only
    me = rank // 2 if rank < 2 * rem else rank - rem
    blocks = chunk_bounds(count, q)
    lo, hi, sent, mask = 0, q, 0, q // 2
    while mask >= 1:
        mid = (lo + hi) // 2
        keep, give = ((lo, mid), (mid, hi)) if me & mask == 0 else ((mid, hi), (lo, mid))
        sent += (blocks[give[1]] - blocks[give[0]]) + (blocks[keep[1]] - blocks[keep[0]])
        lo, hi = keep
        mask //= 2
    if rank < 2 * rem:
        sent += count                               # the unfold
    return sent * itemsize
