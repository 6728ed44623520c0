"""Ring reduce-scatter: each rank ends with the sum over ranks of one chunk of the buffer.

The p ranks stand in a ring; each sends only to its right neighbour and receives only from
its left one.  The buffer of n elements is cut into p chunks (device.chunk_bounds: the
first n % p chunks one element longer, as numpy.array_split and MPI's Reduce_scatter with
those counts); rank r ends with the sum of chunk r.

    step s = 0 .. p-2:  send the partial sum of chunk (r - s - 1) to the right,
                        receive the partial sum of chunk (r - s - 2) from the left
                        and add my own values of that chunk to it.

Step 0 sends my own values; every later step passes on what arrived in the step before,
now one addend longer.  After p - 1 steps the partial sum that arrives is chunk r, complete.
This is the first half of the ring all-reduce (ring.py), started one chunk earlier so that
rank r owns chunk r rather than chunk r + 1.

Cost (alpha = latency per message, beta = seconds per byte, gamma = seconds per byte
reduced, m = bytes of the whole buffer), Thakur, Rabenseifner & Gropp 2005:

    T_reduce_scatter = (p - 1) alpha  +  (p - 1)/p  m beta  +  (p - 1)/p  m gamma

Each rank sends (p - 1)/p m bytes: half of the ring all-reduce.  ZeRO (zero.py) uses it to
leave each rank with only its shard of the summed gradient.  Working memory: two chunks.
"""
from __future__ import annotations

from .device import chunk_bounds, load, scratch


def reduce_scatter(x, wire, out):
    """Sum over all ranks of wire.comm of chunk `wire.rank` of `x` (1-D, every rank the same
    length), written into `out` (that chunk's length) and returned.  x is left unchanged;
    out may be x's own chunk r (x[lo:hi]): it is read only in the last step."""
    p, r = wire.size, wire.rank
    bounds = chunk_bounds(x.size, p)

    def chunk(a, i):
        i %= p
        return a[bounds[i]:bounds[i + 1]]

    if p == 1:
        return load(out, x)
    longest = bounds[1] - bounds[0]
    xp = wire.xp
    partial = [scratch(xp, f"reduce-scatter{k}", longest, x.dtype) for k in range(2)]
    right, left = (r + 1) % p, (r - 1) % p
    sending = chunk(x, r - 1)                              # step 0 sends my own values
    for s in range(p - 1):
        c = (r - s - 2) % p                                # the chunk that arrives
        size = bounds[c + 1] - bounds[c]
        landing = out if s == p - 2 else partial[s % 2][:size]
        wire.sendrecv_add(sending, right, landing, left, base=chunk(x, c))
        sending = landing                                  # passed on in the next step
    return out


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends in one ring reduce-scatter of `count` elements (exact)."""
    b = chunk_bounds(count, p)
    return sum(b[(rank - s - 1) % p + 1] - b[(rank - s - 1) % p] for s in range(p - 1)) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_reduce_scatter above for `count` elements, transfer and addition not overlapped."""
    m = count * itemsize
    return (p - 1) * alpha + (p - 1) / p * m * (beta + gamma)
