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

Several independent rings (one per node, say) can run at once, in lock-step: `rings` is a
list of rank lists of equal length.
"""


def reduce_scatter(comm, rings, nbytes):
    n = len(rings[0])
    chunk = nbytes / n
    for _ in range(n - 1):
        yield comm.send([(r[i], r[(i + 1) % n], chunk) for r in rings for i in range(n)], "reduce-scatter")
        yield comm.reduce([rank for r in rings for rank in r], chunk)


def all_gather(comm, rings, nbytes):
    n = len(rings[0])
    chunk = nbytes / n
    for _ in range(n - 1):
        yield comm.send([(r[i], r[(i + 1) % n], chunk) for r in rings for i in range(n)], "all-gather")


def allreduce(comm, ranks, nbytes):
    yield from reduce_scatter(comm, [ranks], nbytes)
    yield from all_gather(comm, [ranks], nbytes)
