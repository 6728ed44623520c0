"""compute.samples_per_s (a measured one-GPU rate instead of an efficiency) and
training.global_batch (strong scaling), against figures worked out here by hand."""
import pytest

import dpsim
from dpsim import config
from dpsim.simulation import with_gpus

from dpsim_helpers import star

V100 = dpsim.load_scenario("d2l-ps-vs-ring").gpu_spec()        # star()'s default GPU


def one_gpu(**compute):
    data = star(1, params=8_000_000)
    data["compute"] = compute
    data["training"] = {"batch_per_gpu": 32}
    return data


@pytest.mark.parametrize("rate, batch, precision, overhead_ms", [
    (500.0, 32, "fp32", 0.0), (2400.0, 32, "fp16", 1.5), (120.0, 128, "fp32", 0.0)])
def test_a_measured_rate_is_reproduced_on_one_gpu(rate, batch, precision, overhead_ms):
    data = one_gpu(samples_per_s=rate, precision=precision, overhead_ms=overhead_ms)
    data["training"]["batch_per_gpu"] = batch
    res = dpsim.simulate(data)
    assert res.throughput_samples_per_s == pytest.approx(rate, rel=1e-9)


def test_at_another_batch_the_rate_follows_the_half_batch_curve():
    # measured 500 samples/s at batch 32; at batch 8 forward+backward takes (8 + 8)/(32 + 8) of
    # batch 32's (half_batch 8), the update (20 B x 8 M at 900 GB/s) the same
    update = 20 * 8_000_000 / (V100.mem_bw_gbs * 1e9)
    fb_32 = 32 / 500.0 - update
    data = one_gpu(samples_per_s=500.0, rate_batch=32, half_batch=8.0)
    data["training"]["batch_per_gpu"] = 8
    res = dpsim.simulate(data)
    assert res.iteration_time_s == pytest.approx(fb_32 * 16 / 40 + update, rel=1e-9)


def test_a_rate_above_the_flop_peak_is_allowed_with_a_note_and_an_impossible_one_refused():
    sc = dpsim.load_scenario(one_gpu(samples_per_s=16_000.0))   # 2 ms a step: under 2.5 at the FLOP peak
    assert sc.compute.efficiency > 1
    assert any("above the GPU's FLOP peak" in n for n in config.notes(sc))
    with pytest.raises(config.ScenarioError, match="no more than the update"):
        dpsim.load_scenario(one_gpu(samples_per_s=1e9))


@pytest.mark.parametrize("global_batch, half_batch", [(256, 8.0), (512, 32.0)])
def test_strong_scaling_splits_the_global_batch_and_speeds_up_as_the_curve_says(global_batch, half_batch):
    # compute-bound (100 parameters, nothing to sync): n GPUs each run global/n samples, so
    # speed-up = t(G) / t(G/n) = (G + b_half) / (G/n + b_half)
    data = star(4, 10.0, 0.001, params=100)          # and next to no latency
    data["sync"]["call_overhead_us"] = 0.0           # nor a call's fixed cost (dpsim.software)
    data["compute"] = {"half_batch": half_batch}
    data["training"] = {"global_batch": global_batch}
    sc = dpsim.load_scenario(data)
    for n in (1, 2, 4):
        res = dpsim.simulate(with_gpus(sc, n))
        assert res.scenario["training"]["batch_per_gpu"] == global_batch // n
        expected = (global_batch + half_batch) / (global_batch / n + half_batch)
        assert res.speedup == pytest.approx(expected, rel=1e-3)


def test_a_global_batch_that_does_not_split_is_one_line():
    data = star(3)
    data["training"] = {"global_batch": 100}
    with pytest.raises(config.ScenarioError, match="does not split evenly over 3 GPUs"):
        dpsim.load_scenario(data)


def test_the_sweep_table_shows_the_batch_per_gpu_under_strong_scaling(dpsim_cli):
    code, out, err = dpsim_cli("sweep", "d2l-ps-vs-ring", "--gpus", "1,2,4", "--set", "training.global_batch=256")
    assert code == 0, err
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if "batch/GPU" in line)
    assert [int(line.split()[2]) for line in lines[head + 1:head + 4]] == [256, 128, 64]
