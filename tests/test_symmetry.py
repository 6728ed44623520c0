"""dpsim.symmetry (an all-to-all as one weighted flow per kind of transfer) against the
flow-by-flow simulation of every pair, and weighted max-min against copies of a flow."""
import random

import pytest
import simpy

from dpsim.cluster import Cluster
from dpsim.engine import Engine
from dpsim.hardware import LINKS
from dpsim.machine import AllPairs, Machine
from dpsim.network import Channel, Flow, Network, share_bandwidth
from dpsim import symmetry
from test_fastpath import assert_same, shared

CLUSTERS = {                    # nodes, GPUs per node, intra, inter, host link, GPUs per PCIe switch[, NICs, GPUDirect]
    "pcie, 2 per switch": (3, 4, "pcie3", "10gbe", "pcie3", 2),
    "DGX-1, 4 NICs, GPUDirect": (3, 8, "nvlink2", "ib-edr", "pcie3", 2, 4, True),
    "nvswitch, 3 NICs on the host": (2, 6, "nvswitch", "roce-100", "pcie4", 2, 3, False),
    "pcie, uneven switches": (2, 6, "pcie3", "ib-edr", "pcie3", 4),
    "nvlink mesh": (4, 4, "nvlink2", "ib-edr", "pcie3", 2),
    "nvswitch": (2, 8, "nvswitch", "25gbe", "pcie4", 8),
    "one node": (1, 4, "pcie3", "10gbe", "pcie3", 2),
}


def machine(spec, fast, overhead_us=0.0):
    env = simpy.Environment()
    nodes, g, intra, inter, host, per_switch, *nics = spec
    cluster = Cluster(nodes, g, LINKS[intra], LINKS[inter], LINKS[host], per_switch, *nics)
    net = Network(env)
    return env, net, Machine(env, net, cluster, 900.0, 50.0, fast=fast, message_overhead_us=overhead_us)


def every_pair(spec, nbytes, staged):
    """The all-to-all simulated transfer by transfer: (seconds, bytes per channel name, bytes per GPU)."""
    env, net, m = machine(spec, fast=False, overhead_us=20.0)

    def main():
        yield m.send(AllPairs(tuple(m.cluster.gpus), nbytes), staged=staged)
    env.run(env.process(main()))
    return env.now, {ch.name: ch.bytes_carried for ch in m.cluster.channels.values()}, dict(net.bytes_sent)


@pytest.mark.parametrize("staged", [False, True], ids=["direct", "staged"])
@pytest.mark.parametrize("name", CLUSTERS)
def test_one_flow_per_kind_gives_what_every_pair_gives(name, staged):
    spec = CLUSTERS[name]
    for nbytes in (3e5, 7.5e6):
        seconds, carried, sent = every_pair(spec, nbytes, staged)
        env, net, m = machine(spec, fast=True, overhead_us=20.0)

        def main():
            yield m.send(AllPairs(tuple(m.cluster.gpus), nbytes), staged=staged)
        env.run(env.process(main()))
        assert m.replayed_rounds == 1                     # it took the symmetric path
        assert env.now == pytest.approx(seconds, rel=1e-9)
        m.settle()                                        # its bytes are booked when read (dpsim.ledger)
        assert {ch.name: ch.bytes_carried for ch in m.cluster.channels.values()} == pytest.approx(carried, rel=1e-9)
        assert net.bytes_sent == pytest.approx(sent, rel=1e-12)


def test_the_all_to_all_is_contended_and_not_one_closed_form():
    """Kinds finish at different moments (else a single rate would do and the test above would
    check little): the slowest transfer of the all-to-all takes longer than the fastest."""
    spec = CLUSTERS["pcie, 2 per switch"]
    env, net, m = machine(spec, fast=False)
    arrivals = []

    def main():
        events = [net.transfer(m.route(a, b, False), a, b, 1e6) for a, b, _ in AllPairs(tuple(m.cluster.gpus), 1e6)]
        for e in events:
            e.callbacks.append(lambda _: arrivals.append(env.now))
        yield env.all_of(events)
    env.run(env.process(main()))
    assert max(arrivals) > 1.5 * min(arrivals)


def test_a_channel_kind_stands_for_one_channel_per_node():
    _, _, m = machine(CLUSTERS["pcie, 2 per switch"], fast=True)
    kinds = {symmetry.kind(m.cluster, key) for key in m.cluster.channels}
    assert len(kinds) * 3 == len(m.cluster.channels)            # 3 nodes, identical
    assert ("gpu1", "pcisw.0") in kinds and ("host", "nic.0") in kinds and ("nic.0", "net") in kinds


@pytest.mark.parametrize("overrides", [{"sync.strategy": "sharded-ps"}, {"sync.compression": "1bit"},
                                       {"sync.strategy": "sharded-ps", "sync.staging": "host"}],
                         ids=["sharded-ps", "1bit", "sharded-ps-staged"])
def test_engine_fast_and_detailed_agree_on_all_to_all_strategies(overrides):
    sc = shared(**overrides)                 # test_fastpath's contended cluster: 3 nodes x 4 GPUs
    fast, detailed = Engine(sc), Engine(sc, fast=False)
    assert_same(fast.run(), detailed.run())
    assert fast.path == "fast" and not fast.fell_back


def test_a_weighted_flow_gets_what_each_of_its_copies_gets():
    rng = random.Random(7)
    for _ in range(40):
        chans = [Channel(f"c{i}", rng.choice([1, 2, 5, 10]) * 1e9, 0.0) for i in range(rng.randint(2, 7))]
        routes = [rng.sample(chans, rng.randint(1, len(chans))) for _ in range(rng.randint(1, 6))]
        weights = [rng.randint(1, 4) for _ in routes]
        weighted = [Flow(r, 1.0, None, weight=w) for r, w in zip(routes, weights)]
        copies = [[Flow(r, 1.0, None) for _ in range(w)] for r, w in zip(routes, weights)]
        share_bandwidth(weighted)
        share_bandwidth([f for fs in copies for f in fs])
        for f, fs in zip(weighted, copies):
            assert all(c.rate == pytest.approx(f.rate, rel=1e-9) for c in fs)
