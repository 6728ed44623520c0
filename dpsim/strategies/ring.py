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

Several rings run at once, in lock-step: `rings` is a list of rank lists of equal length,
each reducing its own `nbytes`. They are either disjoint (one per node, as hierarchical
uses them) or NCCL's channels (Cluster.rings): orders of the same ranks over different links,
each carrying its share of the gradient, so every rank adds one share per ring.

Every step of a phase sends the same sizes between the same pairs (only which chunk travels
changes), so the steps are identical rounds for Machine.repeat's fast path. Where every node
does the same (NCCL's channels, the rings inside every node or across them) a step is one
dpsim.symmetry.Alike, simulated one flow per kind.
"""
from ..symmetry import Alike, shifted


def shape(machine, rings):
    """(ranks, each once; ring positions; pairs of a step leaving node 0 if every node does
    the same, else None), found once per rings object a run uses (Machine.memo)."""
    memo = machine.memo.get(id(rings))
    if memo is None or memo[0] is not rings:
        pairs = [(r[i], r[(i + 1) % len(r)]) for r in rings for i in range(len(r))]
        ranks = list(dict.fromkeys(rank for r in rings for rank in r))
        memo = machine.memo[id(rings)] = (rings, ranks, len(pairs), shifted(machine.cluster, pairs))
    return memo[1:]


def node_rings(machine):
    """Every node's NCCL rings (cluster.node_rings: the same local orders in each node) as
    rank names: one list per run (Machine.memo), so that every bucket's steps are the same
    list and `shape` finds their symmetry once (double-tree and byteps run them)."""
    rings = machine.memo.get("node rings")
    if rings is None:
        cluster = machine.cluster
        g = cluster.gpus_per_node
        rings = machine.memo["node rings"] = [[f"gpu{k * g + l}" for l in order]
                                              for k in range(cluster.nodes) for order in cluster.node_rings]
    return rings


def neighbour_moves(machine, rings, chunk):
    """Every rank sends `chunk` bytes to the next rank of its ring."""
    every = lambda: [(r[i], r[(i + 1) % len(r)], chunk) for r in rings for i in range(len(r))]
    first = shape(machine, rings)[2]
    return every() if first is None else Alike(("shift", first, chunk), [(s, d, chunk) for s, d in first], every)


def reduce_scatter(machine, rings, nbytes, together=False):
    n = len(rings[0])
    chunk = nbytes / n
    ranks, positions, _ = shape(machine, rings)
    moves = neighbour_moves(machine, rings, chunk)
    added = chunk * positions / len(ranks)        # one chunk per ring a rank is in

    def step():
        yield from machine.send_reduce(moves, ranks, added, "reduce-scatter")
    if together:                                  # beside other collectives (Machine.together)
        yield from machine.together(n - 1, moves, step, ranks, added)
    else:
        yield from machine.repeat(n - 1, step)


def all_gather(machine, rings, nbytes, together=False):
    n = len(rings[0])
    moves = neighbour_moves(machine, rings, nbytes / n)

    def step():
        yield machine.send(moves, "all-gather")
    if together:
        yield from machine.together(n - 1, moves, step)
    else:
        yield from machine.repeat(n - 1, step)


def allreduce(machine, ranks, nbytes):
    rings = machine.cluster.rings(ranks)
    yield from reduce_scatter(machine, rings, nbytes / len(rings))
    yield from all_gather(machine, rings, nbytes / len(rings))
