"""Parameter server at rank 0: every worker sends its whole buffer to rank 0, which sums
them and sends the sum back to every worker.

1. **Gather and sum.**  Rank 0 receives the buffer of rank 1, 2, ..., p - 1 in turn and adds
   each into its own.
2. **Broadcast.**  Rank 0 sends the finished sum to each worker, one after another.

The server's link carries everything: it receives (p - 1) m bytes and sends (p - 1) m
bytes, so with alpha-beta-gamma costs (Thakur, Rabenseifner & Gropp 2005 notation)

    T_ps = 2 (p - 1) alpha  +  2 (p - 1) m beta  +  (p - 1) m gamma

which grows linearly with p: this is why "aggregate on one GPU" stops scaling, and why the
sharded parameter server and the ring exist.  (A tree broadcast would cut the second half
to log2(p) (alpha + m beta); the plain server is kept here because it is what the
simulator's ``ps`` strategy models.)
"""
from __future__ import annotations

from .device import load, scratch

SERVER = 0


def allreduce(buf, wire, x=None):
    """Sum `buf` over all ranks of wire.comm, in place, through rank 0; or, if `x` is given,
    the sum of x (copied into buf first)."""
    p, r, xp = wire.size, wire.rank, wire.xp
    load(buf, x)                                 # this algorithm works in buf
    if p == 1:
        return
    if r == SERVER:
        incoming = scratch(xp, "ps", buf.size, buf.dtype)
        for worker in range(1, p):                 # 1. gather and sum, in rank order
            wire.recv(incoming, worker)
            xp.add(buf, incoming, out=buf)
        for worker in range(1, p):                 # 2. send the sum back to everyone
            wire.send(buf, worker)
    else:
        wire.send(buf, SERVER)
        wire.recv(buf, SERVER)


def bytes_sent(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` sends: (p - 1) m for the server (rank 0), m for a worker."""
    if p == 1:
        return 0
    return (p - 1) * count * itemsize if rank == SERVER else count * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """The server's time: p - 1 receives and adds, then p - 1 sends, one after another."""
    m = count * itemsize
    return 2 * (p - 1) * (alpha + m * beta) + (p - 1) * m * gamma
