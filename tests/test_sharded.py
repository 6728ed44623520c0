"""ZeRO-1/2/3 in the simulator against the closed forms of dpsim.analytic, with overlap off
(where nothing contends): iteration time, one sync on its own, bytes per GPU."""
import pytest

from dpsim import analytic, load_scenario, simulate
from dpsim.engine import Engine
from dpsim.hardware import GPUS

from dpsim_helpers import star

GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)
ALPHA, BETA = 6e-6, 1 / 12.5e9          # star(n, 12.5, 3.0): two hops of 3 us, 12.5 GB/s


def scenario(n, strategy, layers=1, bucket_mib=0.0, overlap=False, params=16_000_000):
    data = star(n, 12.5, 3.0, params=params, strategy=strategy, overlap=overlap, bucket_mib=bucket_mib)
    data["model"]["layers"] = layers
    data["training"] = {"iterations": 3, "warmup_iterations": 1}
    return load_scenario(data)


@pytest.mark.parametrize("n", [2, 4, 5])
@pytest.mark.parametrize("strategy", ["zero1", "zero2"])
def test_zero12_iteration_matches_closed_form(strategy, n):
    sc = scenario(n, strategy)
    engine = Engine(sc)
    run, w = engine.run(), engine.work
    m = w.grad_bytes
    expected = analytic.zero12_iteration(n, [m], ALPHA, BETA, GAMMA, w.forward_s, w.backward_s, w.update_s)
    assert run.iteration_time_s == pytest.approx(expected, rel=0.01)
    assert run.bytes_sent_per_gpu == pytest.approx(analytic.sharded_bytes_per_gpu(n, m, 1), rel=1e-9)
    # ZeRO-1 and 2 move an all-reduce's bytes and take its time on their own (ZeRO, section 7.2)
    assert Engine(sc).sync_alone() == pytest.approx(analytic.ring(n, m, ALPHA, BETA, GAMMA), rel=0.01)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("layers, bucket_mib", [(1, 0.0), (8, 8.0)])
def test_zero3_iteration_matches_closed_form(n, layers, bucket_mib):
    sc = scenario(n, "zero3", layers, bucket_mib)
    engine = Engine(sc)
    run, w = engine.run(), engine.work
    # units in forward order; each bucket's backward time from when it is ready, forward likewise
    ready = [0.0] + [b.ready_s for b in w.buckets]
    back = [(b.nbytes, r1 - r0) for b, r0, r1 in zip(w.buckets, ready, ready[1:])]
    units = [(nb, s / w.backward_s * w.forward_s, s) for nb, s in reversed(back)]
    assert len(units) == (1 if bucket_mib == 0 else 4)
    expected = analytic.zero3_iteration(n, units, ALPHA, BETA, GAMMA, w.update_s)
    assert run.iteration_time_s == pytest.approx(expected, rel=0.01)
    assert run.bytes_sent_per_gpu == pytest.approx(analytic.sharded_bytes_per_gpu(n, w.grad_bytes, 3), rel=1e-9)
    # one sync on its own: forward's and backward's gathers and the reduce-scatter of every unit
    alone = sum(2 * analytic.all_gather(n, nb, ALPHA, BETA) + analytic.reduce_scatter(n, nb, ALPHA, BETA, GAMMA)
                for nb, _, _ in units)
    assert Engine(sc).sync_alone() == pytest.approx(alone, rel=0.01)


def test_zero3_prefetch_hides_gathers_behind_compute():
    """With overlap, each unit's gather runs during the previous unit's compute: the iteration
    lies between the compute alone (plus the first gather) and the serial closed form."""
    serial = Engine(scenario(4, "zero3", 8, 8.0)).run().iteration_time_s
    engine = Engine(scenario(4, "zero3", 8, 8.0, overlap=True))
    w = engine.work
    overlapped = engine.run().iteration_time_s
    floor = w.forward_s + w.backward_s + w.update_s / 4
    assert floor < overlapped < serial


def test_zero_sends_more_than_the_ring_only_at_stage_3():
    sent = {s: simulate(scenario(4, s)).bytes_sent_per_gpu for s in ("ring", "zero1", "zero2", "zero3")}
    assert sent["zero1"] == pytest.approx(sent["ring"]) and sent["zero2"] == pytest.approx(sent["ring"])
    assert sent["zero3"] == pytest.approx(1.5 * sent["ring"])
