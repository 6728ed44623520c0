"""Two CPU sockets in a node (cluster.sockets, socket_link) and NCCL 1.x's ring in GPU order
(sync.ring_order = "gpu"): routes hop by hop, and the ring's bus bandwidth against its closed
form, the slowest hop's rate."""
import pytest

import dpsim
from dpsim import hardware
from dpsim.engine import build_cluster
from dpsim.errors import ScenarioError

CROSSING = hardware.LINKS["cross-socket-pcie3"].achievable_gbs * 1e9


def dgx1(**sync):
    return dpsim.load_scenario({"name": "dgx1", "cluster": {"node": "dgx-1-p100", "nodes": 1},
                                "model": {"preset": "resnet50"}, "sync": sync})


def names(route):
    return [ch.name for ch in route]


def test_gpus_on_two_sockets_without_nvlink_cross_the_socket_link_once_each_way():
    cluster = build_cluster(dgx1())
    # GPUs 0-3 on socket 0 (its root complex host0), 4-7 on socket 1 (cpu0.1); 3-4 and 7-0 have no NVLink
    assert names(cluster.route("gpu3", "gpu4")) == ["gpu3>pcisw0.1", "pcisw0.1>host0", "host0>cpu0.1",
                                                    "cpu0.1>pcisw0.2", "pcisw0.2>gpu4"]
    assert names(cluster.route("gpu7", "gpu0")) == ["gpu7>pcisw0.3", "pcisw0.3>cpu0.1", "cpu0.1>host0",
                                                    "host0>pcisw0.0", "pcisw0.0>gpu0"]
    assert cluster.bottleneck("gpu3", "gpu4") == pytest.approx(CROSSING)
    # a pair on one socket under two switches, and a pair with NVLink, never cross it
    assert "host0>cpu0.1" not in names(cluster.route("gpu1", "gpu2")) + names(cluster.route("gpu0", "gpu4"))


def test_a_gpu_reaches_host_memory_on_its_own_socket():
    cluster = build_cluster(dgx1())
    assert names(cluster.route("gpu5", "host0")) == ["gpu5>pcisw0.2", "pcisw0.2>cpu0.1"]
    assert names(cluster.route("gpu1", "host0")) == ["gpu1>pcisw0.0", "pcisw0.0>host0"]


def test_host_staged_messages_cross_the_sockets_once():
    cluster = build_cluster(dgx1())
    staged = names(cluster.route("gpu2", "gpu6", staged=True))
    assert staged.count("host0>cpu0.1") == 1 and "cpu0.1>host0" not in staged


def test_one_socket_keeps_the_single_host():
    sc = dpsim.load_scenario({"name": "pcie8", "cluster": {"nodes": 1, "gpus_per_node": 8, "intra": "pcie3"},
                              "model": {"preset": "resnet50"}})
    cluster = build_cluster(sc)
    assert names(cluster.route("gpu3", "gpu4")) == ["gpu3>pcisw0.1", "pcisw0.1>host0", "host0>pcisw0.2",
                                                    "pcisw0.2>gpu4"]


def test_ring_order_gpu_is_one_ring_in_gpu_order():
    assert build_cluster(dgx1(ring_order="gpu")).node_rings == [list(range(8))]
    assert len(build_cluster(dgx1()).node_rings) == 4          # NCCL 2's rings over the P100 mesh


def test_the_gpu_order_ring_runs_at_the_crossing_rate():
    """Bus bandwidth of one ring of 8 on a DGX-1 in GPU order: every byte of the ring passes the
    hops 3-4 and 7-0, so (closed form) busbw = the crossing's rate, less the latency's share."""
    nbytes = 2 ** 30
    t = dpsim.collective_time(dgx1(ring_order="gpu", segment_mib=0.5), nbytes)
    busbw = 2 * 7 / 8 * nbytes / t
    assert busbw <= CROSSING                                  # a bound: the slowest hop
    assert busbw > 0.97 * CROSSING
    nvlink_rings = 2 * 7 / 8 * nbytes / dpsim.collective_time(dgx1(segment_mib=0.5), nbytes)
    assert nvlink_rings > 10 * busbw


@pytest.mark.parametrize("key, value, says", [
    ("sync.ring_order", "nvml", "ring_order"),
    ("cluster.socket_link", "qpi-9", "socket_link"),
    ("cluster.sockets", 0, "sockets"),
    ("cluster.inter", "cross-socket-pcie3", "joins two CPU sockets"),
    ("cluster.intra", "cross-socket-pcie3", "cannot join GPUs inside a node"),
    ("cluster.intra", "100gbe", "kind 'ethernet' cannot join GPUs"),
])
def test_bad_socket_keys_are_refused(key, value, says):
    section, name = key.split(".")
    with pytest.raises(ScenarioError, match=says):
        dpsim.load_scenario({"name": "bad", "cluster": {"node": "dgx-1-p100", "nodes": 1},
                             "model": {"preset": "resnet50"}, section: {name: value}})
