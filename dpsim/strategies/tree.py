"""NCCL's double binary tree between nodes (Sanders, Speck & Traeff, "Two-tree algorithms for
full bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009; NCCL 2.4's
tree all-reduce, NVIDIA developer blog "Massively Scale Your Deep Learning Training with NCCL
2.4").

Inside each node the GPUs reduce-scatter along the node's rings (cluster.node_rings: its
NVLink rings where it has an NVLink mesh, as NCCL's channels follow NVLink paths; else one ring
in GPU order), the bytes split over them, so GPU l of every node holds 1/g of its node's sum. Across the N nodes the
GPUs with the same local number all-reduce their m/g bytes on two binary trees at once, each
carrying half: tree A is a heap over the nodes (parent of k is (k-1)//2), tree B its mirror
(node k plays N-1-k), so a node that is a leaf in one is inside the other. Reduce: every
node sends its half up each tree and adds what its children send; broadcast: the sums come
back down. NCCL pipelines the levels, so dpsim moves every level's bytes at once, one step
up and one step down (latency counted once per direction, an underestimate of log2 N hops).
Last, the ring all-gather inside every node.
Cost across nodes (k NICs shared by g trees):  2 alpha_e + 2 (m/g) / (k B_e / g)  at most,
  against 2 (N-1) alpha_e + 2 (N-1)/N m / (k B_e) for the ring: the same bandwidth, log
  latency.
"""
from ..network import Pairs
from . import ring


def parents(n):
    """(child, parent) node pairs of tree A and of its mirror B."""
    a = [(k, (k - 1) // 2) for k in range(1, n)]
    return a, [(n - 1 - c, n - 1 - p) for c, p in a]


def edges(machine, groups):
    """(child -> parent pairs, parent -> child pairs, the ranks that add), over both trees of
    every group: found once per groups object a run uses (Machine.memo), so every bucket's
    steps are Pairs of the same tuples."""
    memo = machine.memo.get(("double-tree", id(groups)))
    if memo is None or memo[0] is not groups:
        trees = parents(len(groups[0]))
        up = tuple((g[c], g[p]) for g in groups for tree in trees for c, p in tree)
        down = tuple((dst, src) for src, dst in up)
        memo = machine.memo["double-tree", id(groups)] = (groups, up, down, list(dict.fromkeys(d for _, d in up)))
    return memo[1:]


def across_nodes(machine, groups, nbytes):
    """Double-binary-tree all-reduce of nbytes within every group (one rank per node)."""
    up, down, adders = edges(machine, groups)
    yield from machine.send_reduce(Pairs(up, nbytes / 2), adders, nbytes / 2, "tree-reduce")
    yield machine.send(Pairs(down, nbytes / 2), "tree-broadcast")


def allreduce(machine, ranks, nbytes):
    cluster = machine.cluster
    g = cluster.gpus_per_node
    rings, share = ring.node_rings(machine), nbytes / len(cluster.node_rings)
    if g > 1:
        yield from ring.reduce_scatter(machine, rings, share)
    if cluster.nodes > 1:
        yield from across_nodes(machine, cluster.local_groups, nbytes / g)
    if g > 1:
        yield from ring.all_gather(machine, rings, share)
