"""dpsim.duet (overlapping ring collectives timed on the representative, without SimPy, with
skips and repeats) against dpsim.network's simulation of the same steps, and ZeRO-3's fast path
against the simulation of every transfer; and the refusals: where the duet's assumptions fail,
the run is the detailed one."""
import math

import pytest
import simpy

from dpsim import duet
from dpsim.engine import Engine
from dpsim.network import Channel, Network
from dpsim.trace import Trace
from test_fastpath import assert_same, shared, v100s

# two kinds of channel, as a ring step has them: a fast one with a short latency (NVLink) and a
# slow one with a long one (a NIC); bytes/s, seconds
FAST, SLOW = (150e9, 1e-6), (12.5e9, 8e-6)


def by_network(trains, nodes=4):
    """Each (start, steps, bytes, addition seconds) train simulated by dpsim.network step by step:
    on each of `nodes` nodes 3 transfers over the node's fast channel and 1 over its slow one,
    every transfer a flow of its own, the addition after each step; the time each train ends."""
    env = simpy.Environment()
    net = Network(env)
    fast = [[Channel(f"f{i}", FAST[0], FAST[1])] for i in range(nodes)]
    slow = [[Channel(f"s{i}", SLOW[0], SLOW[1])] for i in range(nodes)]
    ends = {}

    def run(k, start, steps, nbytes, add):
        yield env.timeout(start)
        sending = net.sending([("a", "b", nbytes)] * 4 * nodes,
                              [route for i in range(nodes) for route in (fast[i],) * 3 + (slow[i],)])
        for _ in range(steps):
            yield net.send(sending)
            if add:
                yield env.timeout(add)
        ends[k] = env.now
    for k, train in enumerate(trains):
        env.process(run(k, *train))
    env.run()
    return [ends[k] for k in range(len(trains))]


def by_duet(trains, nodes=4):
    """The same trains through dpsim.duet.Fluid, node 0's flows weighted by the nodes on channels
    of the nodes' bandwidth, joined at their starts; (ends, steps not simulated)."""
    fluid, ends, made = duet.Fluid([math.inf, FAST[0] * nodes, SLOW[0] * nodes]), {}, {}

    def until(t):
        while fluid.trains:
            done = fluid.run(until=t)
            if done is None:
                return
            ends[next(k for k in made if made[k] is done)] = fluid.now
    for k in sorted(range(len(trains)), key=lambda k: trains[k][0]):
        start, steps, nbytes, add = trains[k]
        until(start)
        fluid.rewind()
        made[k] = duet.Train([((1,), FAST[1], nbytes, nodes)] * 3 + [((2,), SLOW[1], nbytes, nodes)], steps,
                             lambda s, t, add=add: t + add)
        fluid.add(made[k], start)
    until(math.inf)
    return [ends[k] for k in range(len(trains))], fluid.skipped


CASES = {   # (start s, steps, bytes a step, addition s) of each train
    "same steps, apart": [(0.0, 3000, 2000.0, 0.0), (3.1e-6, 3000, 2000.0, 0.0)],
    "different steps, drifting through each other": [(0.0, 4000, 1600.0, 0.0), (2e-6, 3000, 1850.0, 3e-9)],
    "bytes longer than the latency": [(0.0, 300, 200e3, 0.0), (5e-5, 250, 150e3, 2e-7)],
    "one joins on the other's bytes": [(0.0, 2000, 1000.0, 1e-9), (8.01e-6, 2500, 1000.0, 0.0)],
    "three, one after another": [(0.0, 1500, 900.0, 0.0), (1e-6, 1000, 1300.0, 0.0), (2e-2, 800, 700.0, 5e-9)],
}


@pytest.mark.parametrize("case", CASES)
def test_the_duet_ends_trains_when_the_network_does(case):
    """Every train's end, from the fluid model with its skips and repeats, against
    dpsim.network simulating every step; and the skips happened (the long cases are not
    simulated step by step)."""
    trains = CASES[case]
    ends, skipped = by_duet(trains)
    assert ends == pytest.approx(by_network(trains), rel=1e-9)
    assert skipped > 0


def test_one_train_alone_is_its_steps_times_its_period():
    """A closed form: one train on idle channels, each step the slow channel's latency and bytes."""
    (end,), _ = by_duet([(0.0, 1000, 5000.0, 2e-9)])
    assert end == pytest.approx(1000 * (SLOW[1] + 5000.0 / SLOW[0] + 2e-9), rel=1e-12)


ZERO3 = {
    "v100, 4 nodes, 25 MiB units": lambda: v100s(4, **{"sync.strategy": "zero3"}),
    "v100, 8 nodes, 7 MiB units": lambda: v100s(8, **{"sync.strategy": "zero3", "sync.bucket_mib": 7}),
    "v100, 2 nodes, 2 MiB units, 1 MiB segments": lambda: v100s(2, **{"sync.strategy": "zero3", "sync.bucket_mib": 2,
                                                                        "sync.segment_mib": 1}),
    "k80 pcie, 3 nodes, host-staged": lambda: shared(**{"sync.strategy": "zero3", "sync.staging": "host"}),
}


@pytest.mark.parametrize("case", ZERO3)
def test_zero3_on_the_fast_path_is_the_detailed_answer(case):
    """Units of different sizes, so the gather's and the reduce-scatter's steps differ: iteration
    time, breakdown and bytes per GPU as every transfer simulated, and the duet took the steps."""
    sc = ZERO3[case]()
    fast, detailed = Engine(sc), Engine(sc, fast=False)
    assert_same(fast.run(), detailed.run())
    assert fast.path == "fast" and not fast.fell_back


class Noisy(Engine):
    """Another job's message from gpu1 to gpu9 at `at` seconds (once), `nbytes` long."""
    at, nbytes = 0.0, 1e7

    def iteration(self, k, phases):
        if k == 0:
            self.env.process(self.noise())
        yield from super().iteration(k, phases)

    def noise(self):
        yield self.env.timeout(self.at - self.env.now)
        yield self.machine.send([("gpu1", "gpu9", self.nbytes)], "other-job")


def first_join(sc):
    """When the first train joins the duet, on a quiet run of `sc`."""
    eng, joins = Engine(sc), []
    join = eng.machine.replay.duet.join
    eng.machine.replay.duet.join = lambda train: joins.append(eng.env.now) or join(train)
    eng.run()
    return joins[0]


def test_traffic_while_trains_run_reruns_on_the_detailed_path():
    """A message sent while the duet times a train: the run is redone on the detailed path, and
    its answer is the detailed one with the message."""
    sc = v100s(2, **{"sync.strategy": "zero3"})
    Noisy.at, Noisy.nbytes = first_join(sc) + 1e-9, 1e7
    noisy = Noisy(sc)
    out = noisy.run()
    assert noisy.fell_back and noisy.path == "detailed"
    assert_same(out, Noisy(sc, fast=False).run())


REFUSED = {
    "other traffic in flight": lambda sc: type("Busy", (Noisy,), {"at": 0.0, "nbytes": 1e11})(sc),
    "a trace": lambda sc: Engine(sc, Trace()),
    "one node": lambda sc: Engine(sc.with_overrides({"cluster.nodes": 1})),
    "peer-to-peer off": lambda sc: Engine(sc.with_overrides({"cluster.p2p": False})),
}


@pytest.mark.parametrize("case", REFUSED)
def test_where_the_duet_does_not_hold_the_run_is_the_detailed_one(case):
    """Other traffic on the links, a trace, steps the cluster's symmetry does not cover: no
    train is timed by the duet, and the answer is the detailed path's."""
    sc = v100s(2, **{"sync.strategy": "zero3"})
    eng = REFUSED[case](sc)
    out = eng.run()
    assert eng.machine.replay is None or not eng.machine.replay.duet.joined
    detailed = type(eng)(eng.sc, eng.trace, fast=False)
    assert_same(out, detailed.run())
