"""The fast path (Machine.repeat replays identical rounds) against the detailed path (every round
simulated): same results where it is taken, not taken where it would not be exact, and a cost
that grows no faster than GPUs x steps."""
import pytest
import simpy

from dpsim import load_scenario, network
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
