"""The bytes that replayed symmetric steps moved, booked when someone reads them.

A step that dpsim.symmetry simulates one flow per kind moves the same bytes from every GPU of
a class and over every channel of a kind. Booking them on each of the n GPUs and on each of
the cluster's channels every time the step is replayed would cost O(n) a replay, more than
the replay itself. So a replay adds its Tally (bytes per endpoint of each kind, per channel
of each kind) to what is owed, O(GPUs per node), and the owed bytes reach Network.bytes_sent
and Channel.bytes_carried when they are read: Ledger.sent(endpoint) for one endpoint,
Ledger.settle() for all (Machine.sent and Machine.settle).

Classes of nodes (dpsim.symmetry): "all" (every node alike), or "node0" and "rest" (a star:
node 0 apart). A key (class, local name, ...) stands for that part of every node of the class.

A remembered step that is not symmetric (dpsim.replay: a double binary tree's 262,128 transfers
at 131,072 GPUs) is owed the same way: a replay adds one to its count, O(1), and its
transfers' bytes are added up per source once (Replayed) and booked, times its count, when read.
"""
from collections import defaultdict

from .network import Sending


class Tally:
    """What one symmetric step moves. shape: "all" or "star" (how it sorts the nodes);
    sent: (class, local endpoint) -> bytes each such endpoint sent;
    carried: (class, local end, local end) -> bytes each such channel carried."""

    def __init__(self, shape, sent, carried):
        self.shape, self.sent, self.carried = shape, sent, carried


class Replayed:
    """What a remembered step started, as the network's observer logged it: the
    network.Sending of its transfers (`sendings`), and the Tally or Replayed of a step replayed
    while it was recorded (`nested`)."""

    def __init__(self, log):
        self.sendings = [entry for entry in log if isinstance(entry, Sending)]
        self.nested = [entry for entry in log if not isinstance(entry, Sending)]
        self._by_source = None

    def transfers(self):
        """(src, route, nbytes) of every transfer of one replay."""
        return (transfer for sending in self.sendings for transfer in sending.transfers())

    @property
    def by_source(self) -> dict:
        """Bytes each source sent in one replay, added up once."""
        if self._by_source is None:
            totals = {}
            for src, _, nbytes in self.transfers():
                totals[src] = totals.get(src, 0.0) + nbytes
            self._by_source = totals
        return self._by_source


def book(net, transfers, times, carried_only=False):
    """Book `times` more of the (src, route, nbytes) transfers: on net.bytes_sent (unless
    carried_only) and on every channel of their routes."""
    sent = net.bytes_sent
    for src, route, nbytes in transfers:
        if not carried_only:
            sent[src] = sent.get(src, 0.0) + times * nbytes
        if nbytes > 0:
            for ch in route:
                ch.bytes_carried += times * nbytes


def _classes(node):
    """The classes a node belongs to: every node is in "all", and in "node0" or "rest"."""
    return ("all", "node0" if node == 0 else "rest")


class Ledger:
    """Bytes owed by replayed symmetric steps, to `net` (bytes_sent) and `cluster`'s channels."""

    def __init__(self, net, cluster):
        self.net, self.cluster = net, cluster
        self.sent = defaultdict(float)        # (class, local endpoint) -> bytes owed to each
        self.carried = defaultdict(float)     # (class, local end, local end) -> bytes owed to each
        self.steps_sent = {}                  # id of a Replayed -> [it, replays whose sources are not booked]
        self.steps_carried = {}               # id of a Replayed -> [it, replays whose channels are not booked]

    def owe(self, tally, times=1):
        """Owe `times` replays of a Tally (a symmetric step) or a Replayed (any other)."""
        if isinstance(tally, Replayed):
            for nested in tally.nested:
                self.owe(nested, times)
            for owed in (self.steps_sent, self.steps_carried):
                owed.setdefault(id(tally), [tally, 0])[1] += times
            return
        for key, nbytes in tally.sent.items():
            self.sent[key] += times * nbytes
        for key, nbytes in tally.carried.items():
            self.carried[key] += times * nbytes

    def owed_to(self, endpoint) -> float:
        """Bytes `endpoint` sent in replays not yet booked."""
        steps = sum(times * step.by_source.get(endpoint, 0.0) for step, times in self.steps_sent.values())
        if not self.sent:
            return steps
        local = self.cluster.local(endpoint)
        return steps + sum(self.sent.get((c, local), 0.0) for c in _classes(self.cluster.home(endpoint)))

    def settle_sent(self):
        """Book what every endpoint is owed on net.bytes_sent."""
        sent = self.net.bytes_sent
        for step, times in self.steps_sent.values():
            for src, nbytes in step.by_source.items():
                sent[src] = sent.get(src, 0.0) + times * nbytes
        self.steps_sent.clear()
        if not self.sent:
            return
        cluster = self.cluster
        g = cluster.gpus_per_node
        nodes = {"all": range(cluster.nodes), "node0": range(min(1, cluster.nodes)), "rest": range(1, cluster.nodes)}
        for (c, local), nbytes in self.sent.items():
            for k in nodes[c]:
                end = f"gpu{k * g + int(local[3:])}" if local.startswith("gpu") else f"{local}{k}"
                sent[end] = sent.get(end, 0.0) + nbytes
        self.sent.clear()

    def settle(self):
        """Book everything owed: bytes sent and bytes carried by every channel."""
        self.settle_sent()
        for step, times in self.steps_carried.values():
            book(self.net, step.transfers(), times, carried_only=True)
        self.steps_carried.clear()
        if not self.carried:
            return
        cluster = self.cluster
        for (a, b), ch in cluster.channels.items():
            node = cluster.home(a if a != "net" else b)
            for c in _classes(node):
                nbytes = self.carried.get((c, cluster.local(a), cluster.local(b)))
                if nbytes:
                    ch.bytes_carried += nbytes
        self.carried.clear()
