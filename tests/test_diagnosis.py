"""dpsim.diagnosis: scenarios built to be bound by one cause get that cause, and a knob that helps."""
import dataclasses

import pytest

import dpsim
from dpsim.config import builtin_names
from dpsim.diagnosis import PARTS, Diagnosis, diagnose


def run(base, overrides=None):
    sc = dpsim.load_scenario(base, overrides)
    res = dpsim.simulate(sc)
    return sc, res, diagnose(sc, res)


def share_of(res, key):
    return res.breakdown_s[key] / res.iteration_time_s


def faster(base, overrides, change):
    """Throughput after applying the suggested change, over before."""
    return (dpsim.simulate(base, {**overrides, **change}).throughput_samples_per_s
            / dpsim.simulate(base, overrides).throughput_samples_per_s)


def test_starved_loader_asks_for_workers_and_they_help():
    over = {"sync.strategy": "ring", "data.workers": 1, "data.decode_ms_per_sample": 5.0}
    sc, res, d = run("pytorch-dataparallel-4gpu", over)
    assert (d.cause, d.knob) == ("data loading", "loader-workers")
    assert d.share == pytest.approx(share_of(res, "data_wait"))
    assert d.share > 0.25
    workers = int(d.text.split("--set data.workers=")[1].split()[0])
    assert 1 < workers <= sc.cluster.cpu_cores
    assert "data.source=synthetic" in d.text
    assert faster("pytorch-dataparallel-4gpu", over, {"data.workers": workers}) > 1.3


def test_loader_on_every_core_asks_for_cheaper_decoding():
    over = {"sync.strategy": "ring", "cluster.cpu_cores": 8, "data.workers": 1, "data.decode_ms_per_sample": 5.0}
    _, _, d = run("pytorch-dataparallel-4gpu", over)      # 8 cores - 4 trainers = 1 loader core each
    assert (d.cause, d.knob) == ("data loading", "cheaper-decode")
    assert "data.decode_ms_per_sample=2.5" in d.text and "cluster.cpu_cores=16" in d.text


PS8 = {"cluster.gpus_per_node": 8, "cluster.intra": "pcie3", "cluster.host_link": "pcie3",
       "cluster.gpus_per_pcie_switch": 2, "training.batch_per_gpu": 32}


def test_ps_on_gpu0_over_pcie_with_8_gpus_asks_for_a_ring():
    _, res, d = run("d2l-ps-vs-ring", PS8)
    assert (d.cause, d.knob) == ("communication", "ring-not-ps")
    assert d.share == pytest.approx(share_of(res, "exposed_comm"))
    assert "--set sync.strategy=ring" in d.text and "gpu0" in d.text
    assert faster("d2l-ps-vs-ring", PS8, {"sync.strategy": "ring"}) > 1.2


def test_overlap_off_with_a_long_backward_asks_for_overlap():
    over = {"training.batch_per_gpu": 32, "sync.overlap": False}     # 4 GPUs: backward ~ one sync
    _, res, d = run("d2l-ps-vs-ring", over)
    assert (d.cause, d.knob) == ("communication", "overlap")
    assert "--set sync.overlap=true" in d.text
    assert faster("d2l-ps-vs-ring", over, {"sync.overlap": True}) > 1.2


GBE = {"cluster.nodes": 4, "cluster.gpus_per_node": 4, "cluster.inter": "1gbe", "sync.strategy": "ring",
       "training.batch_per_gpu": 8, "model.preset": "resnet50", "compute.efficiency": 0.6}


def test_flat_ring_over_1gbe_asks_for_1bit_then_a_bigger_batch():
    _, res, d = run("d2l-ps-vs-ring", GBE)
    assert (d.cause, d.knob) == ("communication", "1bit")
    assert d.share == pytest.approx(share_of(res, "exposed_comm")) and d.share > 0.9
    assert "--set sync.compression=1bit" in d.text
    assert faster("d2l-ps-vs-ring", GBE, {"sync.compression": "1bit"}) > 3
    # already compressed, on one node of a slow PCIe: the small batch is what is left to change
    one = {"cluster.gpus_per_node": 4, "training.batch_per_gpu": 8, "sync.strategy": "ring",
           "cluster.intra": {"bandwidth_gbs": 1.0, "latency_us": 1.0},
           "cluster.host_link": {"bandwidth_gbs": 1.0, "latency_us": 1.0}, "sync.compression": "fp16"}
    _, _, d = run("d2l-ps-vs-ring", one)
    assert (d.cause, d.knob) == ("communication", "bigger-batch")
    assert "--set training.batch_per_gpu=32" in d.text


def test_flat_ring_over_25gbe_asks_for_hierarchical_then_a_bigger_batch():
    over = {**GBE, "cluster.inter": "25gbe"}
    _, _, d = run("d2l-ps-vs-ring", over)
    assert (d.cause, d.knob) == ("communication", "hierarchical")
    assert faster("d2l-ps-vs-ring", over, {"sync.strategy": "hierarchical"}) > 1.05
    _, _, d = run("d2l-ps-vs-ring", {**over, "sync.strategy": "hierarchical"})
    assert (d.cause, d.knob) == ("communication", "bigger-batch")


def test_jitter_is_a_straggler_too():
    _, _, d = run("d2l-ps-vs-ring", {"sync.strategy": "ring", "compute.jitter": 0.3, "cluster.gpus_per_node": 8,
                                     "cluster.gpus_per_pcie_switch": 8})
    assert (d.cause, d.knob) == ("straggler", "jitter")
    assert "--set compute.jitter=0" in d.text


def test_half_speed_gpu_is_a_straggler():
    _, res, d = run("d2l-ps-vs-ring", {"sync.strategy": "ring", "cluster.gpu_speed": [1, 1, 1, 0.5]})
    assert (d.cause, d.knob) == ("straggler", "fix-straggler")
    assert d.share == pytest.approx(share_of(res, "straggler_wait"))
    assert share_of(res, "compute") > d.share          # not the largest part, yet the verdict
    assert "GPU 3" in d.text and "cluster.gpu_speed" in d.text


def test_large_batch_on_nvlink_is_compute_bound_and_scales_well():
    _, res, d = run("d2l-ps-vs-ring", {"sync.strategy": "ring", "cluster.gpus_per_node": 2,
                                       "cluster.intra": "nvlink2", "training.batch_per_gpu": 256})
    assert (d.cause, d.knob) == ("compute", "none")
    assert d.share == pytest.approx(share_of(res, "compute")) and d.share > 0.95
    assert "compute-bound" in d.text and "scale well" in d.text
    comm = (res.breakdown_s["exposed_comm"] + res.breakdown_s["compression"]) / res.iteration_time_s
    assert f"communication is only {comm:.0%}" in d.text


def test_1bit_on_k80s_loses_and_is_turned_off():
    _, res, d = run("cntk-1bit-k80", {"sync.compression": "1bit"})
    assert res.uncompressed.iteration_time_s < res.iteration_time_s
    assert (d.cause, d.knob) == ("compression", "compression-off")
    assert d.share == pytest.approx(share_of(res, "compression"))
    assert "--set sync.compression=none" in d.text and "slower" in d.text


def test_to_dict_and_frozen():
    _, _, d = run("cntk-1bit-k80")
    assert d.to_dict() == {"cause": d.cause, "share": d.share, "knob": d.knob, "text": d.text, "memory": d.memory}
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.cause = "communication"


@pytest.mark.parametrize("name", builtin_names())
def test_builtin_verdicts_are_well_formed(name):
    _, res, d = run(name)
    assert isinstance(d, Diagnosis) and d.cause in PARTS
    assert d.share == pytest.approx(share_of(res, PARTS[d.cause]))
    assert 2 <= len(d.text.splitlines()) <= 3
    assert "--set" in d.text
