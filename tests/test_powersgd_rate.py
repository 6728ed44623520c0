"""course calibrate's PowerSGD primitive (course/lowrank.py): the seconds of PowerSGD's products
and Gram-Schmidt on the model's matrices, turned into compute.powersgd_gflops, against FLOPs
counted by hand."""
import pytest

from course import calibrate, lowrank
from course.measurements import Measurements, Probe

from test_course import PROF, fake_probe

MATRICES = [[64, 1024], [10, 1024]]
# by hand, rank 1: three products of 2 n m and Gram-Schmidt's 2 n, per matrix
FLOPS = 3 * 2 * 64 * 1024 + 2 * 64 + 3 * 2 * 10 * 1024 + 2 * 10


def measurements(lowranks, devices_per_node, matrices=MATRICES):
    probes = {1: [Probe.from_json(fake_probe(1, 4e-3)) for _ in lowranks]}
    two = fake_probe(2, 4e-3, {"ring": 1e-3})
    two.update(one_way_median_s=two["one_way_s"], one_way_mean_s=two["one_way_s"])
    probes[2] = [Probe.from_json({**two, **({"lowrank": x} if x else {})}) for x in lowranks]
    model = {**PROF["model"], "matrices": matrices}
    return Measurements(model=model, batch=64, device="cpu", devices=2, cores=2, peak_flops=1e11, sweep=[],
                        update_s=1e-3, overhead_s=0.0, copy_gbs=10.0, sharing_ranks=2, probes=probes,
                        codec_values=[], onebit_s=[])


def test_flops_are_three_products_and_gram_schmidt_of_the_matrices_powersgd_compresses():
    assert lowrank.flops(MATRICES, 1) == FLOPS
    # 2 x 3 at rank 1: 6 values < 2 (2 + 3) (PyTorch's min_compression_rate): sent as it is
    assert lowrank.shapes([[2, 3], [64, 1024]], 1) == [(64, 1024, 1)]
    assert lowrank.flops([[64, 1024]], 16) == 3 * 2 * 64 * 1024 * 16 + 2 * 64 * 16 ** 2
    assert lowrank.flops([[64, 1024]], 64) == 0      # r' = 64: 65536 < 2 (64 + 1024) 64, not compressed


@pytest.mark.parametrize("devices, share", [(2.0, 1.0), (1.0, 2.0)])
def test_rate_is_flops_times_the_ranks_per_device_over_the_median_round(devices, share):
    """Two ranks on two cores each run at the rate they were timed at; on one core each got half."""
    m = measurements([[1, 3e-3], [1, 2e-3], [1, 9e-3]], devices)
    assert lowrank.fit_rate(m, devices) == pytest.approx(FLOPS * share / 3e-3 / 1e9, rel=1e-12)


def test_no_key_without_the_timing_or_the_matrices():
    """A sidecar of before the primitive, or a model without weight matrices: no
    compute.powersgd_gflops, so dpsim predicts as it did without it."""
    assert lowrank.fit_rate(measurements([None, None], 2.0), 2.0) is None
    assert lowrank.fit_rate(measurements([[1, 1e-3]], 2.0, matrices=None), 2.0) is None
    f = calibrate.Fitted(1e11, 0.9, 8.0, 2.0, 10.0, 20.0, 0.0, 10.0, 1e-6)
    assert "powersgd_gflops" not in calibrate.compute_keys(measurements([None], 2.0), f)
    assert calibrate.compute_keys(measurements([None], 2.0), f.__class__(**{**f.__dict__, "powersgd_gflops": 3.21}))[
        "powersgd_gflops"] == 3.21


def test_lowrank_seconds_times_every_pass():
    calls = iter(range(100))
    seconds = lowrank.lowrank_seconds(MATRICES, 1, clock=lambda: next(calls), reps=4)
    assert seconds == pytest.approx(1 / 4)        # the clock read once before and once after 4 passes
