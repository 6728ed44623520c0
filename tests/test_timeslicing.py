"""What time-slicing costs ranks that share a core (dpsim.sharing: cluster.timeslice_overhead,
compute.shared_jitter) and calibrate's fits of both from its oversubscribed probe: dpsim's
engine against the closed forms, and the fits recovering what dpsim's engine was given."""
import math

import pytest

import dpsim
from dpsim import sharing
from course import fit

CPU = {"cluster": {"gpu": {"fp32_tflops": 0.3, "mem_bw_gbs": 20.0}, "cpu_cores": 2, "devices_per_node": 2.0,
                   "intra": {"bandwidth_gbs": 5.0, "latency_us": 1.0}, "host_link": {"bandwidth_gbs": 5.0, "latency_us": 1.0}},
       "model": {"params": 100_000, "flops_per_sample": 6e5, "layers": 2},
       "sync": {"strategy": "ring", "bucket_mib": 0.0, "overlap": False},
       "training": {"iterations": 3, "warmup_iterations": 0}}


def compute_s(ranks, **keys):
    sets = {"cluster.gpus_per_node": ranks, "cluster.gpus_per_pcie_switch": ranks, **keys}
    return dpsim.simulate(CPU, sets).breakdown_s["compute"]


def test_shares_device_marks_the_ranks_of_crowded_devices():
    assert sharing.shares_device(3, 2.0) == [True, False, True]          # rank r on device r mod 2
    assert sharing.shares_device(4, 1.9) == [True] * 4
    assert sharing.shares_device(2, 1.9) == [False, False]
    assert sharing.shares_device(4, 0) == [False] * 4                       # one device per rank


@pytest.mark.parametrize("overhead", [0.1, 0.25])
def test_timeslice_overhead_slows_only_ranks_that_share_a_core(overhead):
    alone = compute_s(1)
    assert compute_s(2, **{"cluster.timeslice_overhead": overhead}) == pytest.approx(alone)   # a core each
    # 4 ranks on 2 cores: each at half speed, then the overhead
    assert compute_s(4, **{"cluster.timeslice_overhead": overhead}) == pytest.approx(2 * alone * (1 + overhead))
    # 3 ranks: the step waits for the two sharing a core; the rank alone is not slowed
    three = dpsim.simulate(CPU, {"cluster.gpus_per_node": 3, "cluster.gpus_per_pcie_switch": 3,
                                 "cluster.timeslice_overhead": overhead})
    assert three.iteration_time_s > dpsim.simulate(CPU, {"cluster.gpus_per_node": 3,
                                                         "cluster.gpus_per_pcie_switch": 3}).iteration_time_s
    assert compute_s(3, **{"cluster.timeslice_overhead": overhead}) == pytest.approx(
        (2 * 2 * (1 + overhead) + 1) / 3 * alone)


def test_expected_max_normal_matches_the_closed_forms():
    assert fit.expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert fit.expected_max_normal(3) == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-9)
    assert fit.expected_max_normal(4) == pytest.approx(1.0294, abs=1e-4)      # Tippett (1925)


def test_dpsim_shared_jitter_makes_the_straggler_wait_the_fit_reads():
    """4 ranks on 2 cores drawing shared_jitter 0.1 (compute.jitter 0): over many iterations
    they wait what fit_shared_jitter turns back into about 0.1; with 2 ranks on 2 cores
    (nobody shares) the same key draws nothing."""
    keys = {"compute.shared_jitter": 0.1, "training.iterations": 400}
    r = dpsim.simulate(CPU, {"cluster.gpus_per_node": 4, "cluster.gpus_per_pcie_switch": 4, **keys})
    b = r.breakdown_s
    assert fit.fit_shared_jitter(b["straggler_wait"], b["compute"], 4) == pytest.approx(0.1, rel=0.15)
    two = dpsim.simulate(CPU, {"cluster.gpus_per_node": 2, "cluster.gpus_per_pcie_switch": 2, **keys})
    assert two.breakdown_s["straggler_wait"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("overhead", [0.0, 0.08, 0.3])
def test_fit_timeslice_overhead_recovers_what_dpsim_was_given(overhead):
    capacity, alone = 1.9, 4e-3
    factors, shared = sharing.rank_factors(4, capacity), sharing.shares_device(4, capacity)
    together = [alone * f * (1 + overhead) for f in factors]
    assert fit.fit_timeslice_overhead(alone, together, factors, shared) == pytest.approx(overhead, abs=1e-12)
    faster = [alone * f * 0.9 for f in factors]                  # faster than the share: no overhead
    assert fit.fit_timeslice_overhead(alone, faster, factors, shared) == 0.0


def codec_closed_form(values, n, launch_s, bytes_per_s, share):
    """1-bit's kernels per exchange (dpsim/strategies/onebit.py's docstring): 2n + 3 launches and
    (12.125 + 8.125 (n-1)/n + 12.125/n + 4.125) bytes per value, on a device shared `share` ways."""
    launches = 2 + (n + 1) + n
    touched = (12.125 + (8.125 * (n - 1) + 12.125) / n + 4.125) * values
    return (launches * launch_s + touched / bytes_per_s) * share


@pytest.mark.parametrize("overhead", [0.0, 0.2])
def test_kernels_of_ranks_sharing_a_core_pay_the_timeslice_overhead_as_compute_does(overhead):
    """The codec's kernels are device work like forward and backward: 4 ranks on 2 cores run
    them at half speed and (1 + overhead) slower still; 2 ranks with a core each pay neither."""
    keys = {"sync.compression": "1bit", "compute.codec_gbs": 2.0, "compute.kernel_launch_us": 10.0,
            "cluster.timeslice_overhead": overhead, "training.iterations": 1}
    per_iteration = {}
    for n in (2, 4):
        r = dpsim.simulate(CPU, {"cluster.gpus_per_node": n, "cluster.gpus_per_pcie_switch": n, **keys})
        per_iteration[n] = r.breakdown_s["compression"]
    values = CPU["model"]["params"]
    assert per_iteration[2] == pytest.approx(codec_closed_form(values, 2, 10e-6, 2e9, 1.0), rel=1e-9)
    assert per_iteration[4] == pytest.approx(codec_closed_form(values, 4, 10e-6, 2e9, 2.0) * (1 + overhead), rel=1e-9)


@pytest.mark.parametrize("compression", ["1bit", "none"])
def test_the_update_after_a_codec_runs_update_after_codec_slower(compression):
    """A step whose sync ran the codec's kernels updates (1 + update_after_codec) slower; a
    step without a codec, or one rank (no sync), updates as before."""
    keys = {"sync.compression": compression, "training.iterations": 2, "cluster.gpus_per_node": 2,
            "cluster.gpus_per_pcie_switch": 2}
    plain = dpsim.simulate(CPU, keys).breakdown_s["update"]
    slower = dpsim.simulate(CPU, {**keys, "compute.update_after_codec": 0.4}).breakdown_s["update"]
    assert slower == pytest.approx(plain * (1.4 if compression == "1bit" else 1.0), rel=1e-12)
    one = {**keys, "cluster.gpus_per_node": 1, "cluster.gpus_per_pcie_switch": 1}
    assert dpsim.simulate(CPU, {**one, "compute.update_after_codec": 0.4}).breakdown_s["update"] == \
        pytest.approx(dpsim.simulate(CPU, one).breakdown_s["update"], rel=1e-12)


def test_fit_update_after_codec_is_the_probes_ratio_never_below_zero():
    assert fit.fit_update_after_codec(1.4e-3, 1.96e-3) == pytest.approx(0.4)
    assert fit.fit_update_after_codec(1.4e-3, 1.3e-3) == 0.0
