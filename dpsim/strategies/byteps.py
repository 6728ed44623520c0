"""BytePS push-pull (Jiang et al., "A Unified Architecture for Accelerating Distributed DNN
Training in Heterogeneous GPU/CPU Clusters", OSDI 2020; github.com/bytedance/byteps):
gradients are summed by CPU "summation servers", not by the GPUs of other nodes.
  1. reduce-scatter inside every node (NCCL): GPU l owns 1/g of its node's sum;
  2. push: GPU l sends its m/g to the servers (co-located with the workers on their hosts,
     BytePS's layout without extra machines). BytePS splits every shard over all N servers;
     dpsim sends each GPU's whole shard to one server, node (k + l + 1) mod N for GPU l of
     node k: every server still receives m and every node's NICs send (N-1)/N m when N
     divides g (about that otherwise), in N g transfers instead of N^2 g;
  3. every server adds what it received (m bytes) at host memory speed (the CPU's work);
  4. pull: every GPU takes the summed partitions back;
  5. all-gather inside every node.
Each node's NICs send (N-1)/N m and receive the same, twice (push, pull): the ring's bytes,
but the additions run on CPUs and the GPUs only reduce inside their node.
TensorFlow 1.x's distributed_replicated is the same design with gRPC as the transport and the
pull before the next forward (sync.ps_pull = "before-forward").
Cost across nodes: 2 alpha_e + 2 (N-1)/N m / (k B_e)  +  N m/N gamma_host per server.
Every node pushes and pulls alike (node k's GPU l to node k + l + 1's server): one
dpsim.symmetry.Alike step each, simulated one flow per kind.
"""
from ..symmetry import alike
from . import ring


def _push_pairs(cluster):
    """GPU l of node k pushes its m/g to the server on node (k + l + 1) mod N."""
    n = cluster.nodes
    return [(gpu, f"host{(k + l + 1) % n}") for k, node in enumerate(cluster.node_groups) for l, gpu in enumerate(node)]


def pull(machine, ranks, nbytes):
    """Steps 4 and 5: every GPU fetches the summed partitions, then the node all-gathers."""
    cluster = machine.cluster
    nodes, shard = cluster.node_groups, nbytes / cluster.gpus_per_node
    pairs = lambda: [(dst, src) for src, dst in _push_pairs(cluster)]
    yield machine.send(alike(machine, "byteps-pull", pairs, shard), "pull")
    if len(nodes[0]) > 1:
        yield from ring.all_gather(machine, nodes, nbytes)


def allreduce(machine, ranks, nbytes, with_pull=True):
    """with_pull False (sync.ps_pull = "before-forward"): steps 1-3 only; the engine pulls
    before the next forward, as TensorFlow 1.x's distributed_replicated reads its variables."""
    cluster = machine.cluster
    nodes, shard = cluster.node_groups, nbytes / cluster.gpus_per_node
    if len(nodes[0]) > 1:
        yield from ring.reduce_scatter(machine, nodes, nbytes)
    yield machine.send(alike(machine, "byteps-push", lambda: _push_pairs(cluster), shard), "push")
    yield machine.reduce(cluster.hosts, nbytes)
    if with_pull:
        yield from pull(machine, ranks, nbytes)
