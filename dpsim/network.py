"""Moving bytes: directed channels shared max-min fairly by the transfers crossing them.

Cost model of one transfer of m bytes over a route (a list of channels):
    it first waits the route's latency (the sum of its hops' latencies: cut-through, not
    store-and-forward), then its bytes flow at a rate set by every other transfer in flight.
With nothing else in flight that is  alpha + m / min(bandwidth on the route).

Sharing model: max-min fairness (progressive filling; Bertsekas & Gallager, Data Networks,
2nd ed., section 6.5). Every transfer's rate grows equally until some channel is full; the
transfers through that channel are frozen at its fair share, and the rest keep growing. We
chose it because it is what TCP flows and PCIe/NVLink arbitration approximate in steady state,
because it never over-commits a channel, and because a transfer that is slowed elsewhere
leaves its unused share to the others (plain "divide by the number of users" would waste it).
Rates change only when a transfer starts or ends; between those moments every rate is
constant, so the simulation is exact for this fluid model, not time-stepped.

Cost: transfers starting or ending at the same instant count as one change, and a change
recomputes only the rates it can reach (dpsim.maxmin: the connected component of the
channels touched, vectorised). One timer stands for the next transfer to finish. The
transfers of one step (`Network.send` of a `Sending`) are started, finished and waited for
as a group: one SimPy event per distinct latency and one for the last arrival, not one per
transfer; a step between fixed pairs (`Pairs`) is routed once and its Sending resized for each
size that travels them. The fast path (dpsim.replay) watches the steps through one hook,
`Network.observer`.
"""
import copy
from dataclasses import dataclass

import numpy as np

from .maxmin import FlowTable, fill


@dataclass(eq=False)
class Channel:
    """One direction of a link: bandwidth in bytes/s, latency in seconds; bytes_carried, the
    bytes of the transfers that crossed it (booked when nothing is left in flight)."""
    name: str
    bandwidth: float
    latency: float
    bytes_carried: float = 0.0


@dataclass(eq=False)
class Flow:
    """One transfer as share_bandwidth and the trace see it."""
    route: list
    size: float
    done: object                       # SimPy event, succeeded when the last byte arrives
    remaining: float = 0.0
    rate: float = 0.0
    started: float = 0.0
    label: str = ""
    src: str = ""
    dst: str = ""
    weight: int = 1                    # identical transfers this flow stands for (dpsim.symmetry)


class Pairs:
    """A step of transfers of `nbytes` each between fixed (src, dst) `pairs`, a tuple a strategy
    makes once (a double binary tree's 2 g (N - 1) edges between nodes): equal to another only
    for the very same tuple and size, so a step of 262,128 transfers is looked up without
    reading them, and Machine finds their routes once for every size that travels them
    (Sending.resized)."""
    __slots__ = ("pairs", "nbytes")

    def __init__(self, pairs: tuple, nbytes: float):
        self.pairs, self.nbytes = pairs, nbytes

    def __iter__(self):
        nbytes = self.nbytes
        return ((s, d, nbytes) for s, d in self.pairs)

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return (*self.pairs[i], self.nbytes)

    def __eq__(self, other):
        return isinstance(other, Pairs) and other.pairs is self.pairs and other.nbytes == self.nbytes

    def __hash__(self):
        return hash((id(self.pairs), self.nbytes))


class Sending:
    """The transfers of one step, started together: made once, sent as often as the step comes.
    moves: (src, dst, nbytes); routes: a list of channels each; `overhead`: software seconds
    added to every route's latency; `weights`: how many identical transfers each stands for."""

    def __init__(self, table, moves, routes, overhead=0.0, weights=None):
        self.moves, self.routes = moves, routes
        self.count = len(moves)
        self.sources, self.sizes = [m[0] for m in moves], [m[2] for m in moves]
        self.distinct_sources = len(set(self.sources)) == len(moves)
        self.table, self.overhead, self.weights = table, overhead, weights
        weights = weights or [1] * len(moves)
        by_latency = {}
        for i, ((_, _, nbytes), route) in enumerate(zip(moves, routes)):
            numbers, latency = table.route(route)
            by_latency.setdefault((latency + overhead, bool(route) and nbytes > 0), []).append(i)
        self.instant = [(latency, len(rows)) for (latency, flows), rows in by_latency.items() if not flows]
        self.groups = [self._group(table, latency, rows, weights)
                       for (latency, flows), rows in by_latency.items() if flows]

    def _group(self, table, latency, rows, weights):
        numbers = [table.route(self.routes[i])[0] for i in rows]
        width = max(map(len, numbers))
        hops = np.array([n + [0] * (width - len(n)) for n in numbers], dtype=np.int64)
        return Group(latency, hops, np.array([float(weights[i]) for i in rows]),
                     np.array([float(self.moves[i][2]) for i in rows]), np.array(rows), table.capacity)

    def transfers(self):
        """(src, route, nbytes) of every transfer, one after another."""
        return zip(self.sources, self.routes, self.sizes)

    def resized(self, pairs: Pairs):
        """The same transfers as this Sending of Pairs `pairs` with another size: the routes,
        their channel numbers and latencies as they are, only the sizes new."""
        nbytes = pairs.nbytes
        if not nbytes > 0 or self.instant:
            return Sending(self.table, pairs, self.routes, self.overhead, self.weights)
        other = copy.copy(self)
        other.moves, other.sizes = pairs, [nbytes] * self.count
        other.groups = [copy.copy(group) for group in self.groups]
        for group in other.groups:
            group.size = np.full(len(group.rows), float(nbytes))
        return other


class Group:
    """The flows of a Sending that start together (the same latency): their hops as channel
    numbers, weights, sizes, rows in the Sending; the channels they cross; `alone`, their rates
    if no other flow shares a channel with them (None where two of them share one)."""

    def __init__(self, latency, hops, weight, size, rows, capacity):
        self.latency, self.hops, self.weight, self.size, self.rows = latency, hops, weight, size, rows
        self.channels, counts = np.unique(hops[hops != 0], return_counts=True)
        self.alone = capacity[hops].min(axis=1) / weight if counts.max() <= 1 else None


class Network:
    def __init__(self, env, trace=None):
        self.env = env
        self.trace = trace
        self.table = FlowTable()  # the transfers whose bytes are flowing, with their rates
        self._sendings = {}       # number -> [event, transfers not yet arrived, Sending, label]
        self._numbered = 0
        self._last = 0.0          # time the flows' `remaining` was last brought up to date
        self._generation = 0      # invalidates the completion timer of an older rate set
        self._touched = []        # channel numbers where flows finished since the last reshare
        self._started = []        # (first row, packs, Group) of the flows started since then
        self._reshare_pending = False
        self.bytes_sent: dict[str, float] = {}   # by source endpoint
        self.in_flight = 0        # transfers started and not yet arrived
        self.observer = None      # called observer(sending) as a step's transfers start (dpsim.replay)

    def sending(self, moves, routes, overhead=0.0, weights=None) -> Sending:
        return Sending(self.table, moves, routes, overhead, weights)

    def transfer(self, route, src, dst, nbytes, label="", overhead=0.0, weight=1):
        """Start moving nbytes from src to dst along route; return an event for its arrival.
        `overhead`: software seconds added to the route's latency (a library call, a copy).
        `weight`: this flow stands for that many identical ones (see dpsim.maxmin)."""
        return self.send(self.sending([(src, dst, nbytes)], [route], overhead, [weight]), label)

    def send(self, sending: Sending, label=""):
        """Start every transfer of `sending`; return an event for when the last has arrived.
        `label`: what the trace calls them."""
        env = self.env
        done = env.event()
        sent = self.bytes_sent
        get = sent.get
        if sending.distinct_sources:          # one addition per key: the same sums as one by one
            sent.update(zip(sending.sources, [get(s, 0.0) + n for s, n in zip(sending.sources, sending.sizes)]))
        else:
            for src, nbytes in zip(sending.sources, sending.sizes):
                sent[src] = get(src, 0.0) + nbytes
        if self.observer is not None:
            self.observer(sending)
        if not sending.count:
            return done.succeed()
        self.in_flight += sending.count
        number = self._numbered = self._numbered + 1
        self._sendings[number] = [done, sending.count, sending, label]
        for latency, count in sending.instant:
            env.timeout(latency).callbacks.append(lambda _, c=count: self._arrive(number, c))
        for group in sending.groups:
            env.timeout(group.latency).callbacks.append(lambda _, g=group: self._start(number, g))
        return done

    def _arrive(self, number, count):
        self.in_flight -= count
        if not self.in_flight:
            self.table.book()
        entry = self._sendings[number]
        entry[1] -= count
        if entry[1] == 0:
            del self._sendings[number]
            entry[0].succeed()

    # -- the fluid model
    def _advance(self):
        dt = self.env.now - self._last
        if dt > 0:
            self.table.advance(dt)
        self._last = self.env.now

    def _start(self, number, group):
        self._advance()
        table, packs = self.table, self.table.packs
        first = table.add(group.hops, group.weight, group.size, number, group.rows, self.env.now)
        if table.packs != packs:             # rows renumbered: the pending timer's row is stale
            self._generation += 1
        self._started.append((first, table.packs, group))
        if not self._reshare_pending:        # transfers starting at the same instant share one recompute
            self._reshare_pending = True
            self.env.timeout(0).callbacks.append(lambda _: self._reshare())

    def _reshare(self):
        """New rates where flows started or finished since the last call (dpsim.maxmin): a
        group that started on channels of its own gets its rates alone, the rest are
        recomputed in their component; then the timer for the next flow to finish."""
        self._reshare_pending = False
        if not (self._touched or self._started):
            return
        self._advance()
        table = self.table
        for first, packs, group in self._started:
            if packs != table.packs or not table.settle_alone(first, group):
                self._touched.append(group.channels)
        if self._touched:
            table.reshare(np.concatenate(self._touched))
        self._touched, self._started = [], []
        self._generation += 1
        if not table.alive:
            return
        first, seconds = table.next_finish()
        gen = self._generation
        self.env.timeout(max(seconds, 0.0)).callbacks.append(lambda _: self._finish(gen, first))

    def _finish(self, gen, first):
        if gen != self._generation:          # rates changed since this timer was set
            return
        self._advance()
        table, now = self.table, self.env.now
        # The flow the timer was set for is done, even if rounding left it a few bytes (a tiny
        # delay added to a large clock can vanish); so is any other within a picosecond of done.
        table.remaining[first] = 0.0
        slack = max(1e-12, now * 1e-12)
        used = slice(0, table.used)
        rows = np.flatnonzero(table.remaining[used] <= 1e-9 * table.size[used] + table.rate[used] * slack)
        if self.trace is not None:
            self._trace(rows, now)
        owners = table.owner[rows]
        self._touched.append(table.hops[rows].ravel())
        table.remove(rows)
        self._generation += 1
        if owners[0] == owners[-1] and (len(owners) < 3 or (owners == owners[0]).all()):
            self._arrive(int(owners[0]), len(owners))
        else:
            for number, count in zip(*(a.tolist() for a in np.unique(owners, return_counts=True))):
                self._arrive(number, count)
        self._reshare()

    def _trace(self, indices, now):
        table = self.table
        for i in indices.tolist():
            _, _, sending, label = self._sendings[int(table.owner[i])]
            row = int(table.row[i])
            src, dst, nbytes = sending.moves[row]
            self.trace.transfer(Flow(sending.routes[row], float(nbytes), None, label=label,
                                     started=float(table.started[i]), src=src, dst=dst), now)


def share_bandwidth(flows):
    """Max-min fair rates of `flows` (dpsim.maxmin.fill); sets flow.rate for every flow.
    A flow of weight w counts as w flows on every channel it crosses."""
    numbers = {}
    routes = [[numbers.setdefault(ch, len(numbers) + 1) for ch in f.route] for f in flows]
    hops = np.zeros((len(flows), max(map(len, routes), default=0)), dtype=np.int64)
    for k, route in enumerate(routes):
        hops[k, :len(route)] = route
    capacity = np.array([np.inf] + [ch.bandwidth for ch in numbers], dtype=float)
    for f, rate in zip(flows, fill(hops, np.array([float(f.weight) for f in flows]), capacity)):
        f.rate = float(rate)
