"""Issue 27's mechanisms, each against a closed form worked out here (not dpsim's output):
transports between nodes, the fixed cost of a collective call, TF 1.x's call per variable,
Horovod's cycle, communication slowing the backward it overlaps, gradient accumulation, the
parameter server's pull before forward, NVLink SHARP, peer-to-peer off; and the one-line
errors for an unknown transport or a negative per-call cost."""
import math

import pytest

from dpsim import collective_time, config, models, simulate, workload
from dpsim.engine import Engine

GIB = 2 ** 30
TWO_NODES = {"cluster": {"nodes": 2, "gpus_per_node": 1, "gpu": "v100", "inter": "100gbe"},
             "sync": {"call_overhead_us": 0.0, "segment_mib": 0.5}}


def test_nccl_socket_transport_carries_flows_times_one_flows_ceiling():
    """2 ranks: a ring moves m each way through each NIC, so t = m / (flows x 2.9 GB/s) when
    that is below TCP's 0.94 of line rate (12.5 GB/s); plain tcp moves at 0.94 x 12.5."""
    sc = config.load_scenario(TWO_NODES, {"cluster.transport": "nccl-socket"})
    assert GIB / collective_time(sc, GIB) == pytest.approx(2 * 2.9e9, rel=0.01)
    wide = config.load_scenario(sc, {"cluster.socket_flows": 16})
    assert GIB / collective_time(wide, GIB) == pytest.approx(0.94 * 12.5e9, rel=0.01)
    grpc = config.load_scenario(sc, {"cluster.transport": "grpc"})
    assert GIB / collective_time(grpc, GIB) == pytest.approx(0.8e9, rel=0.01)


def test_mpi_tcp_pays_its_measured_fraction_and_latency():
    sc = config.load_scenario(TWO_NODES, {"cluster.transport": "mpi-tcp"})
    small = collective_time(sc, 8)
    # 2 steps, each: NIC > switch and switch > NIC at TCP's 15 us, 3 PCIe hops of 1 us on each side
    assert small == pytest.approx(2 * (2 * 15e-6 + 6e-6), rel=0.05)
    assert GIB / collective_time(sc, GIB) == pytest.approx(0.30 * 12.5e9, rel=0.02)


def test_efa_moves_what_nccls_ring_over_one_p3dn_efa_moved():
    """NVIDIA/nccl-tests#22 (yaroslavvb, 2019-06-17): NCCL's ring forced on 2 p3dn nodes x 8 GPUs,
    one 100 Gb/s EFA each, ran a 1 GiB all-reduce in 268 ms. With one NIC per node every byte of
    the ring crosses it, so the bus bandwidth 2(16-1)/16 x 2^30 B / 0.268 s is the NIC's rate: the
    efa kind's efficiency is that over 12.5 GB/s, and dpsim's 2-rank ring over one EFA moves it."""
    nic_rate = 2 * 15 / 16 * GIB / 0.268
    from dpsim import hardware
    assert hardware.EFFICIENCY["efa"][0] == pytest.approx(nic_rate / 12.5e9, abs=0.005)
    sc = config.load_scenario(TWO_NODES, {"cluster.inter": "efa-100", "cluster.gpudirect": "on"})
    assert GIB / collective_time(sc, GIB) == pytest.approx(nic_rate, rel=0.01)


def test_a_call_pays_its_fixed_cost_once():
    base = config.load_scenario(TWO_NODES)
    with_cost = config.load_scenario(TWO_NODES, {"sync.call_overhead_us": 100.0})
    assert collective_time(with_cost, 2 ** 20) - collective_time(base, 2 ** 20) == pytest.approx(100e-6, rel=1e-6)


def test_tf1_calls_once_per_variable():
    """framework tf1: one bucket per layer, two calls each (weight and bias)."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 2}, "model": {"preset": "vgg16"},
                               "sync": {"framework": "tf1", "overlap": False}})
    layers = len(models.get_model("vgg16").grad_bytes_backward(4))
    w = workload.build(sc)
    assert len(w.buckets) == layers and {b.calls for b in w.buckets} == {2}
    more = config.load_scenario(sc, {"sync.call_overhead_us": 1000.0})
    assert Engine(more).sync_alone() - Engine(sc).sync_alone() == pytest.approx(2 * layers * 1000e-6, rel=1e-6)


def test_horovod_starts_a_bucket_on_the_next_cycle_tick():
    """One fused bucket ready when backward ends (overlap off): Horovod launches it at the
    first multiple of the cycle after that, so the step is ceil(b / c) c - b longer than DDP's."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 2}, "sync": {"bucket_mib": 0, "overlap": False},
                               "compute": {"contention": False}})
    cycle = 7e-3
    horovod = config.load_scenario(sc, {"sync.framework": "horovod", "sync.fusion_mib": 1e4, "sync.cycle_ms": cycle * 1e3})
    b = workload.build(sc).backward_s
    late = math.ceil(b / cycle) * cycle - b
    assert late > 1e-4
    assert simulate(horovod).iteration_time_s - simulate(sc).iteration_time_s == pytest.approx(late, rel=1e-6)


def test_overlapped_sync_stretches_backward_by_its_share_of_sms_and_memory():
    """Two equal layers, two buckets: the first is synchronised inside backward (a slow
    backward), the second after it. Backward's compute grows by s x t1, t1 = the first bucket's sync,
    s = channels / SMs + 3 x (bytes GPU 0 sends / t1) / memory bandwidth (2 ranks: it sends m)."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 2, "gpu": "v100", "intra": "pcie3"},
                               "model": {"preset": "custom", "params": 25_000_000, "flops_per_sample": 2e13, "layers": 2},
                               "sync": {"bucket_mib": 1.0}})
    off = config.load_scenario(sc, {"compute.contention": False})
    half = 25_000_000 * 4 / 2
    t1 = collective_time(config.load_scenario(sc, {"cluster.gpus_per_node": 2}), int(half))
    s = 2 / 80 + 3 * (half / t1) / 900e9
    assert workload.build(sc).backward_s / 2 > 2 * t1          # the first sync ends inside backward
    grown = simulate(sc).breakdown_s["compute"] - simulate(off).breakdown_s["compute"]
    assert grown == pytest.approx(s * t1, rel=1e-3)


def test_accumulation_computes_k_micro_batches_per_sync():
    """k micro-batches, one sync: t_k = (k - 1)(forward + backward) + t_1; throughput counts k batches."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 4}, "training": {"batch_per_gpu": 16}})
    k = 4
    acc = config.load_scenario(sc, {"training.accumulation_steps": k})
    w, t1 = workload.build(sc), simulate(sc).iteration_time_s
    tk = (k - 1) * (w.forward_s + w.backward_s) + t1
    r = simulate(acc)
    assert r.iteration_time_s == pytest.approx(tk, rel=1e-9)
    assert r.throughput_samples_per_s == pytest.approx(4 * 16 * k / tk, rel=1e-9)


def test_ps_pull_before_forward_is_not_hidden_by_backward():
    """PS on GPU 0 of an NVSwitch node: the pull sends m to each of n - 1 GPUs through GPU 0's
    port, (n - 1) m / (0.8 B) + two hops' latency, all of it exposed before forward."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 4, "gpu": "a100", "intra": "nvswitch"},
                               "sync": {"strategy": "ps", "ps_pull": "before-forward"}, "model": {"preset": "resnet50"}})
    m = models.get_model("resnet50").params * 4
    pull = 3 * m / (0.8 * 300e9) + 2e-6
    r = simulate(sc)
    assert r.breakdown_s["exposed_comm"] >= pull * (1 - 1e-6)
    with_push = simulate(config.load_scenario(sc, {"sync.ps_pull": "with-push"}))
    assert r.iteration_time_s > with_push.iteration_time_s
    assert with_push.sync_time_s - r.sync_time_s == pytest.approx(pull, rel=0.01)   # the broadcast left the sync


def test_nvls_moves_the_message_once_each_way():
    """NVLink SHARP: busbw = 2 (n-1)/n x the port's achievable rate (0.80 x 450 on H100) x NCCL's
    NVLS efficiency (0.85 on Hopper by default, sync.nvls_efficiency)."""
    sc = config.load_scenario({"cluster": {"node": "dgx-h100"}, "sync": {"strategy": "nvls", "call_overhead_us": 0.0}})
    t = collective_time(sc, 8 * GIB)
    assert 2 * 7 / 8 * 8 * GIB / t == pytest.approx(0.85 * 1.75 * 360e9, rel=0.001)
    full = config.load_scenario(sc, {"sync.nvls_efficiency": 1.0})
    assert 2 * 7 / 8 * 8 * GIB / collective_time(full, 8 * GIB) == pytest.approx(1.75 * 360e9, rel=0.001)


def test_peer_to_peer_off_is_two_copies_through_host_memory():
    """Two GPUs, each on its own root port: with P2P each step is one hop; without, two copies
    in a row (GPU to host, host to GPU). A 2-rank ring has two steps of m/2 (the reduce-scatter
    one also adds): off, each step moves its m/2 twice, m / B more in all (B = 0.8 x 31.5 GB/s)."""
    sc = config.load_scenario({"cluster": {"gpus_per_node": 2, "intra": "pcie4", "host_link": "pcie4",
                                           "gpus_per_pcie_switch": 1},
                               "sync": {"call_overhead_us": 0.0}})
    off = config.load_scenario(sc, {"cluster.p2p": False})
    assert collective_time(off, GIB) - collective_time(sc, GIB) == pytest.approx(GIB / (0.8 * 31.5e9), rel=0.01)


def test_torus_with_rows_of_a_node_is_the_hierarchical_all_reduce():
    sc = {"cluster": {"node": "dgx-a100", "nodes": 4}}
    assert collective_time(sc, GIB, "torus2d") == pytest.approx(collective_time(sc, GIB, "hierarchical"), rel=1e-9)


@pytest.mark.parametrize("key, value, words", [
    ("cluster.transport", '"carrier-pigeon"', "unknown value 'carrier-pigeon'"),
    ("sync.call_overhead_us", "-1.0", "must be >= 0"),
    ("cluster.transport", '"efa"', "does not run over a ethernet link"),
])
def test_bad_transport_or_per_call_cost_is_one_line_exit_2(tmp_path, dpsim_command, key, value, words):
    section, name = key.split(".")
    f = tmp_path / "s.toml"
    f.write_text(f"[cluster]\nnodes = 2\n[{section}]\n{name} = {value}\n" if section != "cluster"
                 else f"[cluster]\nnodes = 2\n{name} = {value}\n")
    p = dpsim_command("run", str(f))
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert key in p.stderr and words in p.stderr
