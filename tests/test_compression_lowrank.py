"""PowerSGD and top-k in the simulator against dpsim.analytic's closed forms: bytes on the wire
and the time of one sync with its kernels, where nothing contends."""
import math

import pytest

from dpsim import analytic, load_scenario, models
from dpsim.engine import Engine
from dpsim.hardware import GPUS

from dpsim_helpers import star

GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)
ALPHA, BETA = 6e-6, 1 / 12.5e9
LAUNCH, MEM_BW = 5e-6, GPUS["v100"].mem_bw_gbs * 1e9       # compute.kernel_launch_us, the codec's bandwidth


def scenario(n, compression, preset="resnet20-cifar", **sync):
    data = star(n, 12.5, 3.0, compression=compression, **sync)
    data["model"] = {"preset": preset}
    data["training"] = {"iterations": 2, "warmup_iterations": 1}
    return load_scenario(data)


def matrices_and_vectors(preset):
    """The layer table's weight matrices (n, m) and every other parameter."""
    model = models.get_model(preset)
    matrices = [layer.matrix for layer in model.layers if layer.matrix]
    return matrices, model.params - sum(n * m for n, m in matrices)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("rank", [1, 4])
def test_powersgd_sync_matches_closed_form(n, rank):
    sc = scenario(n, "powersgd", powersgd_rank=rank)
    matrices, vectors = matrices_and_vectors("resnet20-cifar")
    p, q, u = analytic.powersgd_wire(matrices, vectors, rank)
    flops = GPUS["v100"].fp32_tflops * 1e12 * sc.compute.efficiency
    expected = (sum(analytic.ring(n, b, ALPHA, BETA, GAMMA) for b in (p, q, u))
                + analytic.powersgd_codec(matrices, vectors, rank, LAUNCH, MEM_BW, flops))
    assert Engine(sc).sync_alone() == pytest.approx(expected, rel=0.01)
    sent = Engine(sc).run().bytes_sent_per_gpu
    assert sent == pytest.approx(2 * (n - 1) / n * (p + q + u), rel=1e-9)


def test_powersgd_products_and_gram_schmidt_are_flop_bound_on_a_slow_gpu():
    """At 1% of peak the products and the orthogonalisation take their FLOPs' time (at rank 64
    on BERT's 768-wide matrices Gram-Schmidt is r / 3m = 3% of the products); the matrices
    compressed are those where n m >= 2 (n + m) r' (PyTorch's min_compression_rate)."""
    rank, n = 64, 2
    data = {**star(n, 12.5, 3.0, compression="powersgd", powersgd_rank=rank),
            "model": {"preset": "bert-base"}, "compute": {"efficiency": 0.01}}
    model = models.get_model("bert-base")
    shapes = [layer.matrix for layer in model.layers if layer.matrix]
    matrices = [(a, b) for a, b in shapes if a * b >= 2 * (a + b) * min(rank, a, b)]
    vectors = model.params - sum(a * b for a, b in matrices)
    p, q, u = analytic.powersgd_wire(matrices, vectors, rank)
    flops = GPUS["v100"].fp32_tflops * 1e12 * 0.01
    expected = (sum(analytic.ring(n, b, ALPHA, BETA, GAMMA) for b in (p, q, u))
                + analytic.powersgd_codec(matrices, vectors, rank, LAUNCH, MEM_BW, flops))
    sc = load_scenario(data)
    assert Engine(sc).sync_alone() == pytest.approx(expected, rel=0.01)
    assert Engine(sc).run().bytes_sent_per_gpu == pytest.approx((p + q + u) * 2 * (n - 1) / n, rel=1e-9)


def test_powersgd_sends_r_times_n_plus_m_per_matrix():
    """Written out by hand for one 64 x 576 convolution at rank 2: P is 64 x 2, Q is 576 x 2."""
    p, q, u = analytic.powersgd_wire([(64, 576)], 0, 2)
    assert (p, q, u) == (4 * 64 * 2, 4 * 576 * 2, 0)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("ratio", [0.01, 0.5])
def test_topk_sync_matches_closed_form(n, ratio):
    sc = scenario(n, "topk", topk_ratio=ratio)
    values = models.get_model("resnet20-cifar").params
    expected = analytic.topk(n, values, ratio, ALPHA, BETA, LAUNCH, MEM_BW)
    assert Engine(sc).sync_alone() == pytest.approx(expected, rel=0.01)
    k = math.ceil(ratio * values)
    assert Engine(sc).run().bytes_sent_per_gpu == pytest.approx((n - 1) * 8 * k, rel=1e-9)
    assert analytic.topk_bytes_per_gpu(n, values, ratio) == (n - 1) * 8 * k


def test_topk_sends_less_than_the_ring_only_below_one_value_in_n():
    n, values = 8, 1e6
    ring_bytes = 2 * (n - 1) / n * 4 * values
    assert analytic.topk_bytes_per_gpu(n, values, 0.1) < ring_bytes < analytic.topk_bytes_per_gpu(n, values, 0.2)


@pytest.mark.parametrize("gflops", [5.0, 50.0])
def test_powersgd_products_take_their_flops_at_compute_powersgd_gflops(gflops):
    """compute.powersgd_gflops (course calibrate measures NumPy's) replaces peak x efficiency
    for the products and Gram-Schmidt, each still the longer of FLOPs / rate and bytes /
    memory bandwidth; at 5 GFLOP/s the products take several times what they take at the
    V100's 0.6 x 15.7 TFLOP/s."""
    n, rank = 2, 4
    data = {**star(n, 12.5, 3.0, compression="powersgd", powersgd_rank=rank),
            "model": {"preset": "resnet20-cifar"}, "compute": {"powersgd_gflops": gflops},
            "training": {"iterations": 2, "warmup_iterations": 1}}
    matrices, vectors = matrices_and_vectors("resnet20-cifar")
    p, q, u = analytic.powersgd_wire(matrices, vectors, rank)
    wire = sum(analytic.ring(n, b, ALPHA, BETA, GAMMA) for b in (p, q, u))
    expected = wire + analytic.powersgd_codec(matrices, vectors, rank, LAUNCH, MEM_BW, gflops * 1e9)
    at_peak = wire + analytic.powersgd_codec(matrices, vectors, rank, LAUNCH, MEM_BW,
                                             GPUS["v100"].fp32_tflops * 1e12 * 0.6)
    assert Engine(load_scenario(data)).sync_alone() == pytest.approx(expected, rel=0.01)
    assert expected > 1.1 * at_peak


@pytest.mark.parametrize("rank", [1, 4])
def test_error_from_the_own_approximation_costs_one_more_product(rank):
    """sync.powersgd_error = "local" (Vogels et al., Algorithm 2, as mpi_impl runs it): the error is
    M - P Q_w^T with this GPU's own Q, a fourth product; the wire is the same."""
    n = 2
    sc = scenario(n, "powersgd", powersgd_rank=rank, powersgd_error="local")
    matrices, vectors = matrices_and_vectors("resnet20-cifar")
    p, q, u = analytic.powersgd_wire(matrices, vectors, rank)
    flops = GPUS["v100"].fp32_tflops * 1e12 * sc.compute.efficiency
    wire = sum(analytic.ring(n, b, ALPHA, BETA, GAMMA) for b in (p, q, u))
    expected = wire + analytic.powersgd_codec(matrices, vectors, rank, LAUNCH, MEM_BW, flops, products=4)
    assert Engine(sc).sync_alone() == pytest.approx(expected, rel=0.01)
    rs = [(a, b, min(rank, a, b)) for a, b in matrices]          # one product by hand, at V100's bandwidth
    one_product = LAUNCH * len(rs) + max(4 * sum(a * b + a * r + b * r for a, b, r in rs) / MEM_BW,
                                         2 * sum(a * b * r for a, b, r in rs) / flops)
    plain = Engine(scenario(n, "powersgd", powersgd_rank=rank)).sync_alone()
    assert Engine(sc).sync_alone() - plain == pytest.approx(one_product, rel=1e-6)
