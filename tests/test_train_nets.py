"""Backward passes of the MLP and the CNN against central-difference numerical gradients."""
import numpy as np
import pytest

from mpi_impl import nets


def numerical_grads(net, x, y, eps=1e-6):
    """d(loss)/d(params) by central differences, one parameter at a time (float64)."""
    grads = np.zeros_like(net.params)
    for i in range(net.num_params):
        old = net.params[i]
        net.params[i] = old + eps
        plus = nets.softmax_cross_entropy(net.forward(x), y)[0]
        net.params[i] = old - eps
        minus = nets.softmax_cross_entropy(net.forward(x), y)[0]
        net.params[i] = old
        grads[i] = (plus - minus) / (2 * eps)
    return grads


def analytic_grads(net, x, y):
    _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
    net.backward(dlogits)
    return net.grads.copy()


@pytest.mark.parametrize("name, shape, width, depth", [
    ("mlp", (1, 4, 4), 7, 2),
    ("cnn", (2, 4, 4), 3, 1),
])
def test_backward_matches_numerical_gradient(name, shape, width, depth):
    rng = np.random.default_rng(1)
    net = nets.build(name, shape, classes=5, width=width, depth=depth, dtype="float64", seed=3)
    # Small non-zero biases so that ReLU kinks and pooling ties are not hit exactly.
    net.params += 0.01 * rng.standard_normal(net.num_params)
    x = rng.standard_normal((6, *shape))
    y = rng.integers(0, 5, size=6)
    analytic = analytic_grads(net, x, y)
    numeric = numerical_grads(net, x, y)
    rel = np.abs(analytic - numeric).max() / max(np.abs(numeric).max(), 1e-12)
    assert rel < 1e-6, rel


def test_gradient_check_can_fail():
    """A broken backward (a sign flip in one layer) must be caught by the same comparison."""
    rng = np.random.default_rng(2)
    net = nets.build("mlp", (1, 4, 4), classes=3, width=5, depth=1, dtype="float64", seed=0)
    x = rng.standard_normal((4, 1, 4, 4))
    y = rng.integers(0, 3, size=4)
    analytic = analytic_grads(net, x, y)
    analytic[:10] *= -1
    numeric = numerical_grads(net, x, y)
    assert np.abs(analytic - numeric).max() / np.abs(numeric).max() > 1e-3


def test_flat_buffers_are_shared_views():
    net = nets.build("cnn", (1, 8, 8), classes=10, width=4, depth=1, dtype="float32")
    conv = net.layers[0]
    assert np.shares_memory(conv.W, net.params) and np.shares_memory(conv.dW, net.grads)
    net.params[:] = 0
    assert float(np.abs(conv.W).sum()) == 0.0
    offsets = [(lo, hi) for _, lo, hi in net.layer_offsets]
    assert offsets[0][0] == 0 and offsets[-1][1] == net.num_params
    assert all(a[1] == b[0] for a, b in zip(offsets, offsets[1:]))


def test_parameter_and_flop_counts():
    mlp = nets.build("mlp", (1, 8, 8), classes=10, width=32, depth=2, dtype="float32")
    assert mlp.num_params == 64 * 32 + 32 + 32 * 32 + 32 + 32 * 10 + 10
    assert mlp.flops_per_sample == 2 * (64 * 32 + 32 * 32 + 32 * 10) + (32 + 32 + 10) + 2 * 32
    cnn = nets.build("cnn", (1, 8, 8), classes=10, width=4, depth=1, dtype="float32")
    conv1 = 2 * 1 * 9 * 4 * 64 + 4 * 64
    conv2 = 2 * 4 * 9 * 8 * 16 + 8 * 16
    linear = 2 * 8 * 4 * 10 + 10
    relu_pool = 2 * (4 * 64) + 2 * (8 * 16)
    assert cnn.flops_per_sample == conv1 + conv2 + linear + relu_pool
    assert cnn.num_params == 4 * 9 + 4 + 8 * 4 * 9 + 8 + 32 * 10 + 10
