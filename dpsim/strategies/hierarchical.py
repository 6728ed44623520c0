"""Hierarchical all-reduce: inside each node, then across nodes, then inside again (the
scheme of Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE and of Jia et al., "Highly Scalable Deep
Learning Training System with Mixed-Precision", 2018).

With N nodes of g GPUs:
  1. ring reduce-scatter inside every node: GPU l of each node owns 1/g of the node's sum.
  2. ring all-reduce of that 1/g across nodes, among the GPUs with the same local number l;
     the g rings run at once, ring l on GPU l's NIC (Cluster.nic_of), so they share the
     node's NICs: one NIC each on a DGX A100, all on one NIC when the node has one.
  3. ring all-gather inside every node.
Cost (intra i, inter e; the g cross-node rings share the node's k NICs, each gets B_e k / g):
  2(g-1) (alpha_i + m/(g B_i)) + (g-1)/g m gamma
+ 2(N-1) (alpha_e + m/(N k B_e)) + (N-1)/(N g) m gamma
Only 2(N-1) steps pay the slow network's latency, against 2(Ng-1) for one flat ring.
"""
from . import ring


def allreduce(machine, ranks, nbytes):
    cluster = machine.cluster
    nodes, across = cluster.node_groups, cluster.local_groups
    g = len(nodes[0])
    yield from ring.reduce_scatter(machine, nodes, nbytes)
    yield from ring.reduce_scatter(machine, across, nbytes / g)
    yield from ring.all_gather(machine, across, nbytes / g)
    yield from ring.all_gather(machine, nodes, nbytes)
