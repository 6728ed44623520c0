"""Ring all-reduce: a reduce-scatter around the ring, then an all-gather around the ring.

The p ranks stand in a ring; each sends only to its right neighbour and receives only from
its left one.  The buffer of n elements is cut into p chunks.

1. **Reduce-scatter** (p - 1 steps).  In step s, rank r sends chunk (r - s) to the right and
   receives chunk (r - s - 1) from the left, adding it into its own copy.  After p - 1 steps
   rank r holds the complete sum of chunk (r + 1).
2. **All-gather** (p - 1 steps).  In step s, rank r passes on the finished chunk (r + 1 - s)
   and receives finished chunk (r - s), overwriting its own.

Cost (alpha = latency per message, beta = seconds per byte, gamma = seconds per byte
reduced, m = bytes in the buffer), per Patarasuk & Yuan 2009 and Thakur, Rabenseifner &
Gropp 2005:

    T_ring = 2 (p - 1) alpha  +  2 (p - 1)/p  m beta  +  (p - 1)/p  m gamma

Each rank sends 2 (p - 1)/p m bytes, which is optimal for all-reduce: the time no longer
grows with p once m is large, but the 2 (p - 1) latencies make it slow for small buffers.
Works for any n (chunks differ by at most one element; some are empty when n < p) and any p.

Each receive-and-add goes through ``wire.sendrecv_add``, which pipelines it in segments
(pipeline.py): the steps above are unchanged, only each step's transfer and addition overlap.
"""
from __future__ import annotations

from .device import chunk_bounds, load


def allreduce(buf, wire, x=None):
    """Sum over all ranks of wire.comm into `buf` (1-D, contiguous): the sum of `x` (same
    length, left unchanged) if given, else of buf's own values, in place.  Reading x
    directly saves copying it into buf first."""
    p, r = wire.size, wire.rank
    x = buf if x is None else x
    if p == 1:
        load(buf, x)
        return
    bounds = chunk_bounds(buf.size, p)

    def chunk(a, i):
        i %= p
        return a[bounds[i]:bounds[i + 1]]

    right, left = (r + 1) % p, (r - 1) % p

    # 1. reduce-scatter: pass partial sums to the right, add what comes from the left.
    #    Step 0 sends my own input; every chunk is received (and summed into buf) once.
    for s in range(p - 1):
        partial = x if s == 0 else buf
        wire.sendrecv_add(chunk(partial, r - s), right, chunk(buf, r - s - 1), left,
                          base=chunk(x, r - s - 1))

    # 2. all-gather: rank r now owns the full sum of chunk r + 1; pass finished chunks on
    for s in range(p - 1):
        wire.sendrecv(chunk(buf, r + 1 - s), right, chunk(buf, r - s), left)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends in one ring all-reduce of `count` elements (exact, not rounded)."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    size = lambda i: b[i % p + 1] - b[i % p]
    sent = sum(size(rank - s) for s in range(p - 1)) + sum(size(rank + 1 - s) for s in range(p - 1))
    return sent * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_ring above for `count` elements: the time with no overlap of transfer and addition."""
    m = count * itemsize
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * m * beta + (p - 1) / p * m * gamma
