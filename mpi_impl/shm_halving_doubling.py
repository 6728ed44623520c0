"""Halving-doubling all-reduce over MPI-3 shared memory (p a power of two): the halving and
doubling of halving_doubling.py, with every rank reading its partner's buffer where it lies.

Every rank's buffer of n elements lives in one window of the node (``shm_window.SharedBuffer``),
cut into p chunks as ring.py cuts it; a rank's window is a run of chunks, at first all p.

1. **Recursive halving** (log2 p steps).  At distance d = p/2, p/4, ..., 1 rank r pairs with
   r XOR d, keeps the half of its window on its side of d (the lower half if r AND d is 0),
   and adds the partner's copy of that half into its own, in place.  After the step at
   distance 1 its window is chunk r alone, summed over all ranks.  That last step hands
   each finished piece straight back into the partner's chunk r, which it has just read
   (``add_and_hand_back``): the first doubling step, done while the piece is in cache.
2. **Recursive doubling** (log2 p - 1 steps).  At distance d = 2, 4, ..., p/2 rank r copies
   from partner r XOR d the d chunks of the partner's window (the partner's side of d) into
   its own buffer; its window doubles.  On 2 ranks there is none.

Every step ends at a barrier (``SharedBuffer.sync``): no half is read before its writer
finished it, and none is overwritten while its partner still reads it.

Cost.  Per rank, halving step k (k = 1 .. log2 p) reads 2 m/2^k and writes m/2^k, the last
also writes m/p back into cached lines, and the doubling steps copy m/p 2, m/p 4, ..., m/2
(read and write each):

    memory traffic per rank  =  3 (p - 1) m / p + m / p + 2 (m - 2 m / p)  =  (5p - 6) m / p
    T_hd_shm  =  2 log2(p) barrier  +  (p - 1)/p m gamma  +  (p - 1)/p m beta_copy

the same bytes as shm_ring.py in 2 log2 p barriers instead of 2p - 2 (gamma: seconds per
byte added in place, beta_copy: per byte copied within the node).  On 2 ranks the two are
one exchange of halves.  One node only; CPU only; p a power of two.
"""
from __future__ import annotations

import numpy as np

from .device import chunk_bounds
from .errors import REDUCIBLE_DTYPES, check_arguments
from .shm_window import SharedBuffer, add_and_hand_back, problem_with


def ranks_problem(p: int):
    """None if p ranks can run it, else why not (one line): p must be a power of two."""
    return f"halving-doubling-shm needs a power of two ranks, got {p}; use ring-shm" if p & (p - 1) else None


def problem(x, shared: SharedBuffer):
    """None if x can be reduced here, else why not (one line)."""
    return ranks_problem(shared.comm.Get_size()) or problem_with(x, shared)


def allreduce(x, shared: SharedBuffer, check: bool = True):
    """Sum x over all ranks of shared.comm, in place; x must be ``shared.array``.
    check: verify the arguments on every rank first (one tiny Allreduce); a bad argument
    raises ValueError/TypeError on every rank."""
    comm = shared.comm
    if check:
        check_arguments(x, comm, dtypes=REDUCIBLE_DTYPES, problem=problem(x, shared), about="buffer")
    p, r = comm.Get_size(), comm.Get_rank()
    if p == 1:
        return x
    bounds = chunk_bounds(x.size, p)
    span = lambda a, first, last: a[bounds[first]:bounds[last]]     # chunks first .. last - 1

    shared.sync()                                    # every rank's input is in place
    lo, hi, d = 0, p, p // 2
    while d >= 1:                                    # 1. halving: keep my side of d, add the partner's copy
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if r & d == 0 else (mid, hi)
        partner = shared.of(r ^ d)
        if d > 1:
            np.add(span(x, lo, hi), span(partner, lo, hi), out=span(x, lo, hi))
        else:
            add_and_hand_back(span(x, lo, hi), span(partner, lo, hi))
        shared.sync()
        d //= 2
    lo, hi, d = r & ~1, (r & ~1) + 2, 2              # the pair holds chunks r AND ~1 and the next
    while d < p:                                     # 2. doubling: copy the partner's side of d
        first = lo ^ d
        np.copyto(span(x, first, first + d), span(shared.of(r ^ d), first, first + d))
        lo, hi = min(lo, first), max(hi, first + d)
        shared.sync()
        d *= 2
    return x


def bytes_copied(count: int, itemsize: int, p: int, rank: int = 0) -> int:
    """Bytes `rank` copies in one call: chunk r handed back to its partner, and the doubling's
    chunks (every chunk but r's partner's at distance 1) copied in."""
    if p == 1:
        return 0
    b = chunk_bounds(count, p)
    other = rank ^ 1
    return (count - (b[other + 1] - b[other])) * itemsize


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float) -> float:
    """T_hd_shm above for `count` elements, a barrier taken as alpha and a copy as beta."""
    m = count * itemsize
    return 2 * (p.bit_length() - 1) * alpha + (p - 1) / p * m * (beta + gamma)
