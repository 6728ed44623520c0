"""The incremental max-min recompute (dpsim.maxmin) against max-min computed from scratch.

The oracle is water-filling written the plain way, on Python lists: raise every unfrozen
flow's rate by the same step until some channel is full, freeze the flows crossing it, repeat
(Bertsekas & Gallager, Data Networks, 2nd ed., section 6.5.2). It knows nothing of
components, arrays or weights' tricks: a flow of weight w is w separate flows.
"""
import random

import numpy as np
import pytest
import simpy
from hypothesis import given, settings, strategies as st

from dpsim.maxmin import FlowTable
from dpsim.network import Channel, Network
from test_network import arrival_times  # the same transfers through dpsim.network, each at its time


def water_filling(routes, capacity):
    """Max-min rates of flows crossing `routes` (lists of channel names; a name twice counts
    twice) on channels of `capacity` {name: bytes/s}."""
    rates = [0.0] * len(routes)
    unfrozen = set(range(len(routes)))
    while unfrozen:
        def headroom(ch):
            users = sum(r.count(ch) for i, r in enumerate(routes) if i in unfrozen)
            used = sum(rates[i] * r.count(ch) for i, r in enumerate(routes))
            return (capacity[ch] - used) / users if users else float("inf")
        step = min(headroom(ch) for ch in capacity)
        full = {ch for ch in capacity if headroom(ch) <= step * (1 + 1e-12)}
        for i in unfrozen:
            rates[i] += step
        unfrozen -= {i for i in unfrozen if full & set(routes[i])}
    return rates


def row_of(table, flow):
    """The row of the flow in flight that was added as owner `flow`."""
    (row,) = np.flatnonzero((table.owner[:table.used] == flow) & (table.remaining[:table.used] != np.inf))
    return row


# A run of changes: flows start (a route over 2-6 channels, a weight) or the flow at some
# position among those in flight finishes.
changes = st.lists(st.one_of(
    st.tuples(st.just("start"), st.lists(st.integers(0, 5), min_size=1, max_size=3), st.integers(1, 3)),
    st.tuples(st.just("finish"), st.integers(0, 50), st.just(0))), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(capacities=st.lists(st.sampled_from([1.0, 2.0, 5.0, 10.0]), min_size=2, max_size=6), changes=changes)
def test_incremental_rates_equal_max_min_from_scratch(capacities, changes):
    """After every start or finish, the table's rates (recomputed only in the component of the
    channels touched) equal water-filling of every flow in flight from scratch."""
    channels = [Channel(f"c{i}", bw * 1e9, 0.0) for i, bw in enumerate(capacities)]
    table = FlowTable()
    numbers = [table.number(ch) for ch in channels]
    flows = []                                   # (flow id, route as channel indices, weight)
    for n, (kind, arg, weight) in enumerate(changes):
        if kind == "start":
            route = [k % len(channels) for k in arg]
            hops = np.array([[numbers[k] for k in route]])
            table.add(hops, np.array([float(weight)]), np.array([1.0]), n, np.array([0]), 0.0)
            flows.append((n, route, weight))
            touched = hops.ravel()
        elif flows:
            flow = flows.pop(arg % len(flows))[0]
            row = row_of(table, flow)
            touched = table.hops[row].copy()
            table.remove(np.array([row]))
        else:
            continue
        table.reshare(touched)
        copies = [(f, [f"c{k}" for k in f[1]]) for f in flows for _ in range(f[2])]
        expected = water_filling([r for _, r in copies], {f"c{i}": bw * 1e9 for i, bw in enumerate(capacities)})
        got = [table.rate[row_of(table, f[0])] for f, _ in copies]
        assert got == pytest.approx(expected, rel=1e-9)


def fluid_arrivals(transfers):
    """Arrival time of each (route, nbytes, start_s) transfer, the fluid model run from scratch:
    between consecutive starts and finishes every rate is water-filling of what is in flight."""
    now, left = 0.0, {i: float(n) for i, (_, n, _) in enumerate(transfers)}
    arrived, flowing = {}, set()
    while len(arrived) < len(transfers):
        capacity = {ch.name: ch.bandwidth for r, _, _ in transfers for ch in r}
        order = sorted(flowing)
        rates = dict(zip(order, water_filling([[ch.name for ch in transfers[i][0]] for i in order], capacity)))
        starts = [transfers[i][2] for i in left if i not in flowing]
        finish = min((now + left[i] / rates[i] for i in flowing), default=float("inf"))
        then = min(starts + [finish])
        for i in flowing:
            left[i] -= rates[i] * (then - now)
        now = then
        for i in [i for i in flowing if left[i] <= 1e-9 * transfers[i][1]]:
            arrived[i] = now
            flowing.discard(i)
            del left[i]
        flowing |= {i for i in left if transfers[i][2] <= now}
    return [arrived[i] for i in range(len(transfers))]


def test_network_arrivals_equal_the_fluid_model_from_scratch():
    """Random transfers over random routes, starting at random times: every arrival as the
    from-scratch fluid model has it (to 1e-9)."""
    rng = random.Random(3)
    for _ in range(25):
        chans = [Channel(f"c{i}", rng.choice([1, 2, 5, 10]) * 1e9, 0.0) for i in range(rng.randint(2, 7))]
        transfers = [(rng.sample(chans, rng.randint(1, min(3, len(chans)))), rng.choice([0.5, 1, 2]) * 1e9,
                      rng.choice([0.0, 0.0, 0.1, 0.25, 0.7])) for _ in range(rng.randint(1, 10))]
        assert arrival_times(transfers) == pytest.approx(fluid_arrivals(transfers), rel=1e-9)


def test_a_start_that_renumbers_the_rows_at_a_finishing_instant():
    """X (0.5 GB) and A (1 GB) on links of their own finish at 0.5 s and 1.0 s. B's route has
    two hops of 0.5 s latency each, so its bytes start flowing at 1.0 s, the instant A finishes,
    and its wider route makes the table renumber its rows: B must still take its own 1 s."""
    def link(name, latency=0.0):
        return Channel(name, 1e9, latency)
    transfers = [([link("x")], 0.5e9), ([link("a")], 1e9), ([link("b1", 0.5), link("b2", 0.5)], 1e9)]
    env = simpy.Environment()
    net = Network(env)
    times = [None] * 3

    def one(i, route, nbytes):
        yield net.transfer(route, "src", "dst", nbytes)
        times[i] = env.now
    for i, t in enumerate(transfers):
        env.process(one(i, *t))
    env.run()
    assert times == pytest.approx([0.5, 1.0, 2.0], rel=1e-12)
