"""dpsim.nccl_tuning against NCCL's tuning model worked by hand from src/graph/tuning.cc's
constants (Simple protocol: base 8.4 us, network hop 14 us, NVLink ring hop 3.4 us, tree hop
4.0 us; tree bus bandwidth x 0.92, algorithm bandwidth = tree bus / 2, ring bus x n / 2(n-1)),
and validate's use of it."""
import pytest

from dpsim import collective, config, nccl_tuning, validate

GIB = 2 ** 30


def test_ring_time_is_tuning_cc_worked_by_hand():
    # 2 nodes x 8 GPUs, NICs 40 GB/s per node: ring bus 40, algbw 40 x 16/30; latency
    # 8.4 + 28 intra steps x 3.4 + 2 network steps x 14.
    expected = 8.4 + 28 * 3.4 + 2 * 14 + GIB / (1e3 * 40 * 16 / 30)
    assert nccl_tuning.time_us("ring", GIB, 2, 8, 240, 40) == pytest.approx(expected, rel=1e-12)


def test_two_node_tree_counts_twice_the_nics_and_its_log_latency():
    # The tree's graph at 2 nodes: intra speed up to 2 x 40 = 80; 0.92 x 80 / 2 algbw;
    # latency 8.4 + 2 x (7 x 4.0 + log2(2) x 14).
    expected = 8.4 + 2 * (7 * 4.0 + 14) + GIB / (1e3 * 0.92 * 80 / 2)
    assert nccl_tuning.time_us("tree", GIB, 2, 8, 240, 40) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("nodes, per_node, intra, nics, picked", [
    (2, 8, 240, 40, "tree"),     # NVLink node, NICs a sixth of it: 0.46 x 80 > 40 x 16/30
    (2, 8, 40, 40, "ring"),      # GPUs' link no faster than the NICs: 0.46 x 40 < 40 x 16/30
    (4, 8, 240, 40, "ring"),     # beyond 2 nodes the tree runs at the NICs' speed: 0.46 < 32/62
    (1, 8, 240, 240, "ring"),    # one node: 0.46 < 8/14
    (2, 1, 240, 40, "ring"),     # one GPU per node: the tree is the ring
])
def test_pick_follows_the_bandwidth_terms(nodes, per_node, intra, nics, picked):
    assert nccl_tuning.pick(GIB, nodes, per_node, intra, nics) == picked


def test_small_message_prefers_the_lower_latency():
    # 8 B on 4 nodes: ring latency 8.4 + (62 - 6) x 3.4 + 6 x 14 = 282.8 us, tree
    # 8.4 + 2 x (7 x 4 + 2 x 14) = 120.4 us: NCCL's model runs the tree.
    assert nccl_tuning.pick(8, 4, 8, 240, 40) == "tree"


def _case(name):
    return next(c for c in validate.load_cases() if c["name"] == name)


def test_validate_runs_the_tree_on_p4d_two_nodes_and_keeps_a_named_ring():
    sc = config.load_scenario(validate.scenario(_case("p4d_2node_efa_1gib")))
    assert sc.sync.strategy == "double-tree"
    named = _case("dgx_a100_2node_8x100g_ring")
    assert named["dpsim"]["strategy"] == "ring"
    assert config.load_scenario(validate.scenario(named)).sync.strategy == "ring"
    assert config.load_scenario(validate.scenario(_case("p4d_4node_efa_1gib"))).sync.strategy == "ring"


def test_tree_inside_one_dgx1_follows_its_nvlink_rings():
    """On one node the double tree is a reduce-scatter and an all-gather along the node's rings,
    the ring all-reduce's own steps: the same time on a DGX-1's NVLink hybrid cube mesh (a
    single ring in GPU order would cross PCIe between GPUs 3-4 and 7-0, which have no NVLink)."""
    sc = {"cluster": {"node": "dgx-1-v100", "nodes": 1}}
    ring = collective.collective_time(sc, 256 * 2 ** 20, "ring")
    tree = collective.collective_time(sc, 256 * 2 ** 20, "double-tree")
    assert tree == pytest.approx(ring, rel=1e-6)


@pytest.mark.parametrize("case", [c for c in validate.load_cases() if c.get("algorithm", "").startswith("Ring")],
                         ids=lambda c: c["name"])
def test_a_case_whose_run_ran_a_ring_runs_a_ring(case):
    """The source's algorithm, where it names one, beats what NCCL's model would pick."""
    assert config.load_scenario(validate.scenario(case)).sync.strategy == "ring"
