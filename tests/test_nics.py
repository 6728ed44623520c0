"""NICs per node, GPUDirect RDMA and NCCL's channels (one ring per NIC across nodes), against
the ring's closed form with the hop that limits each ring, and routes read hop by hop."""
import pytest

from dpsim import analytic, load_scenario
from dpsim.engine import Engine

M = 2 ** 28                      # bytes all-reduced
NIC_GBS = 10.0


def scenario(nodes=2, g=4, nics=4, gpudirect="on", host_gbs=1000.0, strategy="ring"):
    """Nodes of g GPUs on a fast NVSwitch, 2 GPUs per PCIe switch, NICs of NIC_GBS; adding
    is free (huge memory bandwidth), so the ring's time is its transfers'."""
    return load_scenario({
        "cluster": {"nodes": nodes, "gpus_per_node": g, "gpus_per_pcie_switch": 2, "nics_per_node": nics,
                    "gpudirect": gpudirect, "gpu": {"fp32_tflops": 15.7, "mem_bw_gbs": 1e9},
                    "intra": {"bandwidth_gbs": 1000.0, "latency_us": 1.0, "kind": "nvswitch"},
                    "inter": {"bandwidth_gbs": NIC_GBS, "latency_us": 2.0, "kind": "infiniband"},
                    "host_link": {"bandwidth_gbs": host_gbs, "latency_us": 1.0}},
        "model": {"params": M // 4, "flops_per_sample": 1e9},
        "sync": {"strategy": strategy, "bucket_mib": 0}})


def sync(sc):
    return Engine(sc).sync_alone()


def test_one_ring_per_nic_each_carrying_its_share():
    # Ring c leaves node k from the GPU before NIC c's first GPU and enters at that GPU: every
    # NIC carries one ring each way, m / 4 of the gradient. Across nodes the route is
    # gpu > PCIe switch > NIC > net > NIC > PCIe switch > gpu: 4 PCIe hops of 1 us, 2 of 2 us.
    n = 8
    assert sync(scenario()) == pytest.approx(analytic.ring(n, M / 4, 8e-6, 1 / (NIC_GBS * 1e9)), rel=1e-3)


def test_one_nic_carries_the_whole_ring():
    # The ring leaves by GPU 3 (PCIe switch 1) through NIC 0 (under switch 0): up through the
    # host and down again, 6 PCIe hops and 2 network hops.
    n = 8
    expected = analytic.ring(n, M, 10e-6, 1 / (NIC_GBS * 1e9))
    assert sync(scenario(nics=1)) == pytest.approx(expected, rel=1e-3)
    assert sync(scenario(nics=1)) / sync(scenario()) == pytest.approx(4, rel=0.01)


def test_without_gpudirect_the_host_uplinks_limit_the_rings():
    # Through host memory, the two GPUs of a PCIe switch send their rings' bytes up one uplink
    # of 15 GB/s: 7.5 GB/s a ring, below the NIC's 10. Route: gpu > switch > host > NIC > net
    # and back: 6 PCIe hops, 2 network hops. GPUDirect goes around the uplink: the NIC's 10.
    n, host = 8, 15.0
    off = sync(scenario(gpudirect="off", host_gbs=host))
    assert off == pytest.approx(analytic.ring(n, M / 4, 10e-6, 2 / (host * 1e9)), rel=1e-3)
    on = sync(scenario(gpudirect="on", host_gbs=host))
    assert on == pytest.approx(analytic.ring(n, M / 4, 8e-6, 1 / (NIC_GBS * 1e9)), rel=1e-3)


def test_gpudirect_auto_follows_the_link_kind():
    from dpsim.derived import gpudirect
    from dpsim.hardware import LINKS
    assert gpudirect("auto", LINKS["ib-hdr"]) and gpudirect("auto", LINKS["roce-100"])
    assert not gpudirect("auto", LINKS["100gbe"]) and gpudirect("on", LINKS["100gbe"])
    assert not gpudirect("off", LINKS["ib-hdr"])


@pytest.mark.parametrize("nics", [2, 4])
def test_hierarchical_uses_every_nic(nics):
    # The g = 4 cross-node rings run on GPU l's NIC, each NIC under its GPUs' PCIe switch (so
    # every cross-node route is 4 PCIe hops and 2 network hops): k NICs carry 4 / k rings each.
    nodes, g = 3, 4
    expected = analytic.hierarchical(nodes, g, M, 2e-6, 1 / 1000e9, 8e-6, 1 / (NIC_GBS * 1e9), 0.0, nics)
    assert sync(scenario(nodes=nodes, nics=nics, strategy="hierarchical")) == pytest.approx(expected, rel=1e-3)


def test_routes_hop_by_hop():
    e = Engine(scenario(nics=2, gpudirect="on"))
    c = e.cluster
    names = lambda src, dst, staged=False: [ch.name for ch in c.route(src, dst, staged)]
    # GPU 1 (node 0, switch 0) to GPU 7 (node 1, switch 1): NIC 0 out, NIC 1 in, no host.
    assert names("gpu1", "gpu7") == ["gpu1>pcisw0.0", "pcisw0.0>nic0.0", "nic0.0>net", "net>nic1.1",
                                     "nic1.1>pcisw1.1", "pcisw1.1>gpu7"]
    # Staged through host memory: up to the host, out by the GPU's NIC, down on the other side.
    assert names("gpu1", "gpu7", staged=True) == [
        "gpu1>pcisw0.0", "pcisw0.0>host0", "host0>pcisw0.0", "pcisw0.0>nic0.0", "nic0.0>net", "net>nic1.1",
        "nic1.1>pcisw1.1", "pcisw1.1>host1", "host1>pcisw1.1", "pcisw1.1>gpu7"]
    off = Engine(scenario(nics=2, gpudirect="off")).cluster
    assert [ch.name for ch in off.route("gpu1", "gpu7")] == [
        "gpu1>pcisw0.0", "pcisw0.0>host0", "host0>nic0.0", "nic0.0>net", "net>nic1.1", "nic1.1>host1",
        "host1>pcisw1.1", "pcisw1.1>gpu7"]


@pytest.mark.parametrize("g, nics", [(6, 4), (8, 3), (3, 2), (4, 4), (8, 8), (2, 4), (5, 3)])
def test_every_nic_hangs_off_the_switch_of_a_gpu_it_serves(g, nics):
    # With GPUDirect, NIC j sits under the PCIe switch of the first GPU it serves, so that
    # GPU reaches it without crossing the host (6 GPUs, 4 NICs: NIC 1 serves GPU 2 alone,
    # which is on switch 1; the old floor(j g / NICs) put it under GPU 1's switch 0).
    c = Engine(scenario(g=g, nics=nics)).cluster
    for k in range(2):
        for l in range(g):
            gpu = f"gpu{k * g + l}"
            hops = [ch.name for ch in c.route(gpu, f"gpu{(1 - k) * g + l}")]
            nic = f"nic{k}.{c.nic_of(gpu)}"
            up = hops[:hops.index(f"{nic}>net")]
            served = [m for m in range(g) if c.nic_of(f"gpu{k * g + m}") == c.nic_of(gpu)]
            if l == served[0]:
                assert not any("host" in h for h in up), (gpu, hops)


def test_channels_every_rank_once_and_every_nic_once_each_way():
    c = Engine(scenario(nodes=3, g=8, nics=8)).cluster
    rings = c.rings(c.gpus)
    assert len(rings) == 8
    for r in rings:
        assert sorted(r, key=lambda e: int(e[3:])) == c.gpus
    out, into = set(), set()
    for r in rings:
        for a, b in zip(r, r[1:] + r[:1]):
            if c.node_of(a) != c.node_of(b):
                out.add((c.node_of(a), c.nic_of(a)))
                into.add((c.node_of(b), c.nic_of(b)))
    assert out == into == {(k, j) for k in range(3) for j in range(8)}


def test_dgx1_rings_use_every_nvlink():
    # A DGX-1V's 24 NVLinks (6 per GPU) carry 6 rings, each hop on a link of its own at 0.8 of
    # 25 GB/s (hardware.EFFICIENCY): the ring's closed form for m / 6 at 20 GB/s, one hop of
    # 1 us; each GPU adds its 6 rings' chunks (6 x gamma per ring byte), pipelined in 1 MiB.
    sc = load_scenario({"cluster": {"gpus_per_node": 8, "gpu": "v100", "intra": "nvlink2"},
                        "model": {"params": M // 4, "flops_per_sample": 1e9},
                        "sync": {"bucket_mib": 0, "segment_mib": 1.0}})
    rings = Engine(sc).cluster.rings(Engine(sc).cluster.gpus)
    assert len(rings) == 6
    gamma = 3 / (900e9)
    expected = analytic.ring(8, M / 6, 1e-6, 1 / 20e9, 6 * gamma, segment=2 ** 20)
    expected += sc.sync.call_overhead_us * 1e-6          # the call's fixed cost (dpsim.software)
    assert sync(sc) == pytest.approx(expected, rel=1e-3)
    # Bus bandwidth ~ 6 x 20 GB/s; one ring in GPU order would cross two pairs with no NVLink.
    assert 2 * 7 / 8 * M / sync(sc) / 1e9 == pytest.approx(120, rel=0.05)


def test_node_presets_fill_what_the_scenario_leaves_out():
    from dpsim.errors import ScenarioError
    from dpsim.hardware import NODES
    sc = load_scenario({"cluster": {"node": "dgx-a100", "nodes": 2, "inter": "ib-edr"}})
    c = sc.cluster
    assert (c.gpus_per_node, c.gpu, c.intra, c.host_link, c.nics_per_node) == (8, "a100", "nvswitch", "pcie4", 8)
    assert c.inter == "ib-edr"                                   # the scenario's own key wins
    with pytest.raises(ScenarioError, match="unknown node 'dgx-9'.*dgx-a100"):
        load_scenario({"cluster": {"node": "dgx-9"}})
    for name, keys in NODES.items():
        assert keys["source"], name
        load_scenario({"cluster": {"node": name, "nodes": 2}})     # every preset is a valid scenario


def test_a_dgx1_node_routes_each_gpu_pair_to_its_own_nic():
    # DGX-1V: mlx5_0 on the PCIe switch of GPUs 0-1, ..., mlx5_3 with GPUs 6-7 (nvidia-smi topo -m).
    c = Engine(load_scenario({"cluster": {"node": "dgx-1-v100", "nodes": 2}})).cluster
    for gpu in range(8):
        first = c.route(f"gpu{gpu}", "gpu8")[:3]
        assert [ch.name for ch in first] == [f"gpu{gpu}>pcisw0.{gpu // 2}", f"pcisw0.{gpu // 2}>nic0.{gpu // 2}",
                                             f"nic0.{gpu // 2}>net"]
