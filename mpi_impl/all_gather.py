"""Ring all-gather: each rank contributes one chunk, and every rank ends with all of them.

The p ranks stand in a ring, as in ring.py.  The whole buffer of n elements is cut into p
chunks (device.chunk_bounds, as reduce_scatter.py cuts it); rank r brings chunk r.

    step s = 0 .. p-2:  send chunk (r - s) to the right, receive chunk (r - s - 1) from the
                        left, into its place in the whole buffer.

Step 0 sends my own chunk; every later step passes on the chunk that arrived in the step
before.  After p - 1 steps every chunk has gone all the way round.  This is the second half
of the ring all-reduce (ring.py), with nothing to add.

Cost (alpha = latency per message, beta = seconds per byte, m = bytes of the whole
buffer), Thakur, Rabenseifner & Gropp 2005:

    T_all_gather = (p - 1) alpha  +  (p - 1)/p  m beta

Each rank sends (p - 1)/p m bytes.  ZeRO (zero.py) uses it to rebuild the whole parameters
from every rank's updated shard; top-k (topk.py) to collect every rank's values and indices.
"""
from __future__ import annotations

from .device import chunk_bounds, load


def all_gather(mine, wire, out):
    """Every rank's `mine` (rank r's is chunk r of `out`, device.chunk_bounds(out.size, p))
    placed into `out` (1-D, the whole length, on every rank), which is returned.  `mine` may
    already be out's chunk r."""
    p, r = wire.size, wire.rank
    bounds = chunk_bounds(out.size, p)

    def chunk(i):
        i %= p
        return out[bounds[i]:bounds[i + 1]]

    load(chunk(r), mine)
    right, left = (r + 1) % p, (r - 1) % p
    for s in range(p - 1):
        wire.sendrecv(chunk(r - s), right, chunk(r - s - 1), left)
    return out


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends in one ring all-gather of `count` elements in all (exact)."""
    b = chunk_bounds(count, p)
    return sum(b[(rank - s) % p + 1] - b[(rank - s) % p] for s in range(p - 1)) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float = 0.0) -> float:
    """T_all_gather above for `count` elements in all (nothing is added: gamma unused)."""
    return (p - 1) * alpha + (p - 1) / p * count * itemsize * beta
