"""BytePS push-pull (Jiang et al., "A Unified Architecture for Accelerating Distributed DNN
Training in Heterogeneous GPU/CPU Clusters", OSDI 2020; github.com/bytedance/byteps):
gradients are summed by CPU "summation servers", not by the GPUs of other nodes.
  1. reduce-scatter inside every node (NCCL, over the node's rings: NVLink's where there are
     any, cluster.node_rings): GPU l owns 1/g of its node's sum;
  2. push: GPU l sends its m/g to a server. BytePS splits every shard over all servers; dpsim
     sends each GPU's whole shard to one server, which spreads the same bytes evenly when the
     servers divide the GPUs (about evenly otherwise):
       co-located (cluster.server_nodes = 0, BytePS's co-locate mode): the server on the host
         of node (k + l + 1) mod N, for GPU l of node k;
       server machines (cluster.server_nodes = S > 0, BytePS's documented deployment:
         CPU-only machines apart from the workers, docs/best-practice.md): server (k g + l) mod S;
  3. every server adds what it received at host memory speed (the CPU's work);
  4. pull: every GPU takes the summed partitions back;
  5. all-gather inside every node.
Co-located, each node's NICs send (N-1)/N m and receive the same, twice (push, pull): the
ring's bytes, but the additions run on CPUs and the GPUs only reduce inside their node.
With S >= N server machines each worker's NICs send m once (push) and receive m once (pull),
the two in opposite directions of the full-duplex port: half the ring's 2 (N-1)/N m each way.
Partitions (sync.ps_partition_mib = P > 0; BytePS's BYTEPS_PARTITION_BYTES, docs/env.md): the
bucket is cut into k = ceil(m / P) equal parts; part i is pulled while part i + 1 is pushed, so
k + 1 rounds of one part each (fill, k - 1 full rounds, drain) instead of push, sum, pull of m.
The node's reduce-scatter and all-gather run on the whole bucket before and after the rounds
(BytePS reduces each part inside the node as it goes: the same bytes, k times fewer steps).
TensorFlow 1.x's distributed_replicated is the same design with gRPC as the transport and the
pull before the next forward (sync.ps_pull = "before-forward").
Cost across nodes, with servers, whole buckets (B_e one NIC's rate, k NICs per node):
    2 alpha_e + 2 m / (k B_e) + (N g / S) (m / g) gamma_host;
with partitions, about (1 + 1/k) (alpha_e + m / (k B_e)) when the NIC dominates.
"""
import math

from ..symmetry import alike
from . import ring


def _push_moves(cluster, nbytes):
    """(GPU, server, bytes) for every GPU's shard, and the bytes the busiest server adds."""
    nodes = cluster.node_groups
    n, g = len(nodes), len(nodes[0])
    shard = nbytes / g
    if cluster.servers:
        s = len(cluster.servers)
        moves = [(gpu, cluster.servers[(k * g + l) % s], shard) for k, node in enumerate(nodes)
                 for l, gpu in enumerate(node)]
        return nodes, moves, math.ceil(n * g / s) * shard
    return nodes, [(gpu, f"host{(k + l + 1) % n}", shard) for k, node in enumerate(nodes)
                   for l, gpu in enumerate(node)], nbytes


def _in_node(machine, collective, nbytes):
    """A ring reduce-scatter or all-gather inside every node at once (none with one GPU a node)."""
    if machine.cluster.gpus_per_node > 1:
        rings, share = ring.node_rings(machine), 1 / len(machine.cluster.node_rings)
        yield from collective(machine, rings, nbytes * share)


def _servers(cluster):
    return cluster.servers or cluster.hosts


def _step(machine, nbytes, pulling):
    """The push (or the pull) of whole buckets, and the bytes the busiest server adds.
    Co-located, every node pushes and pulls alike (node k's GPU l and node k + l + 1's host):
    one dpsim.symmetry.Alike step, simulated one flow per kind on a big cluster."""
    cluster = machine.cluster
    if cluster.servers:
        _, push, load = _push_moves(cluster, nbytes)
        return ([(d, s, b) for s, d, b in push] if pulling else push), load
    pairs = lambda: [(d, s) if pulling else (s, d) for s, d, _ in _push_moves(cluster, nbytes)[1]]
    step = alike(machine, "byteps-pull" if pulling else "byteps-push", pairs, nbytes / cluster.gpus_per_node)
    return step, nbytes             # co-located: each host adds one shard from each of g GPUs


def pull(machine, ranks, nbytes):
    """Steps 4 and 5: every GPU fetches the summed partitions, then the node all-gathers."""
    moves, _ = _step(machine, nbytes, pulling=True)
    yield machine.send(moves, "pull")
    yield from _in_node(machine, ring.all_gather, nbytes)


def _round(machine, part, pushing, pulling):
    """One round of the partitioned pipeline: a part pushed while the previous part is pulled
    (one step, opposite directions of every port), then the servers add the pushed part."""
    _, push, load = _push_moves(machine.cluster, part)
    moves = (push if pushing else []) + ([(d, s, b) for s, d, b in push] if pulling else [])
    yield machine.send(moves, "push-pull")
    if pushing:
        yield machine.reduce(_servers(machine.cluster), load)


def allreduce(machine, ranks, nbytes, with_pull=True, partition=0.0):
    """with_pull False (sync.ps_pull = "before-forward"): steps 1-3 only; the engine pulls
    before the next forward, as TensorFlow 1.x's distributed_replicated reads its variables.
    partition > 0 (bytes): the bucket in parts, pushed and pulled in a pipeline."""
    if partition and with_pull:
        parts = math.ceil(nbytes / partition)
        part = nbytes / parts
        yield from _in_node(machine, ring.reduce_scatter, nbytes)
        yield from _round(machine, part, True, False)
        yield from machine.repeat(parts - 1, lambda: _round(machine, part, True, True))
        yield from _round(machine, part, False, True)
        yield from _in_node(machine, ring.all_gather, nbytes)
        return
    push, load = _step(machine, nbytes, pulling=False)
    yield from _in_node(machine, ring.reduce_scatter, nbytes)
    yield machine.send(push, "push")
    yield machine.reduce(_servers(machine.cluster), load)
    if with_pull:
        yield from pull(machine, ranks, nbytes)
