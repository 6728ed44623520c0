"""The event simulation against the closed forms of dpsim.analytic, where nothing contends
beyond what the formula itself accounts for; and the textbook's qualitative claims."""
import pytest

from dpsim import analytic, load_scenario, sweep
from dpsim.engine import Engine
from dpsim.hardware import GPUS

from dpsim_helpers import d2l_transfers_only, star

V100_GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)


def sync_seconds(data):
    return Engine(load_scenario(data)).sync_alone()


def test_ring_100mb_on_8_gpus_at_10gbs():
    m, n = 100e6, 8
    simulated = sync_seconds(star(n, 10.0, 5.0, params=int(m / 4)))
    # Written out from the textbook: 2(n-1) steps of m/n bytes at 10 GB/s.
    by_hand = 2 * (n - 1) * (2 * 5e-6 + (m / n) / 10e9) + (n - 1) / n * m * V100_GAMMA
    assert simulated == pytest.approx(by_hand, rel=0.01)
    assert simulated == pytest.approx(analytic.ring(n, m, 10e-6, 1 / 10e9, V100_GAMMA), rel=0.01)


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("strategy, formula", [
    ("ring", analytic.ring), ("ps", analytic.ps), ("sharded-ps", analytic.sharded_ps),
    ("recursive-doubling", analytic.recursive_doubling), ("halving-doubling", analytic.halving_doubling),
    ("mpi", analytic.mpi)])
def test_strategies_match_closed_forms(strategy, formula, n):
    m = 64e6
    simulated = sync_seconds(star(n, 12.5, 3.0, params=int(m / 4), strategy=strategy))
    assert simulated == pytest.approx(formula(n, m, 6e-6, 1 / 12.5e9, V100_GAMMA), rel=0.01)


@pytest.mark.parametrize("n", [2, 4, 6])
def test_ps_on_cpu_matches_closed_form(n):
    m, bw = 64e6, 12.5e9
    data = star(n, 12.5, 3.0, params=int(m / 4), strategy="ps", ps_location="cpu")
    data["cluster"]["host_mem_bw_gbs"] = 40.0
    # All n GPUs share the switch's one uplink to the host: each flow gets bw / n.
    expected = analytic.ps_cpu(n, m, 6e-6, n / bw, 3 / 40e9)
    assert sync_seconds(data) == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("nodes, g", [(2, 4), (4, 2), (3, 4)])
def test_hierarchical_matches_closed_form(nodes, g):
    m = 64e6
    data = star(g, 100.0, 1.0, params=int(m / 4), strategy="hierarchical")
    data["cluster"].update(nodes=nodes, inter={"bandwidth_gbs": 5.0, "latency_us": 20.0, "kind": "ethernet"},
                           host_link={"bandwidth_gbs": 100.0, "latency_us": 1.0})
    # Across nodes (no GPUDirect over Ethernet) the route is gpu>switch>host>nic>net>nic>host>switch>gpu:
    # 6 PCIe hops + 2 network hops.
    alpha_inter = 6 * 1e-6 + 2 * 20e-6
    expected = analytic.hierarchical(nodes, g, m, 2e-6, 1 / 100e9, alpha_inter, 1 / 5e9, V100_GAMMA)
    assert sync_seconds(data) == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("n", [2, 4])
def test_dataparallel_sync_is_a_pipelined_broadcast_and_reduce(n):
    m = 64e6
    simulated = sync_seconds(star(n, 12.5, 3.0, params=int(m / 4), strategy="dataparallel"))
    expected = analytic.chain(n, m, 6e-6, 1 / 12.5e9) + analytic.chain(n, m, 6e-6, 1 / 12.5e9, V100_GAMMA)
    assert simulated == pytest.approx(expected, rel=0.01)


def test_d2l_lecture_figures():
    """d2l.ai "Parameter Servers": 160 MB, 4 GPUs, 16 GB/s PCIe: 60 ms on GPU 0, 80 ms on the
    CPU, 15 ms sharded. The lecture ignores latency and the cost of adding, so we make both tiny."""
    base = d2l_transfers_only()
    for overrides, ms in [({"sync.ps_location": "gpu0"}, 60), ({"sync.ps_location": "cpu"}, 80),
                          ({"sync.strategy": "sharded-ps"}, 15)]:
        assert Engine(base.with_overrides(overrides)).sync_alone() * 1e3 == pytest.approx(ms, rel=0.01)


def test_ps_on_gpu0_slows_down_with_more_gpus_while_sharded_and_ring_do_not():
    def sync_times(strategy):
        return [Engine(load_scenario(star(n, 10.0, 5.0, strategy=strategy))).sync_alone() for n in (2, 4, 8)]

    ps = sync_times("ps")
    assert ps[0] < ps[1] < ps[2] and ps[2] > 5 * ps[0]          # linear in n
    for strategy in ("ring", "sharded-ps"):
        t = sync_times(strategy)
        assert max(t) < 1.8 * t[0]                               # bounded by 2m/B
        assert t[2] < ps[2] / 3


def test_ps_speedup_falls_with_gpus_in_a_sweep():
    data = star(8, 10.0, 5.0, strategy="ps")
    data["model"]["flops_per_sample"] = 1e8
    data["training"] = {"batch_per_gpu": 32}
    runs = sweep(data, gpus=[2, 4, 8])
    eff = [r.scaling_efficiency for r in runs]
    assert eff[0] > eff[1] > eff[2]
    ring = sweep({**data, "sync": {"strategy": "ring", "bucket_mib": 0}}, gpus=[2, 4, 8])
    assert ring[2].speedup > runs[2].speedup


def test_max_t1_t2_rule_with_fine_buckets():
    """With gradients streamed in small buckets, backward (t1) and sync (t2) overlap: a step
    costs about forward + max(backward, sync), not forward + backward + sync."""
    data = star(4, 10.0, 1.0, params=50_000_000)
    data["model"].update(flops_per_sample=3e9, layers=200)
    data["training"] = {"batch_per_gpu": 16}
    data["sync"].update(bucket_mib=2, overlap=True)
    sc = load_scenario(data)
    eng = Engine(sc)
    w = eng.work
    t2 = Engine(sc).sync_alone()
    it = eng.run().iteration_time_s - w.update_s - w.forward_s
    assert it == pytest.approx(analytic.iteration_time(w.backward_s, t2), rel=0.05)
    no_overlap = Engine(sc.with_overrides({"sync.overlap": False})).run().iteration_time_s - w.update_s - w.forward_s
    assert no_overlap == pytest.approx(analytic.iteration_time(w.backward_s, t2, overlap=False), rel=0.01)


@pytest.mark.parametrize("codec_gbs", [0.0, 20.0])
def test_onebit_kernels_cost_their_bytes_at_the_codec_bandwidth(codec_gbs):
    n, m, launch_us = 4, 40e6, 10.0
    data = star(n, 12.5, 3.0, params=int(m / 4), strategy="ring", compression="1bit")
    data["compute"] = {"kernel_launch_us": launch_us, "codec_gbs": codec_gbs}
    eng = Engine(load_scenario(data))
    eng.sync_alone()
    v, bw = m / 4, (codec_gbs or GPUS["v100"].mem_bw_gbs) * 1e9
    # quantise 12.125 B/value (2 launches); decode, sum, requantise the own stripe (n + 1);
    # decode all stripes 4.125 B/value (n launches): dpsim/strategies/onebit.py's counts
    by_hand = (12.125 * v / bw + 2 * launch_us * 1e-6) + ((8.125 * (n - 1) + 12.125) * v / n / bw
                                                          + (n + 1) * launch_us * 1e-6) \
        + (4.125 * v / bw + n * launch_us * 1e-6)
    assert eng.machine.codec_s == pytest.approx(by_hand, rel=1e-9)


def by_hand_pipeline(transfer, add, k):
    """k segments through two stages, segment by segment: segment i has arrived at
    (i + 1) transfer / k, and is added once it has arrived and segment i - 1 is added."""
    added = 0.0
    for i in range(k):
        added = max((i + 1) * transfer / k, added) + add / k
    return added


@pytest.mark.parametrize("transfer, add, k", [(1.0, 0.5, 4), (0.5, 1.0, 4), (1.0, 1.0, 1), (2.0, 0.1, 7)])
def test_pipelined_step_is_the_two_stage_pipeline(transfer, add, k):
    assert analytic.pipelined(transfer, add, k * 100, 100) == pytest.approx(by_hand_pipeline(transfer, add, k))
    assert analytic.pipelined(transfer, add, k * 100, 0) == transfer + add      # the textbook step


@pytest.mark.parametrize("n", [2, 3, 5, 8])
@pytest.mark.parametrize("strategy, formula", [
    ("ring", analytic.ring), ("sharded-ps", analytic.sharded_ps), ("halving-doubling", analytic.halving_doubling)])
def test_pipelined_strategies_match_closed_forms(strategy, formula, n):
    """sync.segment_mib = 1 with additions as slow as the transfers (a 40 GB/s memory, 12.5 GB/s
    links): the event simulation against the pipelined closed forms, and faster than textbook."""
    m = 64e6
    data = star(n, 12.5, 3.0, params=int(m / 4), strategy=strategy, segment_mib=1.0)
    data["cluster"]["gpu"] = {"fp32_tflops": 15.7, "mem_bw_gbs": 40.0}
    gamma = 3 / 40e9
    simulated = sync_seconds(data)
    assert simulated == pytest.approx(formula(n, m, 6e-6, 1 / 12.5e9, gamma, segment=2 ** 20), rel=0.01)
    textbook = formula(n, m, 6e-6, 1 / 12.5e9, gamma)
    assert simulated < 0.9 * textbook
