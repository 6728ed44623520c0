"""Two small networks with hand-written backward passes: an MLP and a CNN.

Everything is plain array code on `xp`, which is NumPy on a CPU and CuPy on a GPU, so the
same lines run on both. Every layer has `forward(x)` and `backward(dout)`; backward writes
the layer's parameter gradients in place and returns the gradient with respect to its input.

All parameters of a network live in ONE flat contiguous buffer, `net.params`, and every
layer's weights are views into it; the gradients likewise live in `net.grads`. So
synchronising the whole gradient is one all-reduce of `net.grads`, and a gradient bucket
is just a slice `net.grads[lo:hi]`. Layers are laid out in forward order, so backward
fills the gradient buffer from the end towards the start: when backward has finished the
layer that starts at offset `lo`, the slice `grads[lo:]` is final.

Cost model (the simulator's inputs): `net.num_params` and `net.flops_per_sample`, the
forward-pass floating-point operations for one sample. Each layer's docstring states its
count; a multiply-add counts as 2. Backward costs about twice the forward pass (one matmul
for the input gradient and one for the weight gradient per matmul in forward), so a training
step is about 3 * flops_per_sample per sample.
"""
import math

import numpy as np


# ----------------------------------------------------------------------------- layers

class Layer:
    """A layer without parameters unless it overrides `param_shapes`."""

    def param_shapes(self):
        return {}

    def bind(self, params, grads):
        """Receive views into the flat buffers: name -> array of the shape asked for."""

    def init(self, rng, xp):
        """Fill the bound parameters with their initial values (rng: a NumPy Generator)."""

    def flops(self):
        return 0


class Linear(Layer):
    """y = x @ W + b, with x of shape (B, n_in).

    FLOPs per sample: 2 * n_in * n_out (the matmul) + n_out (the bias).
    """

    def __init__(self, n_in, n_out):
        self.n_in, self.n_out = n_in, n_out

    def param_shapes(self):
        return {"W": (self.n_in, self.n_out), "b": (self.n_out,)}

    def bind(self, params, grads):
        self.W, self.b = params["W"], params["b"]
        self.dW, self.db = grads["W"], grads["b"]

    def init(self, rng, xp):
        # He initialisation: keeps activations at a steady scale through ReLU layers.
        scale = math.sqrt(2.0 / self.n_in)
        self.W[...] = xp.asarray(rng.standard_normal(self.W.shape) * scale)
        self.b[...] = 0

    def forward(self, x):
        self.x = x
        return x @ self.W + self.b

    def backward(self, dout):
        self.dW[...] = self.x.T @ dout
        self.db[...] = dout.sum(axis=0)
        return dout @ self.W.T

    def flops(self):
        return 2 * self.n_in * self.n_out + self.n_out


class ReLU(Layer):
    """y = max(x, 0). FLOPs per sample: one per element."""

    def __init__(self, size):
        self.size = size

    def forward(self, x):
        self.positive = x > 0
        return x * self.positive

    def backward(self, dout):
        return dout * self.positive

    def flops(self):
        return self.size


class Flatten(Layer):
    """(B, C, H, W) -> (B, C*H*W). Free."""

    def forward(self, x):
        self.shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dout):
        return dout.reshape(self.shape)


def array_module(a):
    """numpy or cupy, whichever module the array `a` belongs to (cupy imported only then)."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def _pad(x, pad):
    if pad == 0:
        return x
    return array_module(x).pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))


def _zeros_like_shape(a, shape):
    return array_module(a).zeros(shape, dtype=a.dtype)


def im2col(x, k):
    """Unfold every k x k patch of x (B, C, H, W), zero-padded to keep H x W ("same").

    Returns an array of shape (B*H*W, C*k*k): one row per output pixel, holding the input
    patch that the kernel sees there. A convolution is then one matmul with the kernels.
    Done with k*k slice copies (one per kernel offset), no index arithmetic.
    """
    B, C, H, W = x.shape
    pad = k // 2
    xpad = _pad(x, pad)
    cols = array_module(x).empty((B, C, k, k, H, W), dtype=x.dtype)
    for di in range(k):
        for dj in range(k):
            cols[:, :, di, dj] = xpad[:, :, di:di + H, dj:dj + W]
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(B * H * W, C * k * k)


def col2im(cols, x_shape, k):
    """The adjoint of im2col: add every patch gradient back where its pixels came from."""
    B, C, H, W = x_shape
    pad = k // 2
    cols = cols.reshape(B, H, W, C, k, k).transpose(0, 3, 4, 5, 1, 2)
    xpad = _zeros_like_shape(cols, (B, C, H + 2 * pad, W + 2 * pad))
    for di in range(k):
        for dj in range(k):
            xpad[:, :, di:di + H, dj:dj + W] += cols[:, :, di, dj]
    return xpad[:, :, pad:pad + H, pad:pad + W]


class Conv2d(Layer):
    """k x k convolution, stride 1, zero padding k//2 (output H x W = input H x W).

    Input (B, C, H, W), kernels W of shape (F, C, k, k), output (B, F, H, W).
    Computed as im2col followed by one matmul (B*H*W, C*k*k) @ (C*k*k, F).
    FLOPs per sample: 2 * C*k*k * F * H*W (the matmul) + F * H*W (the bias).
    """

    def __init__(self, c_in, c_out, k, height, width):
        self.c_in, self.c_out, self.k = c_in, c_out, k
        self.height, self.width = height, width

    def param_shapes(self):
        return {"W": (self.c_out, self.c_in, self.k, self.k), "b": (self.c_out,)}

    def bind(self, params, grads):
        self.W, self.b = params["W"], params["b"]
        self.dW, self.db = grads["W"], grads["b"]

    def init(self, rng, xp):
        fan_in = self.c_in * self.k * self.k
        self.W[...] = xp.asarray(rng.standard_normal(self.W.shape) * math.sqrt(2.0 / fan_in))
        self.b[...] = 0

    def forward(self, x):
        B, C, H, W = x.shape
        self.x_shape = x.shape
        self.cols = im2col(x, self.k)                        # (B*H*W, C*k*k)
        kernels = self.W.reshape(self.c_out, -1)              # (F, C*k*k)
        out = self.cols @ kernels.T + self.b                  # (B*H*W, F)
        return out.reshape(B, H, W, self.c_out).transpose(0, 3, 1, 2)

    def backward(self, dout):
        B, F, H, W = dout.shape
        dout = dout.transpose(0, 2, 3, 1).reshape(B * H * W, F)
        self.dW[...] = (dout.T @ self.cols).reshape(self.W.shape)
        self.db[...] = dout.sum(axis=0)
        dcols = dout @ self.W.reshape(F, -1)                  # (B*H*W, C*k*k)
        return col2im(dcols, self.x_shape, self.k)

    def flops(self):
        pixels = self.height * self.width
        return 2 * self.c_in * self.k * self.k * self.c_out * pixels + self.c_out * pixels


class MaxPool2(Layer):
    """2 x 2 max pooling with stride 2: (B, C, H, W) -> (B, C, H/2, W/2).

    FLOPs per sample: one comparison per input element, C * H * W.
    """

    def __init__(self, channels, height, width):
        self.size = channels * height * width

    def forward(self, x):
        B, C, H, W = x.shape
        self.x_shape = x.shape
        windows = x.reshape(B, C, H // 2, 2, W // 2, 2).transpose(0, 1, 2, 4, 3, 5)
        windows = windows.reshape(B, C, H // 2, W // 2, 4)
        self.winner = windows.argmax(axis=-1)                 # which of the 4 won
        return windows.max(axis=-1)

    def backward(self, dout):
        B, C, H, W = self.x_shape
        xp = array_module(dout)
        onehot = self.winner[..., None] == xp.arange(4)       # (B, C, H/2, W/2, 4)
        dwin = onehot * dout[..., None]
        dwin = dwin.reshape(B, C, H // 2, W // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        return dwin.reshape(B, C, H, W)

    def flops(self):
        return self.size


# ----------------------------------------------------------------------------- networks

class Net:
    """A stack of layers whose parameters and gradients share one flat buffer each.

    Attributes: `params`, `grads` (flat arrays), `num_params`, `flops_per_sample`,
    `layer_offsets` (start offset of each layer's parameters in the flat buffer, forward
    order; layers without parameters are skipped).
    """

    name = "net"
    hooks = None        # sharded training (zero.py): told before and after each layer with parameters

    def __init__(self, layers, input_shape, xp=np, dtype="float32", seed=0):
        self.layers = layers
        self.input_shape = tuple(input_shape)
        self.xp = xp
        shapes = [layer.param_shapes() for layer in layers]
        sizes = [sum(math.prod(s) for s in layer_shapes.values()) for layer_shapes in shapes]
        self.num_params = sum(sizes)
        self.params = xp.zeros(self.num_params, dtype=dtype)
        self.grads = xp.zeros(self.num_params, dtype=dtype)
        self.layer_offsets = []                # (layer index, lo, hi) for layers with params
        self.flat_of = {}                      # layer index -> [its params, its grads], flat
        offset = 0
        for i, size in enumerate(sizes):
            if size:
                self.layer_offsets.append((i, offset, offset + size))
                self.bind_layer(i, self.params[offset:offset + size], self.grads[offset:offset + size])
                offset += size
        rng = np.random.default_rng(seed)
        for layer in layers:
            layer.init(rng, xp)
        self.flops_per_sample = sum(layer.flops() for layer in layers)

    def bind_layer(self, i, params=False, grads=False):
        """Point layer i's parameters and/or gradients at the flat arrays given (of that
        layer's length), or None to let go of them (sharded training frees what it does not
        need); False keeps what the layer has."""
        flat = self.flat_of.setdefault(i, [None, None])
        if params is not False:
            flat[0] = params
        if grads is not False:
            flat[1] = grads
        views = [{}, {}]
        for k in (0, 1):
            offset = 0
            for name, shape in self.layers[i].param_shapes().items():
                n = math.prod(shape)
                views[k][name] = None if flat[k] is None else flat[k][offset:offset + n].reshape(shape)
                offset += n
        self.layers[i].bind(*views)

    def forward(self, x):
        """x: (B, *input_shape) -> logits (B, classes)."""
        hooks = self.hooks
        for i, layer in enumerate(self.layers):
            if hooks and i in self.flat_of:
                hooks.before_forward(i)
            x = layer.forward(x)
            if hooks and i in self.flat_of:
                hooks.after_forward(i)
        return x

    def backward(self, dlogits, on_grads_ready=None):
        """Backpropagate; fills self.grads. After each layer with parameters finishes,
        call on_grads_ready(lo): from then on grads[lo:] is final (used for overlap)."""
        starts = {i: lo for i, lo, _ in self.layer_offsets}
        hooks = self.hooks
        d = dlogits
        for i in range(len(self.layers) - 1, -1, -1):
            if hooks and i in starts:
                hooks.before_backward(i)
            d = self.layers[i].backward(d)
            if hooks and i in starts:
                hooks.after_backward(i)
            if on_grads_ready is not None and i in starts:
                on_grads_ready(starts[i])
        return d

    def describe(self):
        return f"{self.name}: {self.num_params:,} parameters, {self.flops_per_sample:,} forward FLOPs per sample"


class MLP(Net):
    """Fully connected: flatten -> [Linear(width) -> ReLU] * depth -> Linear(classes).

    Width and depth set parameters and FLOPs independently of the input: parameters are
    about depth * width^2, FLOPs per sample about 2 * parameters.
    """

    name = "mlp"

    def __init__(self, input_shape, classes, width=64, depth=1, **kw):
        n_in = math.prod(input_shape)
        layers = [Flatten()]
        for _ in range(depth):
            layers += [Linear(n_in, width), ReLU(width)]
            n_in = width
        layers.append(Linear(n_in, classes))
        super().__init__(layers, input_shape, **kw)


class CNN(Net):
    """Small convolutional net for (C, H, W) images, H and W divisible by 4:

    conv3x3(width) -> ReLU -> maxpool2 -> conv3x3(2*width) -> ReLU -> maxpool2 -> Linear(classes).
    Convolutions reuse each weight at every pixel, so FLOPs per parameter are high.
    """

    name = "cnn"

    def __init__(self, input_shape, classes, width=8, **kw):
        C, H, W = input_shape
        if H % 4 or W % 4:
            raise ValueError(f"cnn needs image height and width divisible by 4, got {H}x{W}")
        c1, c2 = width, 2 * width
        layers = [
            Conv2d(C, c1, 3, H, W), ReLU(c1 * H * W), MaxPool2(c1, H, W),
            Conv2d(c1, c2, 3, H // 2, W // 2), ReLU(c2 * H * W // 4), MaxPool2(c2, H // 2, W // 2),
            Flatten(), Linear(c2 * (H // 4) * (W // 4), classes),
        ]
        super().__init__(layers, input_shape, **kw)


def build(name, input_shape, classes, width, depth, xp=np, dtype="float32", seed=0):
    """Make the network called `name` ("mlp" or "cnn")."""
    if name == "mlp":
        return MLP(input_shape, classes, width=width, depth=depth, xp=xp, dtype=dtype, seed=seed)
    if name == "cnn":
        return CNN(input_shape, classes, width=width, xp=xp, dtype=dtype, seed=seed)
    raise ValueError(f"unknown model {name!r}")


# ----------------------------------------------------------------------------- loss

def softmax_cross_entropy(logits, labels):
    """Mean cross-entropy over the batch.

    Returns (loss, dlogits, correct): dlogits is d(mean loss)/d(logits), correct is the
    number of samples whose largest logit is the true class.
    """
    xp = array_module(logits)
    B = logits.shape[0]
    shifted = logits - logits.max(axis=1, keepdims=True)      # for numerical stability
    log_probs = shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))
    rows = xp.arange(B)
    loss = -log_probs[rows, labels].mean()
    dlogits = xp.exp(log_probs)
    dlogits[rows, labels] -= 1
    dlogits /= B
    correct = (logits.argmax(axis=1) == labels).sum()
    return loss, dlogits, correct
