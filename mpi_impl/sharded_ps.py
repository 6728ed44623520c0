"""Sharded parameter server: every rank is the server for one shard of the buffer.

The buffer of n elements is cut into p shards; rank j owns shard j.  Every rank talks to
every other rank directly (no ring, no tree), and posts all its messages of a phase at once
(as a key-value store pushes every key to its server at once: d2l.ai's third design).

1. **Reduce the own shard.**  Rank r sends its copy of every other shard j to its owner j,
   and receives every other rank's copy of shard r, all at once; it adds them to its own
   copy in a fixed order (from r - 1, r - 2, ...: the same bits whatever order they land
   in).  Now rank r holds the full sum of shard r.
2. **Gather the shards.**  Rank r sends its finished shard to every other rank and receives
   every other finished shard straight into place, all at once.

Every link now carries only 1/p of the traffic of a single server.  Per rank (Thakur,
Rabenseifner & Gropp 2005 notation), as ``dpsim.analytic.sharded_ps`` and dpsim's
``strategies/sharded_ps.py`` model it:

    T_sharded = 2 alpha  +  2 (p - 1)/p  m beta  +  (p - 1)/p  m gamma

the ring's bytes in two rounds of messages instead of 2 (p - 1).  The price shows on a real
network: p (p - 1) messages are in flight at once, so every pair must be able to talk at
full speed (a switch), where the ring only ever talks to neighbours.

Phase 1 goes through ``wire.exchange_add``, pipelined in segments like the ring's steps
(pipeline.py): segment s + 1 of every message travels while segment s's copies are added.
"""
from __future__ import annotations

from .device import chunk_bounds, load


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
    owners = [(r + k) % p for k in range(1, p)]        # whom I send to
    senders = [(r - k) % p for k in range(1, p)]       # whom I hear from

    # 1. reduce my shard: every rank's copy of it comes to me, all at once, while my copy
    #    of every other shard goes to its owner
    wire.exchange_add([(shard(x, j), j) for j in owners], senders, mine, base=shard(x, r))

    # 2. gather: my finished shard goes to everyone, theirs land in place, all at once
    wire.exchange([(mine, j) for j in owners], [(shard(buf, j), j) for j in senders])


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
    return 2 * alpha + 2 * (p - 1) / p * m * beta + (p - 1) / p * m * gamma
