"""A step whose nodes all do the same thing, simulated one flow per kind instead of one per transfer.

dpsim's nodes are identical and hang off one switch, so renumbering the nodes changes nothing
about the machine. When it changes nothing about a step's transfers either, the step's
transfers fall into kinds that the network cannot tell apart, and so do the channels:
"gpu 3's uplink" is one kind, with one channel per node. Max-min fairness (dpsim.network) has
one answer, so a renumbering that maps the step onto itself maps that answer onto itself: every
transfer of a kind has the same rate at every moment, and every channel of a kind the same
load. One flow per kind, weighted by how many transfers it stands for, over one channel per
kind with (channels of the kind) times the bandwidth, gives the same fair shares, the same
finishing times and the same bytes per channel (up to rounding): tests/test_symmetry.py and
tests/test_fastpath.py hold it to the simulation of every transfer.

Three shapes of step, each an iterable of (src, dst, nbytes) for the detailed path:
  AllPairs   every GPU sends to every other (sharded-ps, 1-bit's exchange). Any renumbering
             of the nodes keeps it: kinds i -> j inside a node (N transfers each) and i -> j
             between two nodes (N(N-1) each): g(g-1) + g^2 flows for g GPUs a node.
  Alike      every node does what node 0 does, by a renumbering that takes node 0 to any
             node: shifting k -> k + 1 (rings, whose last GPU of node k sends to node k + 1)
             or k -> k xor c (recursive doubling's partners). Node 0's transfers stand for
             N each.
  Star       every GPU sends to one server, or the server to every GPU (a parameter server
             on GPU 0 or on host 0). Node 0 is apart; any renumbering of the others keeps
             it: node 0's transfers stand for themselves, node 1's for N - 1 each.
Nodes fall into classes ("all", or "node0" and "rest" for a star); a channel's kind is its
class and its two ends with the node number left out. Cost: the flows of node 0 (and node 1),
whatever the number of nodes.
"""
from collections import Counter
from dataclasses import dataclass

import simpy

from .ledger import Tally
from .network import Channel, Network, Pairs


@dataclass(frozen=True)
class AllPairs:
    """Every rank sends nbytes to every other rank (an all-to-all): a list of moves that
    Machine.send can also take whole, as one flow per kind (all_to_all below)."""
    ranks: tuple
    nbytes: float

    def __iter__(self):
        return ((a, b, self.nbytes) for a in self.ranks for b in self.ranks if a != b)

    def representatives(self, cluster):
        """(src, dst, nbytes, transfers it stands for) of the flows one per kind."""
        nodes, firsts = cluster.nodes, cluster.gpus_of_node(0)
        others = cluster.gpus_of_node(1) if nodes > 1 else []
        return [(s, d, self.nbytes, nodes) for s in firsts for d in firsts if d != s] + \
               [(s, d, self.nbytes, nodes * (nodes - 1)) for s in firsts for d in others]


class Alike:
    """Every node moves what node 0 moves: `first`, the (src, dst, nbytes) leaving node 0,
    and their images under a renumbering of the nodes that maps the step onto itself and
    takes node 0 to any node (the builder checks it: ring.py, halving_doubling.py).
    `key` says which step it is (equal keys: the same transfers); `every()` lists them all, in
    the strategy's order, for the detailed path."""

    def __init__(self, key, first, every):
        self.key, self.first, self.every = key, tuple(first), every

    def __iter__(self):
        return iter(self.every())

    def __eq__(self, other):
        return isinstance(other, Alike) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def representatives(self, cluster):
        return [(s, d, n, cluster.nodes) for s, d, n in self.first]


@dataclass(frozen=True)
class Star:
    """`server` and every other of `ranks`, nbytes each: to the server (inward) or from it."""
    server: str
    ranks: tuple
    nbytes: float
    inward: bool

    def __iter__(self):
        others = (r for r in self.ranks if r != self.server)
        if self.inward:
            return ((r, self.server, self.nbytes) for r in others)
        return ((self.server, r, self.nbytes) for r in others)

    def representatives(self, cluster):
        """Node 0's transfers for themselves, node 1's for those of every node but 0."""
        reps = []
        for k, weight in ((0, 1), (1, cluster.nodes - 1)):
            if k < cluster.nodes:
                for r in cluster.gpus_of_node(k):
                    if r != self.server:
                        pair = (r, self.server) if self.inward else (self.server, r)
                        reps.append((*pair, self.nbytes, weight))
        return reps


def shifted(cluster, pairs):
    """The (src, dst) pairs leaving node 0, in their order, if renumbering every node k as
    k + 1 (the last as 0) maps the pairs onto themselves (counted with repeats), else None.
    The ends are GPUs or hosts."""
    if not all(e.startswith(("gpu", "host")) for pair in pairs for e in pair):
        return None
    g, n = cluster.gpus_per_node, len(cluster.gpus)
    place = lambda e: int(e[3:]) if e[0] == "g" else n + int(e[4:])      # GPUs, then hosts
    step = lambda i: (i + g) % n if i < n else n + (i - n + 1) % cluster.nodes
    where = [(place(s), place(d)) for s, d in pairs]
    if Counter((step(s), step(d)) for s, d in where) != Counter(where):
        return None
    return tuple(pair for pair, (s, _) in zip(pairs, where) if s < g or s == n)


def alike(machine, token, pairs, nbytes):
    """The step of the (src, dst) `pairs()`, nbytes each: an Alike step if shifting the nodes
    maps it onto itself (checked once per `token` and run, in Machine.memo), else the list."""
    if token not in machine.memo:
        machine.memo[token] = shifted(machine.cluster, pairs())
    first = machine.memo[token]
    every = lambda: [(s, d, nbytes) for s, d in pairs()]
    return every() if first is None else Alike(("shift", first, nbytes), [(s, d, nbytes) for s, d in first], every)


def paired(cluster, ranks, p, distance, nbytes):
    """Every rank i < p sends nbytes to rank i xor distance (recursive doubling, halving-
    doubling). When the ranks are every GPU, p of them, and the GPUs per node a power of two,
    renumbering node k as k xor c maps the step onto itself for any c: an Alike step."""
    every = lambda: [(ranks[i], ranks[i ^ distance], nbytes) for i in range(p)]
    g = cluster.gpus_per_node
    if g & (g - 1) or p != len(ranks) or not (ranks is cluster.gpus or ranks == cluster.gpus):
        return every()
    return Alike(("xor", distance, nbytes), [(ranks[i], ranks[i ^ distance], nbytes) for i in range(g)], every)


def takes_whole(step, cluster) -> bool:
    """Whether `step` is a shape above that this cluster's symmetry covers. On one node an
    Alike or Star step is its own representatives: it is simulated as it is."""
    if isinstance(step, Alike):
        return cluster.nodes > 1
    if isinstance(step, (AllPairs, Star)) and list(step.ranks) == cluster.gpus:
        return not isinstance(step, Star) or (step.server in ("gpu0", "host0") and cluster.nodes > 1)
    return False


def classes(step) -> str:
    """How the step sorts the nodes: "star" (node 0 apart) or "all" (one class)."""
    return "star" if isinstance(step, Star) else "all"


def largest(moves) -> float:
    """The largest message of a step."""
    if isinstance(moves, (AllPairs, Star, Pairs)):
        return moves.nbytes
    if isinstance(moves, Alike):
        return max((n for _, _, n in moves.first), default=0)
    return max((n for _, _, n in moves), default=0)


def kind(cluster, channel_key):
    """A channel's kind: its two ends with the node number left out."""
    return tuple(cluster.local(end) for end in channel_key)


def label(shape, node):
    """The class of a node: "all", or "node0" / "rest" for a star."""
    if shape == "all":
        return "all"
    return "node0" if node == 0 else "rest"


def class_size(shape, cluster, name):
    return {"all": cluster.nodes, "node0": 1, "rest": cluster.nodes - 1}[name]


def channel_kind(cluster, shape, channel):
    """(class, end, end) of a channel, from its name "a>b"."""
    a, b = channel.name.split(">")
    node = cluster.home(a if a != "net" else b)
    return (label(shape, node), cluster.local(a), cluster.local(b))


def simulate(machine, step, staged):
    """(seconds, Tally) of `step` on an otherwise idle network, as Machine.send would take it:
    one flow per kind over one channel per kind, on a network of its own."""
    cluster, shape = machine.cluster, classes(step)
    env = simpy.Environment()
    net = Network(env)
    overhead = machine.message_overhead(staged)
    by_kind, crossings, sent = {}, Counter(), Counter()
    for src, dst, nbytes, weight in step.representatives(cluster):
        route = []
        for ch in machine.route(src, dst, staged):
            k = channel_kind(cluster, shape, ch)
            if k not in by_kind:
                by_kind[k] = Channel(">".join(k[1:]), ch.bandwidth * class_size(shape, cluster, k[0]), ch.latency)
            route.append(by_kind[k])
            crossings[k] += weight * nbytes
        sent[label(shape, cluster.home(src)), cluster.local(src)] += weight * nbytes
        net.transfer(route, src, dst, nbytes, overhead=overhead, weight=weight)
    env.run()
    per = lambda key, total: total / class_size(shape, cluster, key[0])
    return env.now, Tally(shape, {k: per(k, v) for k, v in sent.items()}, {k: per(k, v) for k, v in crossings.items()})


def all_to_all(machine, nbytes, staged):
    """(seconds, Tally) of every GPU sending nbytes to every other GPU at once."""
    return simulate(machine, AllPairs(tuple(machine.cluster.gpus), nbytes), staged)
