"""The fast path (Machine.repeat replays identical rounds) against the detailed path (every round
simulated): same results where it is taken, not taken where it would not be exact, and a cost
that grows no faster than GPUs x steps."""
import pytest
import simpy

from dpsim import bench, load_scenario, maxmin, network
from dpsim.bench import scenario as bench_scenario
from dpsim.cluster import Cluster
from dpsim.machine import Machine
from dpsim.engine import Engine
from dpsim.hardware import LINKS
from dpsim.network import Network
from dpsim.strategies import ring
from dpsim.trace import Trace


def shared(**overrides):
    """3 nodes x 4 K80s on PCIe 3, two GPUs per PCIe switch, 10 GbE between nodes. A flat ring
    gives every flow its own channels here, but staged through host memory the two GPUs under a
    switch share its uplink, and the cross-node rings of `hierarchical` share each NIC."""
    return load_scenario({
        "cluster": {"nodes": 3, "gpus_per_node": 4, "gpu": "k80", "intra": "pcie3", "inter": "10gbe",
                    "host_link": "pcie3", "gpus_per_pcie_switch": 2},
        "model": {"preset": "resnet20-cifar"},
        "training": {"iterations": 3, "warmup_iterations": 1},
        "sync": {"strategy": "ring", "bucket_mib": 0.3},
    }, overrides)


def assert_same(a, b):
    assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-9)
    assert a.bytes_sent_per_gpu == pytest.approx(b.bytes_sent_per_gpu, rel=1e-9)
    for phase, seconds in b.breakdown_s.items():
        assert a.breakdown_s[phase] == pytest.approx(seconds, rel=1e-9, abs=1e-9 * b.iteration_time_s)


CONTENDED = [
    {},
    {"sync.strategy": "hierarchical"},
    {"sync.compression": "fp16"},
    {"sync.staging": "host"},
    {"sync.overlap": False},
    {"cluster.intra": "nvlink2", "sync.strategy": "hierarchical"},
    {"data.source": "real", "compute.jitter": 0.2, "cluster.gpu_speed": [1.0, 0.6]},
]


@pytest.mark.parametrize("overrides", CONTENDED, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "ring")
def test_fast_path_gives_the_detailed_answer_under_contention(overrides):
    sc = shared(**overrides)
    fast, detailed = Engine(sc), Engine(sc, fast=False)
    assert_same(fast.run(), detailed.run())
    assert fast.path == "fast" and detailed.path == "detailed"
    assert Engine(sc).sync_alone() == pytest.approx(Engine(sc, fast=False).sync_alone(), rel=1e-9)


def test_the_contended_cases_do_contend():
    """Some channel carries two transfers of one ring step at the same time (else the test above
    would only check uncontended rounds)."""
    for overrides in ({"sync.staging": "host"}, {"sync.strategy": "hierarchical"}):
        trace = Trace()
        Engine(shared(**overrides), trace).run()
        spans = sorted((s for s in trace.spans if ">" in s.lane), key=lambda s: (s.lane, s.start))
        assert any(a.lane == b.lane and b.start < a.end for a, b in zip(spans, spans[1:])), overrides


def test_trace_takes_the_detailed_path_with_every_span():
    sc = shared()
    fast, detailed = Engine(sc, Trace()), Engine(sc, Trace(), fast=False)
    assert_same(fast.run(), detailed.run())
    assert fast.path == "detailed"
    assert fast.trace.spans == detailed.trace.spans
    steps = 2 * (sc.gpus - 1) * len(fast.work.buckets) * 4          # 4 iterations
    assert sum(s.name == "all-gather" and s.lane.startswith("gpu0>") for s in fast.trace.spans) == steps / 2


WITHOUT_IDENTICAL_ROUNDS = [
    {"sync.strategy": "recursive-doubling"}, {"sync.strategy": "halving-doubling"}, {"sync.strategy": "mpi"},
    {"sync.strategy": "ps"}, {"sync.strategy": "ps", "sync.ps_location": "cpu"},
    {"sync.strategy": "ps", "sync.ps_location": "cpu", "sync.update_location": "cpu"},
    {"sync.strategy": "sharded-ps"}, {"sync.compression": "1bit"},
    {"sync.strategy": "dataparallel", "cluster.nodes": 1},
]


@pytest.mark.parametrize("overrides", WITHOUT_IDENTICAL_ROUNDS, ids=lambda o: ",".join(f"{v}" for v in o.values()))
def test_strategies_without_identical_rounds_replay_the_steps_they_have_seen(overrides):
    """Their steps differ inside one sync, but the same bucket's steps come back every
    iteration: Machine.send remembers them."""
    sc = shared(**{"sync.staging": "host", **overrides})
    fast = Engine(sc)
    assert_same(fast.run(), Engine(sc, fast=False).run())
    assert fast.path == "fast" and fast.machine.replayed_rounds > 0


def small_ring(fast):
    env = simpy.Environment()
    cluster = Cluster(2, 4, LINKS["pcie3"], LINKS["10gbe"], LINKS["pcie3"], 2)
    net = Network(env)
    return env, net, Machine(env, net, cluster, 240.0, 50.0, fast=fast)


def test_traffic_in_flight_when_a_ring_starts_means_no_replay():
    """A host-to-GPU copy over gpu0's PCIe path is still running when the all-reduce ends."""
    arrival = {}
    for fast in (True, False):
        env, net, machine = small_ring(fast)

        def main():
            copy = machine.copy([("host0", "gpu0", 2e9)])
            yield from ring.allreduce(machine, machine.cluster.gpus, 40e6)
            arrival[fast] = (env.now, dict(net.bytes_sent))
            assert not copy.triggered
        env.run(env.process(main()))
        assert machine.replayed_rounds == 0
    assert arrival[True][0] == pytest.approx(arrival[False][0], rel=1e-12)
    assert arrival[True][1] == arrival[False][1]


class Noisy(Engine):
    """Every iteration, another job's message from gpu1 to gpu9 (across node 0's NIC) starts a
    quarter of the way into the gradient sync: while a replayed ring stands in for real rounds."""

    def iteration(self, k, phases):
        self.env.process(self.noise())
        yield from super().iteration(k, phases)

    def noise(self):
        yield self.env.timeout(self.work.forward_s + self.work.backward_s + self.sync_s / 4)
        yield self.machine.send([("gpu1", "gpu9", 1e7)], "other-job")


@pytest.mark.parametrize("strategy", ["ring", "halving-doubling", "sharded-ps"])
def test_traffic_during_a_replay_reruns_on_the_detailed_path(strategy):
    sc = shared(**{"sync.bucket_mib": 0, "sync.strategy": strategy})   # one bucket, after backward
    Noisy.sync_s = Engine(sc).sync_alone()
    noisy, detailed = Noisy(sc), Noisy(sc, fast=False)
    out = noisy.run()
    assert noisy.fell_back and noisy.path == "detailed"
    assert_same(out, detailed.run())
    # and the noise matters, so a replay that ignored it would have given another answer
    assert out.iteration_time_s > Engine(sc).run().iteration_time_s * 1.01


def work_counts(gpus, monkeypatch):
    """SimPy events processed, and flow-channel crossings handed to share_bandwidth, for one
    iteration of the bench's ring case."""
    crossings = 0
    share = network.share_bandwidth

    def counted(flows):
        nonlocal crossings
        crossings += sum(len(f.route) for f in flows)
        share(flows)
    monkeypatch.setattr(network, "share_bandwidth", counted)
    eng = Engine(bench_scenario(gpus).with_overrides({"training.iterations": 1}))
    events, step = 0, eng.env.step

    def counted_step():
        nonlocal events
        events += 1
        step()
    eng.env.step = counted_step
    eng.run()
    assert eng.path == "fast"
    return events, crossings


def test_cost_grows_no_faster_than_gpus_times_steps(monkeypatch):
    per_gpu_step = []
    for n in (16, 64, 256):
        events, crossings = work_counts(n, monkeypatch)
        gpu_steps = n * 2 * (n - 1)
        per_gpu_step.append((events / gpu_steps, crossings / gpu_steps))
    for small, big in zip(per_gpu_step, per_gpu_step[1:]):
        assert big[0] <= small[0] and big[1] <= small[1], per_gpu_step


# ---------------------------------------------------------------- symmetric steps (dpsim.symmetry)

def v100s(nodes, **overrides):
    """The bench's cluster, small: V100s, 8 a node on NVLink 2, EDR between nodes; 2 iterations."""
    return bench_scenario(8 * nodes).with_overrides({"training.iterations": 2, "training.warmup_iterations": 1,
                                                     **overrides})


SYMMETRIC_CLUSTERS = {
    "v100, 4 nodes": lambda **o: v100s(4, **o),
    "v100, 2 nodes, 4 NICs, GPUDirect": lambda **o: v100s(2, **{"cluster.nics_per_node": 4,
                                                                  "cluster.gpudirect": "on", **o}),
    "pcie, 4 nodes, host-staged": lambda **o: shared(**{"cluster.nodes": 4, "sync.staging": "host", **o}),
}
EVERY_STRATEGY = list(bench.STRATEGIES.items())


@pytest.mark.parametrize("cluster", SYMMETRIC_CLUSTERS)
@pytest.mark.parametrize("name, overrides", EVERY_STRATEGY, ids=[s for s, _ in EVERY_STRATEGY])
def test_every_strategy_gives_the_detailed_answer_with_symmetric_steps(name, overrides, cluster):
    """Steps whose nodes all do the same (rings, doubling's exchanges, a parameter server's
    gather, all-to-alls) are simulated one flow per kind on the fast path: the same iteration
    time, breakdown and bytes per GPU as every transfer simulated."""
    if name == "dataparallel":
        overrides = {**overrides, "cluster.nodes": 1}
    sc = SYMMETRIC_CLUSTERS[cluster](**overrides)
    fast, detailed = Engine(sc), Engine(sc, fast=False)
    assert_same(fast.run(), detailed.run())
    # ZeRO-3 gathers the next unit while the last one's gradient is reduce-scattered: the two
    # share the network and are timed together (dpsim.duet), still on the fast path
    assert fast.path == "fast" and not fast.fell_back


@pytest.mark.parametrize("name", ["ring", "halving-doubling", "recursive-doubling", "ps", "ps-cpu", "sharded-ps",
                                  "hierarchical", "1bit"])
def test_the_bench_strategies_take_symmetric_steps(name):
    eng = Engine(v100s(4, **bench.STRATEGIES[name]))
    eng.run()
    assert eng.machine.replay.symmetric_steps > 0


def test_a_ring_that_nodes_do_not_share_alike_is_simulated_transfer_by_transfer():
    """GPUs in a scrambled order: node 0 sends to node 2, node 1 to node 0, ...; no renumbering
    of the nodes keeps the step, so it is not one flow per kind, and the answer is still the
    detailed one."""
    sc = v100s(4)
    scrambled = [f"gpu{i}" for i in (0, 9, 18, 27, 1, 10, 19, 28, 2, 11, 20, 29, 3, 12, 21, 30,
                                     4, 13, 22, 31, 5, 14, 23, 24, 6, 15, 16, 25, 7, 8, 17, 26)]
    times = []
    for fast in (True, False):
        eng = Engine(sc, fast=fast)

        def main():
            yield from ring.allreduce(eng.machine, scrambled, 1e8)
        eng.env.run(eng.env.process(main()))
        times.append((eng.env.now, eng.machine.bytes_sent()))
        if fast:
            assert eng.machine.replay.symmetric_steps == 0 and eng.machine.replayed_rounds > 0
    assert times[0][0] == pytest.approx(times[1][0], rel=1e-12)
    assert times[0][1] == pytest.approx(times[1][1], rel=1e-12)


def test_bytes_of_replayed_steps_are_owed_until_read():
    """Machine.sent(rank) counts the bytes replays owe; settle() books them on the counters."""
    eng = Engine(v100s(2))

    def main():
        for _ in range(3):
            yield from ring.allreduce(eng.machine, eng.cluster.gpus, 16e6)
    eng.env.run(eng.env.process(main()))
    expected = 3 * 2 * 15 / 16 * 16e6                        # 2(n-1)/n m, three times
    assert eng.net.bytes_sent.get("gpu5", 0.0) < expected     # owed, not yet booked
    assert eng.machine.sent("gpu5") == pytest.approx(expected, rel=1e-12)
    eng.machine.settle()
    assert eng.net.bytes_sent == pytest.approx({g: expected for g in eng.cluster.gpus}, rel=1e-12)


@pytest.mark.parametrize("name", ["ring", "hierarchical", "halving-doubling", "ps", "sharded-ps", "1bit", "byteps"])
def test_flows_simulated_do_not_grow_with_the_nodes(name, monkeypatch):
    """Symmetric steps simulate node 0's flows (and node 1's), whatever the number of nodes: the
    flow-channel crossings put in flight (dpsim.maxmin.FlowTable.add) at 256 nodes are less than
    twice those at 32 (8 times the GPUs; what grows is the doubling's log2 n steps), where
    every transfer simulated would be 8 times or more."""
    crossings = []
    for gpus in (256, 2048):
        counted = 0

        def count(table, hops, *rest, add=maxmin.FlowTable.add):
            nonlocal counted
            counted += int((hops > 0).sum())
            return add(table, hops, *rest)
        monkeypatch.setattr(maxmin.FlowTable, "add", count)
        eng = Engine(bench_scenario(gpus).with_overrides({"training.iterations": 1, **bench.STRATEGIES[name]}))
        eng.run()
        monkeypatch.undo()
        crossings.append(counted)
    assert 0 < crossings[1] < 2 * crossings[0], crossings
