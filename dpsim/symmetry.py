"""An all-to-all among every GPU, simulated one flow per kind instead of one per pair.

In an all-to-all (sharded-ps, 1-bit's exchange) each of the n GPUs sends m bytes to each of
the others: n(n-1) transfers, a million at 1,024 GPUs, too many to simulate one by one. But
dpsim's nodes are identical and hang off one switch, so renumbering the nodes changes
nothing, and a transfer from GPU i of node A to GPU j of node B behaves exactly like the one
from GPU i of node C to GPU j of node D. So the transfers fall into kinds:
  i -> j inside a node:       one kind per (i, j), N transfers each (N nodes)
  i -> j between two nodes:   one kind per (i, j), N(N-1) transfers each
and the channels into kinds too: "gpu 3's uplink" is one kind with N channels, one per node.
Max-min fairness (dpsim.network) treats two transfers that the network cannot tell apart
alike, so every transfer of a kind has the same rate at every moment, and every channel of
a kind the same load. One flow per kind, weighted by how many it stands for, over one channel
per kind, with N times its bandwidth, gives the same fair shares, the same finishing times
and the same bytes per channel as the n(n-1) transfers (up to rounding): tests/test_symmetry.py
holds it to the flow-by-flow simulation.

Cost: g(g-1) + g^2 flows for g GPUs per node, whatever the number of nodes.
"""
from collections import Counter
from dataclasses import dataclass

import simpy

from .network import Channel, Network


@dataclass(frozen=True)
class AllPairs:
    """Every rank sends nbytes to every other rank (an all-to-all): a list of moves that
    Machine.send can also take whole, as one flow per kind (all_to_all below)."""
    ranks: tuple
    nbytes: float

    def __iter__(self):
        return ((a, b, self.nbytes) for a in self.ranks for b in self.ranks if a != b)


def kind(cluster, channel_key):
    """A channel's kind: its two ends with the node number left out."""
    return tuple(cluster.local(end) for end in channel_key)


def all_to_all(machine, nbytes, staged):
    """(seconds, {channel: bytes it carries}) for every GPU sending nbytes to every other GPU
    at once on an otherwise idle network, as Machine.send would take them."""
    cluster = machine.cluster
    nodes = cluster.nodes
    kinds = {ch: kind(cluster, key) for key, ch in cluster.channels.items()}
    copies = Counter(kinds.values())                   # channel kind -> how many channels
    by_kind = {}                                       # kind -> one channel standing for them all
    for ch, k in kinds.items():
        if k not in by_kind:
            by_kind[k] = Channel(f"{k[0]}>{k[1]}", ch.bandwidth * copies[k], ch.latency)

    env = simpy.Environment()
    net = Network(env)
    overhead = machine.message_overhead(staged)
    crossings = Counter()                              # channel kind -> transfers crossing one of them
    firsts = cluster.gpus_of_node(0)
    others = cluster.gpus_of_node(1) if nodes > 1 else []
    for src in firsts:
        for dst, weight in [(d, nodes) for d in firsts if d != src] + [(d, nodes * (nodes - 1)) for d in others]:
            route = [kinds[ch] for ch in machine.route(src, dst, staged)]
            for k in route:
                crossings[k] += weight
            net.transfer([by_kind[k] for k in route], src, dst, nbytes, overhead=overhead, weight=weight)
    env.run()
    carried = {ch: nbytes * crossings[k] / copies[k] for ch, k in kinds.items() if k in crossings}
    return env.now, carried
