"""Ring collectives that overlap on a symmetric cluster, timed without SimPy (ZeRO-3's backward).

ZeRO-3 gathers the next unit's parameters while the last unit's gradient is reduce-scattered:
two ring collectives, each n - 1 identical steps, on the same links at once. No round of
either stands for the others (dpsim.replay), but every step is an Alike step of
dpsim.symmetry, and two Alike steps under the same renumbering of the nodes are one: every
node does at every moment what node 0 does. So the pair is node 0's flows, one per kind, over
one channel per kind (symmetry.simulate's representative network), whatever the number of
nodes, and it is computed here as a small fluid model instead of on the SimPy clock.

The cost model is dpsim.network's, step by step (a `Train` is one collective):
  a step starts every transfer at once; each waits its route's latency (plus the message's
  software overhead), then its bytes flow at the max-min fair rate (dpsim.maxmin.fill) of the
  flows in flight of every train; the step's transfers have all arrived at t; the step ends
  at `post(start, t)` (t for an all-gather; for a reduce-scatter the addition after it, or
  pipelined with it: Machine.send_reduce), and the next step starts then.
Rates change only when a flow starts or ends, so the model is exact between those moments.

Skipping. A step whose flows share no channel with another train's while they flow takes the
time it takes alone (`period`), and on each channel its bytes flow in the same window of it
(`window`: first byte on, last byte off). When train X begins a step and the other train Y's
step so far has shared nothing, both trains' windows lie on grids of their own periods; on
every channel they both use, the position of X's window on Y's grid moves by X's period
modulo Y's at every step of X, a straight line, so the number of X's steps whose windows miss
all of Y's is a closed form, and X skips them: its start moves on by whole periods, and Y,
simulated as it is, finds nothing of X's on the links, as it would not. A single train skips
to its last step. Before a train joins, a train skipped past that moment is brought back to
the step it is in (`rewind`).
Repeats. Where the two keep meeting, the state of Y relative to the moment X begins a step is
compared with its state at X's earlier beginnings; once it comes back (to 1e-11 of a period
and of each flow's bytes), the pair repeats itself and whole repeats are jumped over.

Exact up to rounding against the simulation of every transfer: tests/test_duet.py.
Machine.together builds the trains and refuses whenever these assumptions fail (another
transfer in flight, steps that are not Alike, a trace); Duet's owner (dpsim.replay) marks the
run disturbed if anyone else sends while trains run, and the engine redoes it in detail.
"""
import math

import numpy as np

from .maxmin import fill

_SLACK = 1e-12      # a flow within a picosecond (relative) of done is done, as in dpsim.network
_MARGIN = 1e-6      # windows nearer than this share of a period count as overlapping: simulated
_REPEAT = 1e-11     # states this near (share of a period, of a flow's bytes) are a repeat


class Train:
    """`count` identical steps of `flows` (hops as channel numbers, latency, bytes, weight);
    post(start, arrived) -> when a step that started at `start` and whose transfers all arrived
    at `arrived` ends. `done`, the event the caller waits for; `tally`, the bytes of one step."""

    def __init__(self, flows, count, post, done=None, tally=None):
        self.flows, self.count, self.post, self.done, self.tally = flows, count, post, done, tally
        self.steps = 0            # steps finished
        self.start = 0.0          # the current step's start (later than now after a skip)
        self.left = [None] * len(flows)   # bytes left per flow: None not started, 0 arrived
        self.rate = [0.0] * len(flows)
        self.end = None           # when the current step ends, once its transfers have arrived
        self.shared = False       # the current step's flows have flowed beside another train's
        self.period = self.window = None

    def clone(self):
        other = object.__new__(Train)
        other.__dict__.update(self.__dict__)
        other.left, other.rate = list(self.left), list(self.rate)
        return other

    def begin(self, start):
        self.start, self.end, self.shared = start, None, False
        self.left = [None] * len(self.flows)


def profile(train, capacity):
    """(period, windows) of one step of `train` alone, from its start: windows, for each channel
    its flows cross, (first byte on it, last byte off it)."""
    alone = Train(train.flows, 1, train.post)
    alone.period, alone.window = 0.0, {}         # known: no skipping inside one step
    fluid = Fluid(capacity)
    fluid.add(alone, 0.0)
    began, ended = {}, {}
    while alone.steps == 0:
        before = list(alone.left)
        fluid.step(math.inf)
        for i, (b, a) in enumerate(zip(before, alone.left)):
            if b is None and a is not None and a > 0:
                began[i] = fluid.now
            if b is not None and b > 0 and a == 0:
                ended[i] = fluid.now
    windows = {}
    for i, first in began.items():
        for c in alone.flows[i][0]:
            low, high = windows.get(c, (math.inf, 0.0))
            windows[c] = (min(low, first), max(high, ended[i]))
    return fluid.now, windows


class Fluid:
    """The trains in flight and their flows at time `now`, on channels of `capacity`."""

    def __init__(self, capacity):
        self.capacity, self.now, self.trains = capacity, 0.0, []
        self.skipped = 0          # steps jumped over instead of simulated
        self._rates = {}
        self._marks = []          # (now, the other train's state, steps of each) as a train begins a step

    def clone(self):
        other = Fluid(self.capacity)
        other.now, other.skipped, other._rates = self.now, self.skipped, self._rates
        other.trains = [t.clone() for t in self.trains]
        other._marks = [(now, state, [other.trains[self.trains.index(t)] for t in pair], steps)
                        for now, state, pair, steps in self._marks]
        return other

    def add(self, train, now):
        self.now = now
        if train.period is None:
            train.period, train.window = profile(train, self.capacity)
        train.begin(now)
        self.trains.append(train)
        self._marks.clear()
        self._skip(train, math.inf)

    def rewind(self):
        """Bring back every train skipped past now to the step it is in now, its state in that
        step simulated alone from the step's start (nothing met it there: that is why it was
        skipped); then the rates of all. Before another train joins."""
        now = self.now
        for tr in self.trains:
            if tr.start > now:
                back = math.ceil((tr.start - now) / tr.period)
                tr.steps -= back
                self.skipped -= back
                tr.begin(tr.start - back * tr.period)
                alone = Fluid(self.capacity)
                alone.now, alone.trains, alone._rates = tr.start, [tr], self._rates
                alone.run(until=now)
        self._share()

    def run(self, until=math.inf):
        """Simulate until a train finishes (it is removed and returned) or until `until` (None)."""
        while self.trains:
            done = self.step(until)
            if done is not None or self.now >= until:
                return done
        return None

    def _next(self):
        """(time, train, flow) of the next change; flow None for a flow's start or a step's end."""
        best, train, flow = math.inf, None, None
        for tr in self.trains:
            if tr.end is not None:
                if tr.end < best:
                    best, train, flow = tr.end, tr, None
                continue
            for i, (f, left) in enumerate(zip(tr.flows, tr.left)):
                t = tr.start + f[1] if left is None else self.now + left / tr.rate[i] if left > 0 else math.inf
                if t < best:
                    best, train, flow = t, tr, (i if left is not None else None)
        return best, train, flow

    def step(self, until):
        """Advance to the next change (or to `until`, if sooner) and make it; a finished train or None."""
        t, train, flow = self._next()
        if t > until:
            self._advance(until)
            return None
        self._advance(t)
        if flow is not None:
            train.left[flow] = 0.0
        return self._happen(until)

    def _advance(self, t):
        dt = t - self.now
        if dt > 0:
            for tr in self.trains:
                if tr.end is None:
                    tr.left = [x - r * dt if x else x for x, r in zip(tr.left, tr.rate)]
        self.now = max(self.now, t)

    def _happen(self, until):
        """Flows that start, arrive or end now; steps that end; new rates."""
        now, changed = self.now, False
        slack = max(_SLACK, now * _SLACK)
        for tr in list(self.trains):
            if tr.end is not None:
                if tr.end <= now and self._step_done(tr, until):
                    return tr
                continue
            for i, (hops, latency, size, _) in enumerate(tr.flows):
                left = tr.left[i]
                if left is None and tr.start + latency <= now:
                    tr.left[i], changed = (size if hops and size > 0 else 0.0), True
                elif left and left <= 1e-9 * size + tr.rate[i] * slack:
                    tr.left[i], changed = 0.0, True
            if all(x == 0 for x in tr.left):
                tr.end = tr.post(tr.start, now)
                changed = True
                if tr.end <= now and self._step_done(tr, until):
                    return tr
        if changed:
            self._share()
        return None

    def _step_done(self, tr, until):
        """The step of `tr` has ended: True if it was the last (the train leaves), else the next begins."""
        tr.steps += 1
        if tr.steps == tr.count:
            self.trains.remove(tr)
            self._marks.clear()
            self._share()
            return True
        tr.begin(tr.end)
        if not self._skip(tr, until):
            self._repeat(tr, until)
        return False

    def _share(self):
        """Max-min rates of the flows flowing now (the same fill as dpsim.network's), kept per set."""
        flowing = [(tr, i) for tr in self.trains if tr.end is None
                   for i, x in enumerate(tr.left) if x is not None and x > 0]
        used = {}
        for tr, i in flowing:
            for c in tr.flows[i][0]:
                used.setdefault(c, set()).add(tr)
        for trains in used.values():
            if len(trains) > 1:
                for tr in trains:
                    tr.shared = True
        key = tuple((tr.flows[i][0], tr.flows[i][3]) for tr, i in flowing)     # rates: hops and weights
        rates = self._rates.get(key)
        if rates is None:
            rates = self._rates[key] = self._fill([tr.flows[i] for tr, i in flowing]) if flowing else []
        for (tr, i), r in zip(flowing, rates):
            tr.rate[i] = r

    def _fill(self, flows):
        width = max(len(f[0]) for f in flows)
        hops = np.array([list(f[0]) + [0] * (width - len(f[0])) for f in flows], dtype=np.int64)
        weight = np.array([float(f[3]) for f in flows])
        return fill(hops, weight, np.array(self.capacity, dtype=float)).tolist()

    def _skip(self, tr, until):
        """`tr` has just begun a step: jump over the steps whose flows meet nobody else's."""
        others = [o for o in self.trains if o is not tr]
        room = min(tr.count - tr.steps - 1, math.floor((until - tr.start) / tr.period) if until < math.inf
                   else tr.count)
        if len(others) > 1 or room <= 0 or not tr.period > 0:
            return False
        k = room if not others else min(room, clear_steps(tr, others[0]))
        if k > 0:
            tr.steps += k
            tr.start += k * tr.period
            self.skipped += k
        return k > 0

    def _repeat(self, x, until):
        """x has just begun a step beside y, whose steps its own have met: if y's state relative
        to now is what it was when x began an earlier step, the pair repeats itself; jump over
        as many whole repeats as both trains (and `until`) allow."""
        if len(self.trains) != 2:
            return
        y = self.trains[0] if self.trains[1] is x else self.trains[1]
        now = self.now
        state = (y.start - now, None if y.end is None else y.end - now, tuple(y.left))
        for then, old, pair, (xs, ys) in self._marks:
            if pair[0] is x and same(old, state, y, _REPEAT * x.period):
                dt, dx, dy = now - then, x.steps - xs, y.steps - ys
                if dt > 0 and dx > 0 and dy > 0:
                    m = min((x.count - x.steps - 1) // dx, (y.count - y.steps - 1) // dy,
                            math.floor((until - now) / dt) if until < math.inf else x.count)
                    if m > 0:
                        self._shift(x, y, m * dt, m * dx, m * dy)
                        self._marks.clear()
                        return
        self._marks = self._marks[-7:] + [(now, state, (x, y), (x.steps, y.steps))]

    def _shift(self, x, y, dt, dx, dy):
        """Both trains and the clock on by dt, x by dx steps and y by dy: whole repeats."""
        self.now += dt
        x.start += dt
        y.start += dt
        if y.end is not None:
            y.end += dt
        x.steps += dx
        y.steps += dy
        self.skipped += dx + dy


def same(old, new, y, within):
    """Two states of train y relative to now (start, end, bytes left) alike to `within` seconds
    and to that share of each flow's bytes."""
    if (old[1] is None) != (new[1] is None) or abs(old[0] - new[0]) > within:
        return False
    if old[1] is not None and abs(old[1] - new[1]) > within:
        return False
    for a, b, f in zip(old[2], new[2], y.flows):
        if (a is None) != (b is None) or a is not None and abs(a - b) > _REPEAT * f[2]:
            return False
    return True


def clear_steps(x, y):
    """How many of x's next steps (x begins one now) miss every step of y on every channel they
    both use, y's current step unshared so far: each channel's windows on their trains' grids
    of whole periods, x's on y's moving by x's period modulo y's at every step of x."""
    if y.shared:
        return 0
    p, q = x.period, y.period
    if not q > 0:
        return 0
    drift = p % q
    if drift > q / 2:
        drift -= q
    margin = _MARGIN * max(p, q)
    steps = x.count
    for c in x.window.keys() & y.window.keys():
        (a0, a1), (b0, b1) = x.window[c], y.window[c]
        low, high = (b1 - b0) + margin, q - (a1 - a0) - margin
        where = (x.start + a0 - (y.start + b0)) % q          # x's window on y's grid
        if not low <= where <= high:
            return 0
        if drift:
            steps = min(steps, math.floor(((high - where) if drift > 0 else (where - low)) / abs(drift)))
    return steps


class Duet:
    """The trains on the SimPy clock: each one's `done` succeeds when the fluid model says it ends.
    `book(train)` is called as a train ends (its bytes: dpsim.ledger)."""

    def __init__(self, env, book):
        self.env, self.book = env, book
        self.capacity = [math.inf]
        self.kinds = {}           # channel kind -> its number in capacity
        self.fluid = Fluid(self.capacity)
        self.tallies = {}         # (moves, staged) -> the bytes of one step (dpsim.ledger.Tally)
        self.joined = 0           # trains timed
        self._generation = 0

    @property
    def active(self) -> bool:
        return bool(self.fluid.trains)

    def number(self, kind, capacity) -> int:
        if kind not in self.kinds:
            self.kinds[kind] = len(self.capacity)
            self.capacity.append(capacity)
        return self.kinds[kind]

    def join(self, train):
        """Start `train` now; an event for its end."""
        self.joined += 1
        self._catch_up()
        self.fluid.rewind()
        self.fluid.add(train, self.env.now)
        self._plan()
        return train.done

    def _catch_up(self):
        now = self.env.now
        while self.fluid.trains and self.fluid.now < now or self._due(now):
            done = self.fluid.run(until=now)
            if done is not None:
                self._end(done)

    def _due(self, now):
        """A train whose planned end is now but whose timer has not fired yet."""
        t, _, _ = self.fluid._next() if self.fluid.trains else (math.inf, None, None)
        return t <= now

    def _plan(self):
        """Time the next train to end on a copy; the copy becomes the state if nobody joins first."""
        self._generation += 1
        if not self.fluid.trains:
            return
        trial = self.fluid.clone()
        done = trial.run()
        gen = self._generation
        self.env.timeout(max(trial.now - self.env.now, 0.0)).callbacks.append(
            lambda _: self._fire(gen, trial, done))

    def _fire(self, gen, trial, done):
        if gen != self._generation:
            return
        self.fluid = trial
        self._end(done)
        self._plan()

    def _end(self, train):
        self._generation += 1
        self.book(train)
        train.done.succeed()
