"""Ring all-reduce: a reduce-scatter, then an all-gather (Patarasuk & Yuan, J. Parallel Distrib.
Comput. 69(2), 2009; the algorithm behind Baidu's allreduce, Horovod and NCCL's rings).

The n ranks form a ring and the gradient (m bytes) is cut into n chunks of m/n.
  reduce-scatter: n-1 steps. In each, every rank sends one chunk to its right neighbour and
                  adds the chunk arriving from its left. Afterwards rank i owns one fully
                  summed chunk.
  all-gather:     n-1 steps passing the summed chunks on round the ring.
Cost:  2(n-1) alpha  +  2 (n-1)/n m beta  +  (n-1)/n m gamma
Every rank sends 2(n-1)/n m bytes, almost 2m whatever n is: the bandwidth term does not grow
with the number of GPUs, which is why the ring scales. The latency term does.

With `sync.segment_mib` > 0 each reduce-scatter step is pipelined as mpi_impl/ring.py does
(Machine.send_reduce): the chunk's segments are added while the next ones travel.

Several independent rings (one per node, say) can run at once, in lock-step: `rings` is a
list of rank lists of equal length.

Every step of a phase sends the same sizes between the same pairs (only which chunk travels
changes), so the steps are identical rounds for Machine.repeat's fast path.
"""


def neighbour_moves(rings, chunk):
    """Every rank sends `chunk` bytes to the next rank of its ring."""
    return [(r[i], r[(i + 1) % len(r)], chunk) for r in rings for i in range(len(r))]


def reduce_scatter(machine, rings, nbytes):
    n = len(rings[0])
    chunk = nbytes / n
    moves, ranks = neighbour_moves(rings, chunk), [rank for r in rings for rank in r]

    def step():
        yield from machine.send_reduce(moves, ranks, chunk, "reduce-scatter")
    yield from machine.repeat(n - 1, step)


def all_gather(machine, rings, nbytes):
    n = len(rings[0])
    moves = neighbour_moves(rings, nbytes / n)

    def step():
        yield machine.send(moves, "all-gather")
    yield from machine.repeat(n - 1, step)


def allreduce(machine, ranks, nbytes):
    yield from reduce_scatter(machine, [ranks], nbytes)
    yield from all_gather(machine, [ranks], nbytes)
