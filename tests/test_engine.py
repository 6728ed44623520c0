"""Whole-iteration behaviour of the engine and the result contract."""
import json

import pytest

import dpsim
from dpsim import compute, load_scenario, simulate

from dpsim_helpers import star

CONTRACT = {"iteration_time_s", "throughput_samples_per_s", "speedup", "scaling_efficiency",
            "sync_time_s", "bytes_sent_per_gpu", "breakdown_s", "scenario"}


def test_result_follows_the_contract_and_is_json():
    d = simulate("cntk-1bit-k80").to_dict()
    assert CONTRACT <= set(d)
    assert {"compute", "data_wait", "exposed_comm", "update"} <= set(d["breakdown_s"])
    json.dumps(d)
    assert d["scenario"]["resolved"]["gpu"]["name"] == "k80"


def test_breakdown_adds_up_to_the_iteration():
    for strategy in ("ring", "ps", "dataparallel", "recursive-doubling", "halving-doubling", "mpi"):
        r = simulate("cntk-1bit-k80", {"sync.strategy": strategy})
        assert sum(r.breakdown_s.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
        assert r.throughput_samples_per_s == pytest.approx(4 * 32 / r.iteration_time_s)


def test_deterministic():
    a = simulate("d2l-ps-vs-ring").to_dict()
    b = simulate("d2l-ps-vs-ring").to_dict()
    assert a == b


def test_one_gpu_has_speedup_one_and_no_communication():
    r = simulate("cntk-1bit-k80", {"cluster.gpus_per_node": 1, "sync.strategy": "none"})
    assert r.speedup == pytest.approx(1.0)
    assert r.breakdown_s["exposed_comm"] == 0 and r.bytes_sent_per_gpu == 0 and r.sync_time_s == 0


def test_compute_time_follows_the_efficiency_curve():
    """Closed form: t = F b (b + b_half) / (P e_max b) on one GPU."""
    sc = load_scenario("cntk-1bit-k80", {"cluster.gpus_per_node": 1, "sync.strategy": "none"})
    r = simulate(sc)
    model = sc.model_spec()
    expected = model.flops_per_sample * (32 + 8) / (4.365e12 * 0.115)
    assert r.breakdown_s["compute"] == pytest.approx(expected, rel=1e-9)
    assert compute.efficiency(8, 0.5, 8) == pytest.approx(0.25)


def test_ring_bytes_per_gpu_are_2_n_minus_1_over_n_of_the_gradient():
    sc = load_scenario(star(4, params=10_000_000))
    r = simulate(sc)
    assert r.bytes_sent_per_gpu == pytest.approx(2 * 3 / 4 * 40e6)


def test_overlap_hides_communication_behind_backward():
    data = star(4, 5.0, 1.0, params=25_000_000)
    data["model"].update(flops_per_sample=2e10, layers=50)   # backward ~3x longer than the sync
    data["sync"].update(bucket_mib=4)
    on = simulate(data, {"sync.overlap": True})
    off = simulate(data, {"sync.overlap": False})
    assert on.breakdown_s["exposed_comm"] < 0.5 * off.breakdown_s["exposed_comm"]
    assert on.iteration_time_s < off.iteration_time_s


def test_nvlink_ring_beats_pcie_ring():
    pcie = simulate("cntk-1bit-k80", {"model.preset": "resnet50"})
    nvlink = simulate("cntk-1bit-k80", {"model.preset": "resnet50", "cluster.intra": "nvlink2"})
    # 50 GB/s per pair against 15.75 GB/s; the K80's reductions (240 GB/s memory) are the same in both
    assert nvlink.sync_time_s < pcie.sync_time_s / 2


def test_sweep_fills_nodes_then_adds_them():
    runs = dpsim.sweep("cntk-1bit-k80", gpus=[1, 2, 4, 8])
    assert [r.gpus for r in runs] == [1, 2, 4, 8]
    assert runs[3].scenario["cluster"]["nodes"] == 2
    assert runs[0].speedup == 1.0
    # crossing 10 GbE between two boxes costs more than PCIe inside one
    assert runs[3].sync_time_s > runs[2].sync_time_s


def test_loader_bursts_are_measured_over_whole_cycles():
    """12 workers on 3 spare cores finish their batches together: bursts of 12 batches.
    The scenario's own 8 measured iterations fall inside one burst; the reported rate must still
    be the cores' steady state, (cores - 1) / decode seconds per sample (DataParallel: one process)."""
    import dpsim
    res = dpsim.simulate("pytorch-dataparallel-4gpu", {"cluster.cpu_cores": 4})
    sc = dpsim.load_scenario("pytorch-dataparallel-4gpu")
    assert sc.training.iterations < sc.data.workers        # the case the window exists for
    steady = (4 - 1) / (sc.data.decode_ms_per_sample / 1e3)
    assert abs(res.throughput_samples_per_s / steady - 1) < 0.01
