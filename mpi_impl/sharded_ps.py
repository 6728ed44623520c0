"""Sharded parameter server: every rank is the server for one shard of the buffer.

The buffer of n elements is cut into p shards; rank j owns shard j.

1. **Reduce the own shard.**  One all-to-all: every rank sends shard j of its buffer to rank
   j and receives shard r from every rank into a (p x shard) table, which rank r sums row by
   row, in rank order (so every rank's sum has the same rounding).
2. **Gather the shards.**  One all-gather: every rank sends its finished shard to all others.

Every link now carries only 1/p of the traffic of a single server.  Per rank (Thakur,
Rabenseifner & Gropp 2005 notation, direct exchange: p - 1 messages per phase)

    T_sharded = 2 (p - 1) alpha  +  2 (p - 1)/p m beta  +  (p - 1)/p m gamma

the same bandwidth term as the ring, but each phase sends p - 1 messages at once, which a
real network (incast at each owner) handles less gracefully than the ring's neighbour pairs.
"""
from __future__ import annotations

from ._xp import chunk_bounds, scratch


def allreduce(buf, wire):
    """Sum `buf` (1-D, contiguous) over all ranks of wire.comm, in place."""
    p, r, xp = wire.size, wire.rank, wire.xp
    if p == 1:
        return
    bounds = chunk_bounds(buf.size, p)
    shard_sizes = [bounds[j + 1] - bounds[j] for j in range(p)]
    mine = buf[bounds[r]:bounds[r + 1]]

    # 1. send shard j to rank j; receive my shard from every rank, one row per sender
    table = scratch(xp, "sharded-ps", p * mine.size, buf.dtype)
    wire.alltoallv(buf, shard_sizes, table, [mine.size] * p)
    rows = table.reshape(p, mine.size)
    xp.copyto(mine, rows[0])
    for sender in range(1, p):
        xp.add(mine, rows[sender], out=mine)

    # 2. everyone gathers everyone's finished shard
    finished = scratch(xp, "sharded-ps:mine", mine.size, buf.dtype)
    xp.copyto(finished, mine)
    wire.allgatherv(finished, buf, shard_sizes)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends: every shard but its own, then its own shard to p - 1 ranks."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    own = b[rank + 1] - b[rank]
    return ((count - own) + (p - 1) * own) * itemsize
