"""Max-min fair rates of the flows in flight, kept up to date one change at a time.

Cost model: max-min fairness (Bertsekas & Gallager, Data Networks, 2nd ed., Prentice Hall
1992, chapter 6, section 6.5: max-min flow control by progressive filling). Every flow's
rate grows equally until some channel is full; the flows crossing it are frozen at that share
of it, (capacity left) / (unfrozen flows crossing it), and the others keep growing. The
result is the one allocation in which no flow can get faster without slowing one that is
already no faster than it.

Incremental recompute. A flow's max-min rate depends only on the flows it is connected to:
draw flows and channels as a graph with an edge wherever a flow crosses a channel; the
allocation of one connected component does not depend on any other component (progressive
filling never looks beyond the channels of the flows it raises). So when flows start or
finish, only the component(s) holding the channels they crossed can change, and only those
flows are filled again, from scratch, with the channels' whole capacity (no flow outside the
component uses them). Everything else keeps its rate. A ring's 2(n-1) steps put each
transfer on its own links, so a finishing transfer's component is empty and nothing is
recomputed; an all-to-all is one large component, filled again as a whole.

Vectorised: the flows in flight are rows of NumPy arrays (hops as channel numbers, padded
with channel 0 of infinite bandwidth; remaining bytes, rate, weight). The component is found
by growing a set of channels until no flow adds one (one array pass per hop of distance),
and progressive filling freezes, per pass, every flow crossing a channel at the smallest
share (channels tied at it fill at once). A pass costs O(F x H) for F flows of H hops; a
fill takes as many passes as there are distinct bottleneck shares. Where every channel of the
component carries one flow once (a ring's step), each flow gets its slowest channel's
bandwidth over its weight, in one pass: what progressive filling gives there.

A flow of weight w counts as w flows on every channel it crosses (twice on a channel it
crosses twice): dpsim.symmetry lets one flow stand for a class of identical ones.
"""
import numpy as np

_FLOOR = 1e-9       # a bottleneck's share is at least this much of its bandwidth (rounding can leave ~0)


def fill(hops, weight, capacity):
    """Max-min fair rates of the flows `hops` (F x H channel numbers, 0 = no channel) of the
    given weights, on channels of `capacity` (capacity[0] = inf), by progressive filling."""
    nflows, width = hops.shape
    rate = np.zeros(nflows)
    if nflows == 0:
        return rate
    users = np.bincount(hops.ravel(), weights=np.repeat(weight, width), minlength=len(capacity))
    users[0] = 0.0
    left = capacity.astype(float, copy=True)
    unfrozen = np.ones(nflows, dtype=bool)
    share = np.empty(len(capacity))
    while True:
        busy = users > 0
        share.fill(np.inf)
        np.divide(left, users, out=share, where=busy)
        level = share.min()
        full = share <= level
        hit = full[hops].any(axis=1)
        hit &= unfrozen
        level = max(level, _FLOOR * capacity[full].min())
        rate[hit] = level
        unfrozen &= ~hit
        if not unfrozen.any():
            return rate
        gone = np.bincount(hops[hit].ravel(), weights=np.repeat(weight[hit], width), minlength=len(capacity))
        gone[0] = 0.0
        users -= gone
        left -= level * gone
        users[users < 0.5] = 0.0          # weights are whole numbers: guard against rounding


class FlowTable:
    """The flows in flight as rows of arrays, and the channels they cross, numbered from 1.
    Rows [0, used) are in use; a finished flow's row is dead (no hops, infinite bytes left)
    until the table empties or fills up and is packed."""

    FIELDS = ("hops", "weight", "size", "remaining", "rate", "owner", "row", "started")

    def __init__(self):
        self._buffers = [np.array([np.inf]), np.zeros(1), np.zeros(1, dtype=np.int64)]
        self.capacity = self._buffers[0][:1]          # channel 0: the padding of short routes
        self.carried = self._buffers[1][:1]           # bytes of finished flows not yet booked on the channels
        self.load = self._buffers[2][:1]              # flows in flight crossing each channel
        self.channels = [None]                        # number -> Channel
        self._channels = {}                           # Channel -> number
        self._routes = {}                             # id of a route -> (the route, numbers, latency)
        self.used = self.alive = 0
        self.packs = 0                                # times the rows were packed (row numbers changed)
        self._allocate(64, 1)

    def _allocate(self, rows, width):
        self.hops = np.zeros((rows, width), dtype=np.int64)
        self.weight, self.size, self.started = np.zeros(rows), np.zeros(rows), np.zeros(rows)
        self.remaining, self.rate = np.full(rows, np.inf), np.ones(rows)
        self.owner, self.row = np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64)

    def route(self, route):
        """(channel numbers, latency) of a route (a list of Channels), kept per list: a cluster
        hands out the same list for the same pair."""
        kept = self._routes.get(id(route))
        if kept is None or kept[0] is not route:
            if len(self._routes) >= 1 << 20:
                self._routes.clear()
            kept = self._routes[id(route)] = (route, [self.number(ch) for ch in route],
                                              sum(ch.latency for ch in route))
        return kept[1], kept[2]

    def number(self, channel) -> int:
        """The channel's number, registering it the first time. capacity, carried and load are
        views of the first len(channels) entries of buffers that double when full, so
        registering a million channels costs O(a million), not O(a million squared)."""
        n = self._channels.get(channel)
        if n is None:
            n = self._channels[channel] = len(self.channels)
            if n == len(self._buffers[0]):
                self._buffers = [np.concatenate([b, np.zeros_like(b)]) for b in self._buffers]
            for buffer, value in zip(self._buffers, (float(channel.bandwidth), 0.0, 0)):
                buffer[n] = value
            self.channels.append(channel)
            self.capacity, self.carried, self.load = (b[:n + 1] for b in self._buffers)
        return n

    def add(self, hops, weight, size, owner, row, started) -> int:
        """Put flows in rows of their own (their rates are set by the next `reshare`); the
        first of those rows."""
        k, width = hops.shape
        if self.used + k > len(self.rate) or width > self.hops.shape[1]:
            self._pack(self.used + k, width)
        a, b = self.used, self.used + k
        self.hops[a:b, :width] = hops
        self.weight[a:b], self.size[a:b], self.remaining[a:b] = weight, size, size
        self.owner[a:b], self.row[a:b], self.started[a:b] = owner, row, started
        self.used, self.alive = b, self.alive + k
        self.load += np.bincount(hops.ravel(), minlength=len(self.load))
        self.load[0] = 0
        return a

    def _pack(self, rows, width):
        """Drop the dead rows; make room for `rows` rows of `width` hops."""
        live = self.remaining[:self.used] != np.inf
        old = {name: getattr(self, name)[:self.used][live] for name in self.FIELDS}
        self._allocate(max(2 * rows, 64), max(width, self.hops.shape[1]))
        self.packs += 1
        n = len(old["rate"])
        for name, values in old.items():
            if name == "hops":
                self.hops[:n, :values.shape[1]] = values
            else:
                getattr(self, name)[:n] = values
        self.used = n

    def remove(self, gone):
        """End the flows of rows `gone` (indices), booking their bytes on the channels they crossed."""
        hops = self.hops[gone]
        flat = hops.ravel()
        self.carried += np.bincount(flat, weights=np.repeat(self.size[gone], hops.shape[1]),
                                    minlength=len(self.carried))
        self.carried[0] = 0.0
        self.load -= np.bincount(flat, minlength=len(self.load))
        self.load[0] = 0
        self.hops[gone] = 0
        self.remaining[gone], self.rate[gone] = np.inf, 1.0
        self.alive -= len(gone)
        if not self.alive:
            self.used = 0

    def book(self):
        """Add the finished flows' bytes to their channels' bytes_carried (Network calls it when
        nothing is in flight: once per idle network, not once per flow and hop)."""
        numbers = np.flatnonzero(self.carried)
        channels = self.channels
        for n, nbytes in zip(numbers.tolist(), self.carried[numbers].tolist()):
            channels[n].bytes_carried += nbytes
        self.carried[numbers] = 0.0

    def advance(self, seconds):
        if seconds > 0:
            live = slice(0, self.used)
            self.remaining[live] -= self.rate[live] * seconds

    def component(self, channels):
        """Rows of the flows connected to `channels` (numbers) through shared channels, and
        the channels they cross (a mask)."""
        marked = np.zeros(len(self.capacity), dtype=bool)
        marked[channels] = True
        marked[0] = False
        hops = self.hops[:self.used]
        count = np.count_nonzero(marked)
        while True:
            rows = np.flatnonzero(marked[hops].any(axis=1))
            marked[hops[rows]] = True
            marked[0] = False
            before, count = count, np.count_nonzero(marked)
            if count == before or len(rows) == self.alive:    # no flow found adds a channel
                return rows, marked

    def settle_alone(self, first, group) -> bool:
        """Rates for a group of flows just added at rows first... (network.Group) if no other
        flow crosses its channels and none crosses one twice: each at its slowest channel over
        its weight, as `reshare` would give them. False where that does not hold."""
        alone = group.alone
        if alone is None or not (self.load[group.channels] == 1).all():
            return False
        self.rate[first:first + len(alone)] = alone
        return True

    def reshare(self, channels):
        """New max-min rates for the flows whose share can have changed: those connected to
        `channels`, where flows started or finished."""
        if not self.load[channels].any():
            return                                     # no flow in flight crosses them
        rows, crossed = self.component(channels)
        hops = self.hops[rows]
        if self.load[crossed].max() <= 1:              # flows on channels of their own: each
            self.rate[rows] = self.capacity[hops].min(axis=1) / self.weight[rows]    # at its slowest
        else:
            self.rate[rows] = fill(hops, self.weight[rows], self.capacity)

    def next_finish(self):
        """(row, seconds) of the flow that finishes first at today's rates."""
        times = self.remaining[:self.used] / self.rate[:self.used]
        first = int(times.argmin())
        return first, float(times[first])
