"""BytePS's server machines and partition pipeline (dpsim/strategies/byteps.py), against closed
forms worked out here; the one-line errors of the keys that set them.

Two nodes of one GPU on 100 GbE (plain TCP: 0.94 x 12.5 GB/s = B, the slowest hop of every
route), host memory 50 GB/s (an addition of n bytes costs 3n / 50e9 s), 1 GiB = m:
  co-located (server_nodes 0): GPU k pushes m to the other node's host, which adds m, and pulls
      it back: 2 m / B + 3 m / 50e9 (push and pull one after the other);
  two server machines, whole bucket: the same bytes each way of each NIC: 2 m / B + 3 m / 50e9;
  two server machines, k parts of m / k: part i pulled while part i + 1 is pushed, each round
      one part's transfer and one part's addition: (k + 1) m / (k B) + 3 m / 50e9.
With g GPUs a node, co-located, each NIC sends only the (N-1)/N of the node's shards that go
to other hosts; with server machines every shard leaves the node (m each way, once)."""
import pytest

from dpsim import collective_time, config

GIB = 2 ** 30
B = 0.94 * 12.5e9
ADD = 3 / 50e9
TWO = {"cluster": {"nodes": 2, "gpus_per_node": 1, "gpu": "v100", "inter": "100gbe", "host_link": "pcie4",
                   "host_mem_bw_gbs": 50.0},
       "sync": {"strategy": "byteps", "call_overhead_us": 0.0}}


def test_co_located_push_sum_pull_one_after_the_other():
    assert collective_time(TWO, GIB) == pytest.approx(2 * GIB / B + ADD * GIB, rel=0.01)


def test_server_machines_without_partitions_move_the_same_bytes():
    sc = config.load_scenario(TWO, {"cluster.server_nodes": 2})
    assert collective_time(sc, GIB) == pytest.approx(2 * GIB / B + ADD * GIB, rel=0.01)


@pytest.mark.parametrize("parts", [1, 4, 8])
def test_partitions_pull_one_part_while_pushing_the_next(parts):
    sc = config.load_scenario(TWO, {"cluster.server_nodes": 2, "sync.ps_partition_mib": 1024 / parts})
    assert collective_time(sc, GIB) == pytest.approx((parts + 1) / parts * GIB / B + ADD * GIB, rel=0.01)


@pytest.mark.parametrize("g", [4, 8])
def test_server_machines_take_every_shard_off_the_node(g):
    """g GPUs a node on NVLink (8: the DGX-1's hybrid cube mesh, whose rings NCCL and dpsim take
    over NVLink pairs only), 2 nodes, host memory made free: co-located, the pushes that
    cross a NIC carry (N-1)/N m = m/2 each way; with 2 server machines, m. Pipelined in many
    parts (64), the server layout's push and pull overlap: (1 + 1/64) m / B across nodes. The
    node's own reduce-scatter and all-gather (a ring all-reduce of m among its g GPUs, `alone`)
    run in every round, not under the transfers."""
    four = config.load_scenario(TWO, {"cluster.gpus_per_node": g, "cluster.intra": "nvlink2",
                                      "cluster.host_mem_bw_gbs": 1e6})
    alone = collective_time(config.load_scenario(four, {"cluster.nodes": 1, "sync.strategy": "ring"}), GIB)
    co = collective_time(four, GIB)
    assert co - alone == pytest.approx(2 * (GIB / 2) / B, rel=0.05)
    servers = config.load_scenario(four, {"cluster.server_nodes": 2})
    assert collective_time(servers, GIB) - alone == pytest.approx(2 * GIB / B, rel=0.05)
    piped = config.load_scenario(servers, {"sync.ps_partition_mib": 1024 / 64})
    assert collective_time(piped, GIB) - alone == pytest.approx(65 / 64 * GIB / B, rel=0.05)


@pytest.mark.parametrize("key, value, words", [
    ("cluster.server_nodes", "-1", "must be >= 0"),
    ("cluster.server_nodes", "2", "set sync.strategy = \"byteps\""),
    ("sync.ps_partition_mib", "-4.0", "must be >= 0"),
    ("sync.nvls_efficiency", "1.5", "must be at most 1"),
    ("sync.nvls_efficiency", "0.0", "must be > 0"),
])
def test_bad_server_or_partition_or_nvls_value_is_one_line_exit_2(tmp_path, dpsim_command, key, value, words):
    section, name = key.split(".")
    body = f"[cluster]\nnodes = 2\n{name} = {value}\n" if section == "cluster" else \
        f"[cluster]\nnodes = 2\n[{section}]\n{name} = {value}\n"
    f = tmp_path / "s.toml"
    f.write_text(body)
    p = dpsim_command("run", str(f))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert key in p.stderr and words in p.stderr
