"""Sharded parameter server: every rank is the server for one shard of the buffer.

The buffer of n elements is cut into p shards; rank j owns shard j.  Every rank talks to
every other rank directly (no ring, no tree), one partner per step, in p - 1 steps per phase
(pairwise exchange: in step k, rank r sends to rank r + k and hears from rank r - k, so
every rank is busy sending and receiving in every step).

1. **Reduce the own shard.**  In step k, rank r sends its copy of shard (r + k) to that
   shard's owner, receives rank (r - k)'s copy of shard r, and adds it in.  After p - 1
   steps rank r holds the full sum of shard r.
2. **Gather the shards.**  In step k, rank r sends its finished shard to rank r + k and
   receives the finished shard (r - k) from its owner.

Every link now carries only 1/p of the traffic of a single server.  Per rank (Thakur,
Rabenseifner & Gropp 2005 notation)

    T_sharded = 2 (p - 1) alpha  +  2 (p - 1)/p  m beta  +  (p - 1)/p  m gamma

the same as the ring.  The difference shows on a real network: every rank talks to every
other, so each step crosses the whole machine (a switch must carry it at once), while the
ring only ever talks to neighbours.
"""
from __future__ import annotations

from ._xp import chunk_bounds, load


def allreduce(buf, wire, x=None):
    """Sum over all ranks of wire.comm into `buf` (1-D, contiguous): of `x` (left unchanged)
    if given, else of buf's own values, in place."""
    p, r = wire.size, wire.rank
    x = buf if x is None else x
    if p == 1:
        load(buf, x)
        return
    bounds = chunk_bounds(buf.size, p)

    def shard(a, j):
        j %= p
        return a[bounds[j]:bounds[j + 1]]

    mine = shard(buf, r)

    # 1. reduce my shard: everyone's copy of it comes to me, one sender per step;
    #    the others' shards of my input go out unchanged
    for k in range(1, p):
        wire.sendrecv_add(shard(x, r + k), (r + k) % p, mine, (r - k) % p,
                          base=shard(x, r) if k == 1 else mine)

    # 2. gather: my finished shard goes to everyone, theirs come to me
    for k in range(1, p):
        wire.sendrecv(mine, (r + k) % p, shard(buf, r - k), (r - k) % p)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends: every shard but its own, then its own shard to p - 1 ranks."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    own = b[rank + 1] - b[rank]
    return ((count - own) + (p - 1) * own) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_sharded above for `count` elements: the time with no overlap of transfer and addition."""
    m = count * itemsize
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * m * beta + (p - 1) / p * m * gamma
