"""Model presets: parameters, FLOPs per sample, and gradients in the order backward makes them.

The simulator needs three things from a model:

* how many parameters it has (that is how many gradient bytes every GPU must synchronise),
* how much arithmetic one training sample costs (that sets the compute time on a GPU),
* the size of each layer's gradient, in the order the backward pass produces them, so the
  gradients can be packed into buckets (PyTorch DDP's 25 MB cap) and each bucket's all-reduce
  can start while the rest of the backward pass is still running.

Nothing here is typed in as a total. Each preset is *built*: a small builder walks the network
layer by layer, the way its forward pass runs, and records one `Layer` per module that has
parameters (a convolution, a batch norm, a fully connected layer, an embedding, an attention
projection, a layer norm). The totals are sums over those layers, and tests/test_models.py
checks them against the published figures (the papers and the torchvision.models
documentation), which the builders never read.

Counting conventions (every preset follows them):

* Parameters are trainable tensors only: weights, biases, and the scale and shift (gamma,
  beta) of a batch norm or layer norm. A batch norm's running mean and variance are buffers,
  not parameters. Each batch norm is a Layer of its own, right after the conv it normalises.
* FLOPs: one multiply-add counts as 2 FLOPs. We count the multiply-adds of convolutions, fully
  connected (linear) layers and the two attention matmuls (Q K^T and scores x V). Elementwise
  work (normalisation, activations, pooling, residual additions, softmax, bias additions,
  embedding look-ups) is left out: it is a percent or two of the total, and the published
  GMAC figures we check against leave it out too. A layer with parameters but no counted
  arithmetic (a batch norm, an embedding) has fwd_flops = 0.
* Backward costs 2 x forward: for every weight-bearing op, backward computes the gradient with
  respect to its input (one matmul of the same size as forward) and the gradient with respect
  to its weights (another one). So a training step costs forward + backward = 3 x forward
  FLOPs per sample. (The very first layer needs no input gradient, so this slightly
  over-counts; the simulator ignores that.)
"""
from __future__ import annotations

import operator
from dataclasses import dataclass

__all__ = [
    "Layer", "Model", "MODELS", "get_model", "custom_model",
    "resnet_cifar", "resnet_cifar_basic", "resnet_imagenet", "inception_v3", "alexnet",
    "vgg16", "bert",
]

BACKWARD_FLOPS_FACTOR = 2.0   # backward FLOPs = 2 x forward FLOPs (see the module docstring)


@dataclass(frozen=True)
class Layer:
    name: str            # e.g. "layer3.1.conv2"
    params: int          # trainable parameters (weights + biases + norm scale/shift)
    fwd_flops: float     # forward FLOPs per sample (a multiply-add counts as 2 FLOPs)
    norm_values: int = 0  # a batch/layer norm: values per sample it normalises (memory-bound)
    kept_values: int = 0  # values per sample of its output, kept for backward (activation_values)
    matrix: tuple = ()    # (rows, columns) of its weight as a matrix (PowerSGD); () for vectors only


# Activations (dpsim.memory): every layer the table records keeps its output for backward, at the
# width of compute.precision (4 bytes fp32, 2 fp16): one tensor per convolution, norm and linear
# layer, one for BERT's summed embeddings, two per attention (the scores and their softmax).
# Activation functions, pooling, residual additions, dropout masks and the frameworks' workspace
# are not counted, so this is an estimate below what PyTorch holds (ReLU in place keeps no copy;
# a max pool keeps its indices). A custom model has no layer table: activations 0.
ACTIVATIONS = "each recorded layer's output, kept for backward (models.ACTIVATIONS)"

# A norm's backward reads its input and the incoming gradient and writes the outgoing one:
# 3 FP32 arrays of its size (forward reads one and writes one). It does no counted FLOPs, so
# its time is set by memory bandwidth, not by the GPU's FLOP rate (compute.per_layer).
NORM_BACKWARD_BYTES_PER_VALUE = 3 * 4


@dataclass(frozen=True)
class Model:
    name: str                    # preset name, e.g. "resnet50"
    description: str             # one line: what it is, input size
    layers: tuple[Layer, ...]    # in FORWARD order
    source: str                  # where the architecture and the checked figures come from

    def __post_init__(self):
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ValueError(f"model '{self.name}' has no layers")
        for layer in self.layers:
            if layer.params < 0 or layer.fwd_flops < 0:
                raise ValueError(f"model '{self.name}', layer '{layer.name}': "
                                 "params and fwd_flops must be >= 0")

    @property
    def params(self) -> int:
        """Total trainable parameters."""
        return sum(layer.params for layer in self.layers)

    @property
    def fwd_flops_per_sample(self) -> float:
        """Forward-pass FLOPs for one sample."""
        return sum(layer.fwd_flops for layer in self.layers)

    @property
    def flops_per_sample(self) -> float:
        """Training FLOPs for one sample: forward + backward = 3 x forward (backward = 2 x forward)."""
        return (1.0 + BACKWARD_FLOPS_FACTOR) * self.fwd_flops_per_sample

    @property
    def activation_values(self) -> int:
        """Values per sample kept for backward: the output of every layer the table records
        (ACTIVATIONS says what is and is not counted)."""
        return sum(layer.kept_values for layer in self.layers)

    def grad_bytes_backward(self, bytes_per_param: int = 4) -> list[int]:
        """Gradient size of each layer in BACKWARD order (last layer first); layers without
        parameters have no gradient and are skipped. Sums to params * bytes_per_param."""
        return [layer.params * bytes_per_param
                for layer in reversed(self.layers) if layer.params > 0]

    def backward_flops_fraction(self) -> list[float]:
        """Each layer's share of the backward pass's FLOPs, in backward order, one entry per
        entry of grad_bytes_backward(). A layer without parameters (attention scores) has no
        gradient of its own; its backward work is added to the next layer backward reaches
        that has parameters (or, at the very end, to the last one). The shares sum to 1.

        The simulator uses this to time when each gradient is ready: layer i's gradient exists
        once the fractions of layers 0..i of the backward pass have been computed."""
        return self.backward_time_fraction(1.0, 0.0)

    def backward_time_fraction(self, s_per_flop: float, s_per_byte: float) -> list[float]:
        """As backward_flops_fraction, with each layer's backward timed by its kind
        (compute.per_layer): convolutions, linear layers and attention products at
        s_per_flop per FLOP, norms at s_per_byte per byte of memory they move."""
        shares: list[float] = []
        carried = 0.0          # backward work of zero-parameter layers not yet assigned
        for layer in reversed(self.layers):
            carried += (BACKWARD_FLOPS_FACTOR * layer.fwd_flops * s_per_flop
                        + NORM_BACKWARD_BYTES_PER_VALUE * layer.norm_values * s_per_byte)
            if layer.params > 0:
                shares.append(carried)
                carried = 0.0
        shares[-1] += carried
        total = sum(shares)
        if total == 0:         # a model with no counted arithmetic: spread backward evenly
            return [1.0 / len(shares)] * len(shares)
        return [s / total for s in shares]


# --------------------------------------------------------------------------------------------
# The builder: records layers while tracking the activation shape (channels, height, width).
# --------------------------------------------------------------------------------------------

def _out_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output length of a convolution or pooling window along one spatial axis."""
    return (size + 2 * padding - kernel) // stride + 1


def _pair(x) -> tuple[int, int]:
    return (x, x) if isinstance(x, int) else tuple(x)


class Net:
    """Walks a network in forward order. `shape` is the current activation (C, H, W) of ONE
    sample; each method appends the Layer it creates (if any) and updates the shape."""

    def __init__(self, channels: int, height: int, width: int | None = None):
        self.layers: list[Layer] = []
        self.shape = (channels, height, height if width is None else width)

    @property
    def channels(self) -> int:
        return self.shape[0]

    def conv(self, name: str, out_channels: int, kernel, stride=1, padding=0,
             bias: bool = False) -> "Net":
        """2-D convolution. kernel, stride, padding: an int or an (h, w) pair."""
        c, h, w = self.shape
        (kh, kw), (sh, sw), (ph, pw) = _pair(kernel), _pair(stride), _pair(padding)
        oh, ow = _out_size(h, kh, sh, ph), _out_size(w, kw, sw, pw)
        weights = out_channels * c * kh * kw
        macs = weights * oh * ow              # every weight is used once per output position
        self.layers.append(Layer(name, weights + (out_channels if bias else 0), 2.0 * macs,
                                 kept_values=out_channels * oh * ow, matrix=(out_channels, c * kh * kw)))
        self.shape = (out_channels, oh, ow)
        return self

    def bn(self, name: str) -> "Net":
        """Batch norm: a scale and a shift per channel (running stats are not parameters)."""
        c, h, w = self.shape
        self.layers.append(Layer(name, 2 * c, 0.0, norm_values=c * h * w, kept_values=c * h * w))
        return self

    def pool(self, kernel: int, stride: int, padding: int = 0) -> "Net":
        """Max or average pooling: no parameters, no counted FLOPs, only the size changes."""
        c, h, w = self.shape
        self.shape = (c, _out_size(h, kernel, stride, padding), _out_size(w, kernel, stride, padding))
        return self

    def global_pool(self) -> "Net":
        """Average over the whole feature map: C x H x W -> C x 1 x 1."""
        self.shape = (self.channels, 1, 1)
        return self

    def flatten(self) -> "Net":
        c, h, w = self.shape
        self.shape = (c * h * w, 1, 1)
        return self

    def linear(self, name: str, out_features: int, bias: bool = True, tokens: int = 1) -> "Net":
        """Fully connected layer applied to `tokens` vectors per sample (1 for a CNN head,
        the sequence length for a transformer)."""
        weights = self.channels * out_features
        self.layers.append(Layer(name, weights + (out_features if bias else 0),
                                 2.0 * weights * tokens, kept_values=out_features * tokens,
                                 matrix=(out_features, self.channels)))
        self.shape = (out_features, 1, 1)
        return self

    def add(self, layer: Layer) -> "Net":
        """Append a hand-made layer (embeddings, attention scores)."""
        self.layers.append(layer)
        return self


def conv_bn(net: Net, name: str, bn_name: str, out_channels: int, kernel, stride=1, padding=0) -> Net:
    """A conv without bias followed by its batch norm (the usual CNN pair)."""
    return net.conv(name, out_channels, kernel, stride, padding).bn(bn_name)


# --------------------------------------------------------------------------------------------
# ResNets
# --------------------------------------------------------------------------------------------

def _basic_block(net: Net, prefix: str, width: int, stride: int, shortcut: str) -> None:
    """Two 3x3 convs (He et al. 2016, Fig. 2 left). When the shape changes, the shortcut is
    option "A" (identity with zero-padded channels: no parameters) or "B" (1x1 conv + bn)."""
    in_channels, h, w = net.shape
    conv_bn(net, f"{prefix}.conv1", f"{prefix}.bn1", width, 3, stride, 1)
    conv_bn(net, f"{prefix}.conv2", f"{prefix}.bn2", width, 3, 1, 1)
    if (stride != 1 or in_channels != width) and shortcut == "B":
        out_shape = net.shape
        net.shape = (in_channels, h, w)
        conv_bn(net, f"{prefix}.downsample.0", f"{prefix}.downsample.1", width, 1, stride, 0)
        assert net.shape == out_shape
    elif shortcut not in ("A", "B"):
        raise ValueError(f"shortcut must be 'A' or 'B', not {shortcut!r}")


def resnet_cifar_basic(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), num_classes: int = 10,
                       shortcut: str = "B", input_size: int = 32) -> list[Layer]:
    """A basic-block ResNet for 32x32 images: a 3x3 stem conv (stride 1, no max pool), one
    stage per entry of `widths` (stride 2 at the start of every stage but the first), global
    average pool, one fully connected layer."""
    net = Net(3, input_size)
    conv_bn(net, "conv1", "bn1", widths[0], 3, 1, 1)
    for stage, (width, n) in enumerate(zip(widths, blocks)):
        for i in range(n):
            stride = 2 if (stage > 0 and i == 0) else 1
            _basic_block(net, f"layer{stage + 1}.{i}", width, stride, shortcut)
    net.global_pool().linear("fc", num_classes)
    return net.layers


def resnet_cifar(n: int = 3, num_classes: int = 10) -> list[Layer]:
    """He et al. 2016, Sec. 4.2: the 6n+2-layer CIFAR ResNet: 3 stages of n basic blocks with
    16/32/64 filters on 32x32/16x16/8x8 maps, option A (parameter-free) shortcuts.
    n=3 is ResNet-20, n=5 ResNet-32, n=9 ResNet-56, n=18 ResNet-110."""
    return resnet_cifar_basic((16, 32, 64), (n, n, n), num_classes, shortcut="A")


def _bottleneck(net: Net, prefix: str, width: int, stride: int) -> None:
    """1x1 reduce, 3x3 (carries the stride: torchvision's "ResNet v1.5"), 1x1 expand x4.
    The first block of each stage has a 1x1 conv + bn projection shortcut."""
    in_channels, h, w = net.shape
    conv_bn(net, f"{prefix}.conv1", f"{prefix}.bn1", width, 1)
    conv_bn(net, f"{prefix}.conv2", f"{prefix}.bn2", width, 3, stride, 1)
    conv_bn(net, f"{prefix}.conv3", f"{prefix}.bn3", 4 * width, 1)
    if stride != 1 or in_channels != 4 * width:
        out_shape = net.shape
        net.shape = (in_channels, h, w)
        conv_bn(net, f"{prefix}.downsample.0", f"{prefix}.downsample.1", 4 * width, 1, stride)
        assert net.shape == out_shape


def resnet_imagenet(blocks=(3, 4, 6, 3), num_classes: int = 1000, input_size: int = 224) -> list[Layer]:
    """He et al. 2016, Table 1, bottleneck ResNets for ImageNet, laid out like torchvision:
    7x7/2 stem conv, 3x3/2 max pool, 4 stages (64, 128, 256, 512 bottleneck widths),
    global average pool, fc. blocks=(3,4,6,3): ResNet-50; (3,4,23,3): ResNet-101."""
    net = Net(3, input_size)
    conv_bn(net, "conv1", "bn1", 64, 7, 2, 3)
    net.pool(3, 2, 1)
    for stage, n in enumerate(blocks):
        for i in range(n):
            stride = 2 if (stage > 0 and i == 0) else 1
            _bottleneck(net, f"layer{stage + 1}.{i}", 64 * 2 ** stage, stride)
    net.global_pool().linear("fc", num_classes)
    return net.layers


# --------------------------------------------------------------------------------------------
# Inception v3 (torchvision layout: every conv is a "BasicConv2d" = conv without bias + bn)
# --------------------------------------------------------------------------------------------

def _basic_conv(net: Net, name: str, out_channels: int, kernel, stride=1, padding=0) -> Net:
    return conv_bn(net, f"{name}.conv", f"{name}.bn", out_channels, kernel, stride, padding)


def _inception_block(net: Net, prefix: str, branches: list[list[tuple]]) -> None:
    """Runs each branch from the block's input and concatenates the outputs along channels.
    A branch is a list of steps: ("conv", name, out_channels, kernel, stride, padding),
    ("pool", kernel, stride, padding), or ("split", branches): a block inside the branch."""
    start = net.shape
    outputs = []
    for branch in branches:
        net.shape = start
        for step in branch:
            if step[0] == "conv":
                _, name, out_channels, kernel, stride, padding = step
                _basic_conv(net, f"{prefix}.{name}", out_channels, kernel, stride, padding)
            elif step[0] == "pool":
                _, kernel, stride, padding = step
                net.pool(kernel, stride, padding)
            else:
                _inception_block(net, prefix, step[1])
        outputs.append(net.shape)
    sizes = {(h, w) for _, h, w in outputs}
    assert len(sizes) == 1, f"{prefix}: branches end at different sizes {sizes}"
    net.shape = (sum(c for c, _, _ in outputs), *outputs[0][1:])


def _inception_a(pool_features):      # 35x35 grid (Szegedy et al. 2016, Fig. 5)
    return [
        [("conv", "branch1x1", 64, 1, 1, 0)],
        [("conv", "branch5x5_1", 48, 1, 1, 0), ("conv", "branch5x5_2", 64, 5, 1, 2)],
        [("conv", "branch3x3dbl_1", 64, 1, 1, 0), ("conv", "branch3x3dbl_2", 96, 3, 1, 1),
         ("conv", "branch3x3dbl_3", 96, 3, 1, 1)],
        [("pool", 3, 1, 1), ("conv", "branch_pool", pool_features, 1, 1, 0)],
    ]


_INCEPTION_B = [                      # 35x35 -> 17x17 grid reduction (Fig. 10)
    [("conv", "branch3x3", 384, 3, 2, 0)],
    [("conv", "branch3x3dbl_1", 64, 1, 1, 0), ("conv", "branch3x3dbl_2", 96, 3, 1, 1),
     ("conv", "branch3x3dbl_3", 96, 3, 2, 0)],
    [("pool", 3, 2, 0)],
]


def _inception_c(c7):                 # 17x17 grid, factorised 7x7 convs (Fig. 6)
    return [
        [("conv", "branch1x1", 192, 1, 1, 0)],
        [("conv", "branch7x7_1", c7, 1, 1, 0), ("conv", "branch7x7_2", c7, (1, 7), 1, (0, 3)),
         ("conv", "branch7x7_3", 192, (7, 1), 1, (3, 0))],
        [("conv", "branch7x7dbl_1", c7, 1, 1, 0), ("conv", "branch7x7dbl_2", c7, (7, 1), 1, (3, 0)),
         ("conv", "branch7x7dbl_3", c7, (1, 7), 1, (0, 3)),
         ("conv", "branch7x7dbl_4", c7, (7, 1), 1, (3, 0)),
         ("conv", "branch7x7dbl_5", 192, (1, 7), 1, (0, 3))],
        [("pool", 3, 1, 1), ("conv", "branch_pool", 192, 1, 1, 0)],
    ]


_INCEPTION_D = [                      # 17x17 -> 8x8 grid reduction
    [("conv", "branch3x3_1", 192, 1, 1, 0), ("conv", "branch3x3_2", 320, 3, 2, 0)],
    [("conv", "branch7x7x3_1", 192, 1, 1, 0), ("conv", "branch7x7x3_2", 192, (1, 7), 1, (0, 3)),
     ("conv", "branch7x7x3_3", 192, (7, 1), 1, (3, 0)), ("conv", "branch7x7x3_4", 192, 3, 2, 0)],
    [("pool", 3, 2, 0)],
]


def _inception_e():                    # 8x8 grid, expanded filter bank (Fig. 7)
    # two branches end in a "split": parallel 1x3 and 3x1 convs on the same map, concatenated
    return [
        [("conv", "branch1x1", 320, 1, 1, 0)],
        [("conv", "branch3x3_1", 384, 1, 1, 0),
         ("split", [[("conv", "branch3x3_2a", 384, (1, 3), 1, (0, 1))],
                    [("conv", "branch3x3_2b", 384, (3, 1), 1, (1, 0))]])],
        [("conv", "branch3x3dbl_1", 448, 1, 1, 0), ("conv", "branch3x3dbl_2", 384, 3, 1, 1),
         ("split", [[("conv", "branch3x3dbl_3a", 384, (1, 3), 1, (0, 1))],
                    [("conv", "branch3x3dbl_3b", 384, (3, 1), 1, (1, 0))]])],
        [("pool", 3, 1, 1), ("conv", "branch_pool", 192, 1, 1, 0)],
    ]


def inception_v3(aux_logits: bool = True, num_classes: int = 1000, input_size: int = 299) -> list[Layer]:
    """Szegedy et al. 2016, "Rethinking the Inception Architecture", as torchvision builds it.
    aux_logits: include the auxiliary classifier on the 17x17 grid (it is trained, so its
    gradients are synchronised too; it is dropped at inference)."""
    net = Net(3, input_size)
    _basic_conv(net, "Conv2d_1a_3x3", 32, 3, 2)          # 299 -> 149
    _basic_conv(net, "Conv2d_2a_3x3", 32, 3)             # -> 147
    _basic_conv(net, "Conv2d_2b_3x3", 64, 3, 1, 1)
    net.pool(3, 2)                                       # -> 73
    _basic_conv(net, "Conv2d_3b_1x1", 80, 1)
    _basic_conv(net, "Conv2d_4a_3x3", 192, 3)            # -> 71
    net.pool(3, 2)                                       # -> 35
    _inception_block(net, "Mixed_5b", _inception_a(32))  # -> 256 channels
    _inception_block(net, "Mixed_5c", _inception_a(64))  # -> 288
    _inception_block(net, "Mixed_5d", _inception_a(64))
    _inception_block(net, "Mixed_6a", _INCEPTION_B)      # -> 17x17x768
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        _inception_block(net, name, _inception_c(c7))
    if aux_logits:
        main = net.shape
        net.pool(5, 3)                                   # 17 -> 5
        _basic_conv(net, "AuxLogits.conv0", 128, 1)
        _basic_conv(net, "AuxLogits.conv1", 768, 5)      # 5 -> 1
        net.global_pool().linear("AuxLogits.fc", num_classes)
        net.shape = main
    _inception_block(net, "Mixed_7a", _INCEPTION_D)      # -> 8x8x1280
    _inception_block(net, "Mixed_7b", _inception_e())    # -> 2048
    _inception_block(net, "Mixed_7c", _inception_e())
    net.global_pool().linear("fc", num_classes)
    return net.layers


# --------------------------------------------------------------------------------------------
# AlexNet and VGG-16 (torchvision layouts; module names follow torchvision's state_dict)
# --------------------------------------------------------------------------------------------

def alexnet(num_classes: int = 1000, input_size: int = 224) -> list[Layer]:
    """torchvision's AlexNet: the single-GPU variant of Krizhevsky 2014 ("One weird trick"),
    64-192-384-256-256 conv filters, two 4096-wide fully connected layers."""
    net = Net(3, input_size)
    net.conv("features.0", 64, 11, 4, 2, bias=True).pool(3, 2)     # 224 -> 55 -> 27
    net.conv("features.3", 192, 5, 1, 2, bias=True).pool(3, 2)     # -> 13
    net.conv("features.6", 384, 3, 1, 1, bias=True)
    net.conv("features.8", 256, 3, 1, 1, bias=True)
    net.conv("features.10", 256, 3, 1, 1, bias=True).pool(3, 2)    # -> 6
    net.flatten()                                                  # 256 * 6 * 6 = 9216
    net.linear("classifier.1", 4096).linear("classifier.4", 4096).linear("classifier.6", num_classes)
    return net.layers


def vgg16(num_classes: int = 1000, input_size: int = 224) -> list[Layer]:
    """Simonyan & Zisserman 2015, configuration D: 13 3x3 convs (with bias, no batch norm),
    5 max pools, three fully connected layers."""
    config = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    net = Net(3, input_size)
    index = 0                       # torchvision numbers conv, ReLU and pool modules alike
    for item in config:
        if item == "M":
            net.pool(2, 2)
            index += 1
        else:
            net.conv(f"features.{index}", item, 3, 1, 1, bias=True)
            index += 2              # the conv and its ReLU
    net.flatten()                   # 512 * 7 * 7 = 25088
    net.linear("classifier.0", 4096).linear("classifier.3", 4096).linear("classifier.6", num_classes)
    return net.layers


# --------------------------------------------------------------------------------------------
# BERT (Devlin et al. 2019), encoder + pooler, as the Hugging Face BertModel lays it out
# --------------------------------------------------------------------------------------------

def bert(num_layers: int = 12, hidden: int = 768, heads: int = 12, seq_len: int = 128,
         vocab: int = 30522, max_positions: int = 512, type_vocab: int = 2,
         intermediate: int | None = None) -> list[Layer]:
    """BERT encoder with pooler. FLOPs are per sample = one sequence of seq_len tokens:
    every linear layer does 2 x (its weights) FLOPs per token; each attention layer also does
    Q K^T and scores x V, 2 x seq_len x hidden FLOPs per token each (all heads together);
    the pooler runs on the [CLS] token only. Embedding look-ups, layer norms, softmax and
    GELU are not counted. Heads of a pre-training or fine-tuning task are not included."""
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    if not 1 <= seq_len <= max_positions:
        raise ValueError(f"seq_len must be between 1 and {max_positions}, not {seq_len}")
    ffn = 4 * hidden if intermediate is None else intermediate
    net = Net(hidden, 1)

    def layer_norm(name):
        net.add(Layer(name, 2 * hidden, 0.0, norm_values=seq_len * hidden, kept_values=seq_len * hidden))

    # the three look-ups are summed into one seq_len x hidden tensor: kept once (on the first)
    net.add(Layer("embeddings.word_embeddings", vocab * hidden, 0.0, kept_values=seq_len * hidden,
                  matrix=(vocab, hidden)))
    net.add(Layer("embeddings.position_embeddings", max_positions * hidden, 0.0, matrix=(max_positions, hidden)))
    net.add(Layer("embeddings.token_type_embeddings", type_vocab * hidden, 0.0, matrix=(type_vocab, hidden)))
    layer_norm("embeddings.LayerNorm")
    for i in range(num_layers):
        p = f"encoder.layer.{i}"
        for proj in ("query", "key", "value"):    # all three read the layer's hidden-wide input
            net.shape = (hidden, 1, 1)
            net.linear(f"{p}.attention.self.{proj}", hidden, tokens=seq_len)
        # Q K^T (seq x seq scores per head) and scores x V: no parameters
        net.add(Layer(f"{p}.attention.scores", 0, 2 * (2.0 * seq_len * seq_len * hidden),
                      kept_values=2 * heads * seq_len * seq_len))     # the scores and their softmax
        net.linear(f"{p}.attention.output.dense", hidden, tokens=seq_len)
        layer_norm(f"{p}.attention.output.LayerNorm")
        net.linear(f"{p}.intermediate.dense", ffn, tokens=seq_len)
        net.linear(f"{p}.output.dense", hidden, tokens=seq_len)
        layer_norm(f"{p}.output.LayerNorm")
    net.linear("pooler.dense", hidden, tokens=1)
    return net.layers


# --------------------------------------------------------------------------------------------
# The presets
# --------------------------------------------------------------------------------------------

_TV = "torchvision.models documentation (parameter count and GFLOPS, which torchvision counts as multiply-adds)"

MODELS: dict[str, Model] = {m.name: m for m in [
    Model("resnet20-cifar",
          "ResNet-20 for CIFAR-10 (n=3, 16/32/64 filters, option A shortcuts), 32x32x3 input",
          tuple(resnet_cifar(3)),
          "He, Zhang, Ren, Sun, 'Deep Residual Learning for Image Recognition', CVPR 2016, "
          "Sec. 4.2 and Table 6 (0.27M params); about 41M multiply-adds forward"),
    Model("resnet18-cifar",
          "ResNet-18 adapted to CIFAR-10 (3x3 stem, no max pool, 64-512 filters, 1x1 projection "
          "shortcuts), 32x32x3 input",
          tuple(resnet_cifar_basic((64, 128, 256, 512), (2, 2, 2, 2))),
          "He et al. CVPR 2016 Table 1 (ResNet-18) with the common CIFAR stem (e.g. the "
          "kuangliu/pytorch-cifar ResNet18): 11,173,962 params, about 0.56G multiply-adds forward"),
    Model("resnet18-cifar-16to128",
          "18-layer ResNet on 32x32x3 input with 16/32/64/128 filters (4 stages x 2 basic blocks, "
          "1x1 projection shortcuts); story 3, MXNet vs TensorFlow",
          tuple(resnet_cifar_basic((16, 32, 64, 128), (2, 2, 2, 2))),
          "our reconstruction: the source only says 'an 18-layer residual network on 32x32 "
          "inputs, filters 16 to 128'; we use the resnet18-cifar layout at 1/4 width"),
    Model("resnet50",
          "ResNet-50 (torchvision v1.5: stride on the 3x3 conv), ImageNet 224x224x3 input",
          tuple(resnet_imagenet((3, 4, 6, 3))),
          "He et al. CVPR 2016 Table 1; " + _TV + ": 25,557,032 params, 4.09 GFLOPS"),
    Model("resnet101",
          "ResNet-101 (torchvision v1.5: stride on the 3x3 conv), ImageNet 224x224x3 input",
          tuple(resnet_imagenet((3, 4, 23, 3))),
          "He et al. CVPR 2016 Table 1; " + _TV + ": 44,549,160 params, 7.80 GFLOPS"),
    Model("inception-v3",
          "Inception v3 with its auxiliary classifier (trained, so synchronised), 299x299x3 input",
          tuple(inception_v3(aux_logits=True)),
          "Szegedy et al., 'Rethinking the Inception Architecture for Computer Vision', CVPR 2016; "
          + _TV + ": 27,161,264 params with the auxiliary classifier (23,834,568 without), 5.71 GFLOPS"),
    Model("alexnet",
          "AlexNet, torchvision's single-tower variant (64-192-384-256-256 filters), 224x224x3 input",
          tuple(alexnet()),
          "Krizhevsky, 'One weird trick for parallelizing convolutional neural networks', 2014; "
          + _TV + ": 61,100,840 params, 0.71 GFLOPS"),
    Model("vgg16",
          "VGG-16 (configuration D, no batch norm), 224x224x3 input",
          tuple(vgg16()),
          "Simonyan & Zisserman, 'Very Deep Convolutional Networks for Large-Scale Image "
          "Recognition', ICLR 2015; " + _TV + ": 138,357,544 params, 15.47 GFLOPS"),
    Model("bert-base",
          "BERT-base encoder + pooler (L=12, H=768, A=12, vocab 30522), one 128-token sequence per sample",
          tuple(bert(12, 768, 12, seq_len=128)),
          "Devlin et al., 'BERT: Pre-training of Deep Bidirectional Transformers', NAACL 2019 "
          "(110M params); 109,482,240 params for bert-base-uncased (Hugging Face BertModel); "
          "FLOPs: 2 x weights per token + attention matmuls (cf. Kaplan et al. 2020, Table 1)"),
    Model("bert-large",
          "BERT-large encoder + pooler (L=24, H=1024, A=16, vocab 30522), one 128-token sequence per sample",
          tuple(bert(24, 1024, 16, seq_len=128)),
          "Devlin et al. NAACL 2019 (340M params); 335,141,888 params for bert-large-uncased "
          "(Hugging Face BertModel); FLOPs counted as for bert-base"),
]}


def get_model(name: str) -> Model:
    """The preset called `name`; a ValueError naming the choices if there is none."""
    try:
        return MODELS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown model {name!r}; choose one of: {', '.join(MODELS)}") from None


def _whole(x):
    """x as an int if it is a whole number (an int, a NumPy integer, or a float like 25e6), else None."""
    if isinstance(x, bool):
        return None
    if isinstance(x, float):
        return int(x) if x.is_integer() else None
    try:
        return operator.index(x)
    except TypeError:
        return None


def custom_model(params: int, flops_per_sample: float, layers: int = 1, name: str = "custom",
                 matrices=()) -> Model:
    """A user-defined model: `layers` equal layers sharing `params` (the remainder, if any,
    goes one each to the first layers) and `flops_per_sample` evenly. flops_per_sample is
    forward + backward, so each layer's forward FLOPs are flops_per_sample / 3 / layers.

    With `matrices` ([rows, columns] per layer, forward order; PowerSGD compresses them) layer
    i holds rows_i x columns_i values as its weight matrix plus an equal share of the rest of
    `params` (biases and other vectors), and its share of the FLOPs is its share of the
    parameters (a linear layer's forward is 2 x rows x columns multiply-add FLOPs a sample)."""
    n_params, n_layers = _whole(params), _whole(layers)   # 25e6 from a TOML file is fine
    if n_params is None or n_params < 1:
        raise ValueError(f"params must be a positive whole number, not {params!r}")
    if n_layers is None or not 1 <= n_layers <= n_params:
        raise ValueError(f"layers must be a whole number from 1 to params ({n_params}), not {layers!r}")
    params, layers = n_params, n_layers
    if not flops_per_sample >= 0:     # also rejects NaN
        raise ValueError(f"flops_per_sample must be >= 0, not {flops_per_sample!r}")
    fwd = flops_per_sample / (1.0 + BACKWARD_FLOPS_FACTOR)
    if matrices:
        return _custom_with_matrices(name, params, fwd, [tuple(m) for m in matrices])
    base, extra = divmod(params, layers)
    return Model(name,
                 f"user-defined: {params:,} params in {layers} equal layers, "
                 f"{flops_per_sample:.4g} FLOPs per sample (forward + backward)",
                 tuple(Layer(f"layer{i}", base + (1 if i < extra else 0), fwd / layers) for i in range(layers)),
                 "user-supplied figures")


def _custom_with_matrices(name, params, fwd, matrices):
    """custom_model's layers when each has a weight matrix (see there); fwd: forward FLOPs a sample."""
    weights = [rows * cols for rows, cols in matrices]
    if any(_whole(x) is None or x < 1 for m in matrices for x in m) or sum(weights) > params:
        raise ValueError(f"matrices must be [rows, columns] of whole numbers > 0 whose values add up to at "
                         f"most params ({params}), not {matrices!r}")
    base, extra = divmod(params - sum(weights), len(matrices))
    sizes = [w + base + (1 if i < extra else 0) for i, w in enumerate(weights)]
    shapes = ", ".join(f"{rows}x{cols}" for rows, cols in matrices)
    return Model(name,
                 f"user-defined: {params:,} params in {len(matrices)} layers with weight matrices {shapes}, "
                 f"{3 * fwd:.4g} FLOPs per sample (forward + backward)",
                 tuple(Layer(f"layer{i}", size, fwd * size / params, matrix=matrices[i])
                       for i, size in enumerate(sizes)),
                 "user-supplied figures")
