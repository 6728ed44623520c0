"""Ranks sharing devices (dpsim.sharing) against figures written out here: each rank at its
share of its device (N ranks on C devices at C/N speed when C divides N), a busy-polling
receiver costing each message half a time slice whenever it is not running, and nothing
changed while every rank has a device of its own."""
import dataclasses

import pytest

import dpsim
from dpsim import analytic, compute, config, sharing
from dpsim.engine import Engine

from dpsim_helpers import star

V100 = dpsim.load_scenario("d2l-ps-vs-ring").gpu_spec()          # the preset star() scenarios use


def shared(n, devices, **sync):
    data = star(n, 12.5, 3.0, params=8_000_000, **sync)
    data["cluster"]["devices_per_node"] = devices
    return data


# per rank, how many times slower than alone, written out: rank r on device r mod ceil(C), the
# k ranks of a device sharing it, and C / ceil(C) of each device while all are busy
BY_HAND = [(4, 2, [2, 2, 2, 2]), (3, 2, [1, 2, 2]), (4, 1, [4, 4, 4, 4]), (2, 4, [1, 1]), (4, 4, [1, 1, 1, 1]),
           (2, 1.6, [1.25, 1.25]), (3, 1.5, [4 / 3, 8 / 3, 8 / 3]), (1, 1.5, [1])]


@pytest.mark.parametrize("n, devices, factors", BY_HAND)
def test_each_rank_computes_at_its_share_of_a_device(n, devices, factors):
    sc = dpsim.load_scenario(shared(n, devices))
    alone = compute.compute_time_s(1e9, 32, V100.fp32_tflops, 0.6, 8.0)    # star(): 1 GFLOP/sample, batch 32
    res = dpsim.simulate(sc)
    mean, worst = sum(factors) / n, max(factors)
    assert res.breakdown_s["compute"] == pytest.approx(alone * mean, rel=0.01)
    assert res.breakdown_s["straggler_wait"] == pytest.approx(alone * (worst - mean), rel=0.01, abs=1e-9)
    assert res.breakdown_s["update"] == pytest.approx(8_000_000 * 20 / (V100.mem_bw_gbs * 1e9) * worst, rel=0.01)


# (ranks, devices, node GB/s) -> each rank's update bandwidth, written out: the busy devices
# (at most one per device) split the node's memory bus, never above the device's own 900 GB/s
MEMORY_BY_HAND = [(2, 2, 1000.0, 500.0), (4, 2, 1000.0, 500.0), (3, 4, 1500.0, 500.0), (1, 1, 1000.0, 900.0),
                  (2, 2, 0.0, 900.0), (4, 0, 2000.0, 500.0)]


@pytest.mark.parametrize("n, devices, node, per_rank", MEMORY_BY_HAND)
def test_memory_bound_work_shares_the_nodes_memory_bus(n, devices, node, per_rank):
    data = shared(n, devices)
    data["cluster"]["node_mem_bw_gbs"] = node
    res = dpsim.simulate(data)
    worst = max(sharing.rank_factors(n, devices)) if devices else 1.0
    assert res.breakdown_s["update"] == pytest.approx(8_000_000 * 20 / (per_rank * 1e9) * worst, rel=0.01)


def test_n_ranks_on_c_devices_all_computing_run_at_c_over_n_speed():
    for n, c in [(4, 2), (6, 3), (8, 2), (6, 2)]:
        factors = sharing.rank_factors(n, c)
        assert factors == [n / c] * n


@pytest.mark.parametrize("busy_poll", [False, True])
@pytest.mark.parametrize("n, devices", [(4, 2), (3, 2), (4, 1)])
def test_a_ring_on_shared_devices_matches_its_closed_form(n, devices, busy_poll):
    data = shared(n, devices, busy_poll=busy_poll)
    data["cluster"].update(shared_memory_messages=True, timeslice_us=2000.0)
    m = 4 * 8_000_000
    expected = analytic.shared_ring(n, m, 6e-6, 1 / 12.5e9, 3 / (V100.mem_bw_gbs * 1e9), devices,
                                    2e-3, busy_poll, shared_memory=True)
    assert Engine(dpsim.load_scenario(data)).sync_alone() == pytest.approx(expected, rel=0.01)


def test_busy_polling_costs_half_a_timeslice_per_dependent_message_when_half_the_ranks_wait():
    # 4 ranks on 2 cores, two to a core: a receiver is running half the time, so a message waits
    # 0.5 x 3 ms / 2; a ring of 4 sends 2 x 3 messages one after another.
    spin, sleep = (Engine(dpsim.load_scenario(shared(4, 2, busy_poll=b))).sync_alone() for b in (True, False))
    assert spin - sleep == pytest.approx(6 * 0.5 * 3e-3 / 2, rel=1e-6)


def test_the_speedup_of_a_compute_bound_job_is_capped_by_the_devices():
    data = shared(4, 2)
    data["model"].update(params=1000, flops_per_sample=1e11)               # nothing to synchronise
    res = dpsim.simulate(data)
    assert res.speedup == pytest.approx(2.0, rel=0.01)


@pytest.mark.parametrize("name", config.builtin_names())
def test_one_device_per_rank_changes_nothing(name):
    sc = dpsim.load_scenario(name, {"training.iterations": 2, "training.warmup_iterations": 1})
    explicit = sc.with_overrides({"cluster.devices_per_node": sc.cluster.gpus_per_node, "sync.busy_poll": True,
                                  "cluster.shared_memory_messages": True})
    a, b = dpsim.simulate(sc), dpsim.simulate(explicit)
    assert dataclasses.replace(a, scenario=None) == dataclasses.replace(b, scenario=None)
