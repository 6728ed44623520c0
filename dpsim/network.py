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
Rates are recomputed whenever a transfer starts or ends; between those moments every rate is
constant, so the simulation is exact for this fluid model, not time-stepped.

Cost: every start or finish (transfers starting or ending at the same instant count once)
recomputes all rates, O(E log E) for E = (transfers in flight) x (hops per route).
The fast path (dpsim.replay) watches the transfers through one hook, `Network.observer`.
"""
from dataclasses import dataclass
from heapq import heapify, heappop, heappush


@dataclass(eq=False)
class Channel:
    """One direction of a link: bandwidth in bytes/s, latency in seconds."""
    name: str
    bandwidth: float
    latency: float
    bytes_carried: float = 0.0


@dataclass(eq=False)
class Flow:
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


class Network:
    def __init__(self, env, trace=None):
        self.env = env
        self.trace = trace
        self.flows: list[Flow] = []
        self._last = 0.0          # time the flows' `remaining` was last brought up to date
        self._generation = 0      # invalidates the completion timer of an older rate set
        self._reshare_pending = False
        self.bytes_sent: dict[str, float] = {}   # by source endpoint
        self.in_flight = 0        # transfers started and not yet arrived
        self.observer = None      # called observer(src, route, nbytes) as each transfer starts (dpsim.replay)

    def transfer(self, route, src, dst, nbytes, label="", overhead=0.0, weight=1):
        """Start moving nbytes from src to dst along route; return an event for its arrival.
        `overhead`: software seconds added to the route's latency (a library call, a copy).
        `weight`: this flow stands for that many identical ones (see share_bandwidth)."""
        env = self.env
        done = env.event()
        self.bytes_sent[src] = self.bytes_sent.get(src, 0.0) + nbytes
        self.in_flight += 1
        if self.observer is not None:
            self.observer(src, route, nbytes)
        latency = sum(ch.latency for ch in route) + overhead
        if not route or nbytes <= 0:
            env.timeout(latency).callbacks.append(lambda _: self._arrive(done))
            return done
        flow = Flow(route, float(nbytes), done, float(nbytes), label=label, src=src, dst=dst, weight=weight)
        env.timeout(latency).callbacks.append(lambda _: self._start(flow))
        return done

    def _arrive(self, done):
        self.in_flight -= 1
        done.succeed()

    # -- the fluid model
    def _advance(self):
        dt = self.env.now - self._last
        if dt > 0:
            for f in self.flows:
                f.remaining -= f.rate * dt
        self._last = self.env.now

    def _start(self, flow):
        self._advance()
        flow.started = self.env.now
        self.flows.append(flow)
        if not self._reshare_pending:        # transfers starting at the same instant share one recompute
            self._reshare_pending = True
            self.env.timeout(0).callbacks.append(lambda _: self._reshare())

    def _reshare(self):
        self._reshare_pending = False
        self._advance()
        share_bandwidth(self.flows)
        self._generation += 1
        if not self.flows:
            return
        first = min(self.flows, key=lambda f: f.remaining / f.rate)
        gen = self._generation
        delay = max(first.remaining / first.rate, 0.0)
        self.env.timeout(delay).callbacks.append(lambda _: self._finish(gen, first))

    def _finish(self, gen, first):
        if gen != self._generation:          # rates changed since this timer was set
            return
        self._advance()
        # The flow the timer was set for is done, even if rounding left it a few bytes (a tiny
        # delay added to a large clock can vanish); so is any other within a picosecond of done.
        first.remaining = 0.0
        slack = max(1e-12, self.env.now * 1e-12)
        finished, running = [], []
        for f in self.flows:
            (finished if f.remaining <= 1e-9 * f.size + f.rate * slack else running).append(f)
        self.flows = running
        for f in finished:
            for ch in f.route:
                ch.bytes_carried += f.size
            if self.trace is not None:
                self.trace.transfer(f, self.env.now)
            self._arrive(f.done)
        self._reshare()


def share_bandwidth(flows):
    """Max-min fair rates by progressive filling; sets flow.rate for every flow.

    Every channel's fair share is (capacity left) / (unfrozen flows crossing it). The channel
    with the smallest share fills first: its flows are frozen at that share, which lowers the
    capacity and the count of the other channels they cross. A heap keeps the channels in
    order of share; an entry made stale by such a change is skipped when it comes up.

    A flow of weight w counts as w flows on every channel it crosses (and a channel it crosses
    twice, twice): dpsim.symmetry lets one flow stand for a class of identical ones."""
    crossing = {}                                   # channel -> flows crossing it
    users = {}                                      # channel -> unfrozen flows crossing it, weighted
    for f in flows:
        for ch in f.route:
            crossing.setdefault(ch, []).append(f)
            users[ch] = users.get(ch, 0) + f.weight
    left = {ch: ch.bandwidth for ch in crossing}    # capacity not yet given to frozen flows
    order = {ch: i for i, ch in enumerate(crossing)}   # ties go to the channel seen first
    heap = [(ch.bandwidth / users[ch], order[ch], ch) for ch in crossing]
    heapify(heap)
    frozen = set()
    while heap:
        share, _, bottleneck = heappop(heap)
        if users[bottleneck] == 0 or share != left[bottleneck] / users[bottleneck]:
            continue                                # stale entry
        share = max(share, 1e-9 * bottleneck.bandwidth)
        changed = set()
        for f in crossing[bottleneck]:
            if f not in frozen:
                frozen.add(f)
                f.rate = share
                for ch in f.route:
                    left[ch] -= share * f.weight
                    users[ch] -= f.weight
                    changed.add(ch)
        for ch in changed:
            if users[ch] > 0:
                heappush(heap, (left[ch] / users[ch], order[ch], ch))
