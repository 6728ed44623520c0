"""Model presets against published figures.

The oracles are numbers printed in papers and in the torchvision.models documentation; the
builders in dpsim/models.py compute their totals from the architecture and never read them.
"""
import math

import pytest

from dpsim.models import (
    MODELS, Layer, Model, bert, custom_model, get_model, inception_v3, resnet_cifar,
)

# Exact trainable-parameter counts.
PUBLISHED_PARAMS = {
    # torchvision.models documentation (the weights tables)
    "resnet50": 25_557_032,
    "resnet101": 44_549_160,
    "inception-v3": 27_161_264,        # with the auxiliary classifier (torchvision's default)
    "alexnet": 61_100_840,
    "vgg16": 138_357_544,
    # Hugging Face BertModel (encoder + pooler): bert-base-uncased, bert-large-uncased
    "bert-base": 109_482_240,
    "bert-large": 335_141_888,
    # The widely used CIFAR ResNet-18 (3x3 stem, no max pool, 1x1 projection shortcuts, 10 classes)
    "resnet18-cifar": 11_173_962,
}

# Forward multiply-adds per sample, in GMACs (torchvision's "GFLOPS" column counts multiply-adds).
PUBLISHED_GMACS = {
    "resnet20-cifar": 0.041,           # He et al. 2016 CIFAR ResNet-20: about 41M multiply-adds
    "resnet18-cifar": 0.56,
    "resnet50": 4.09,                  # torchvision docs
    "resnet101": 7.80,                 # torchvision docs
    "inception-v3": 5.71,              # torchvision docs (inference, without the aux head)
    "alexnet": 0.71,                   # torchvision docs
    "vgg16": 15.47,                    # torchvision docs
}


@pytest.mark.parametrize("name, expected", sorted(PUBLISHED_PARAMS.items()))
def test_params_match_published_counts_exactly(name, expected):
    assert get_model(name).params == expected


def test_inception_v3_without_aux_head_matches_torchvision():
    # torchvision.models documentation: 23,834,568 params with aux_logits=False
    assert sum(layer.params for layer in inception_v3(aux_logits=False)) == 23_834_568


@pytest.mark.parametrize("n, published_m", [(3, 0.27), (5, 0.46), (7, 0.66), (9, 0.85), (18, 1.7)])
def test_cifar_resnets_match_he_et_al_table_6(n, published_m):
    # He et al. 2016, Table 6: ResNet-20/32/44/56/110 have 0.27/0.46/0.66/0.85/1.7 M params
    params = sum(layer.params for layer in resnet_cifar(n))
    assert round(params / 1e6, 2 if n < 18 else 1) == published_m


def test_resnet20_cifar_is_269722_params():
    # Hand count: stem 3*16*9 + bn 32; stage 1: 6 convs 16*16*9 + 6 bns*32;
    # stage 2: 16*32*9 + 5*32*32*9 + 6*64; stage 3: 32*64*9 + 5*64*64*9 + 6*128; fc 64*10+10
    expected = (432 + 32) + (6 * 2304 + 6 * 32) + (4608 + 5 * 9216 + 6 * 64) \
        + (18432 + 5 * 36864 + 6 * 128) + 650
    assert expected == 269_722
    assert get_model("resnet20-cifar").params == expected


@pytest.mark.parametrize("name, gmacs", sorted(PUBLISHED_GMACS.items()))
def test_forward_flops_within_5_percent_of_published(name, gmacs):
    model = get_model(name)
    published_flops = 2 * gmacs * 1e9       # a multiply-add is 2 FLOPs
    assert model.fwd_flops_per_sample == pytest.approx(published_flops, rel=0.05)


@pytest.mark.parametrize("name, layers, d_model", [("bert-base", 12, 768), ("bert-large", 24, 1024)])
def test_bert_flops_match_kaplan_formula(name, layers, d_model):
    # Kaplan et al. 2020 ("Scaling Laws for Neural Language Models"), Table 1:
    # C_forward per token = 2 N + 2 n_layer n_ctx d_attn, N = non-embedding parameters = 12 n_layer d^2
    n_ctx = 128
    non_embedding = 12 * layers * d_model ** 2
    per_token = 2 * non_embedding + 2 * layers * n_ctx * d_model
    assert get_model(name).fwd_flops_per_sample == pytest.approx(per_token * n_ctx, rel=0.05)


def test_bert_flops_grow_with_sequence_length():
    short, long = bert(seq_len=128), bert(seq_len=512)
    assert sum(l.params for l in short) == sum(l.params for l in long)
    ratio = sum(l.fwd_flops for l in long) / sum(l.fwd_flops for l in short)
    assert 4.0 < ratio < 4.5      # linear part x4, attention scores x16
    with pytest.raises(ValueError):
        bert(seq_len=513)


def test_layer_spot_checks_by_hand():
    def layer(model, name):
        return {l.name: l for l in get_model(model).layers}[name]
    assert layer("resnet50", "conv1").params == 64 * 3 * 7 * 7
    assert layer("resnet50", "conv1").fwd_flops == 2 * 64 * 3 * 7 * 7 * 112 * 112
    assert layer("resnet50", "bn1").params == 2 * 64
    assert layer("resnet50", "fc").params == 2048 * 1000 + 1000
    assert layer("alexnet", "features.0").params == 64 * 3 * 11 * 11 + 64
    assert layer("vgg16", "classifier.0").params == 512 * 7 * 7 * 4096 + 4096
    assert layer("bert-base", "embeddings.word_embeddings").params == 30522 * 768
    assert layer("bert-base", "encoder.layer.0.intermediate.dense").fwd_flops == 2 * 768 * 3072 * 128
    assert layer("bert-base", "encoder.layer.0.attention.scores").params == 0
    assert layer("inception-v3", "Mixed_7c.branch3x3_2b.conv").params == 384 * 384 * 3


def test_story3_network_has_18_weighted_layers_from_16_to_128_filters():
    layers = get_model("resnet18-cifar-16to128").layers
    main_path = [l for l in layers if ("conv" in l.name and "downsample" not in l.name) or l.name == "fc"]
    assert len(main_path) == 18
    assert layers[0].params == 3 * 16 * 9                        # stem: 16 filters
    assert {l.name: l for l in layers}["fc"].params == 128 * 10 + 10    # last stage: 128 filters


@pytest.mark.parametrize("name", list(MODELS))
def test_every_preset_is_well_formed(name):
    model = MODELS[name]
    assert model.name == name
    assert model.description and "\n" not in model.description
    assert model.source
    names = [layer.name for layer in model.layers]
    assert len(names) == len(set(names)), "layer names must be unique"
    assert model.flops_per_sample == pytest.approx(3 * model.fwd_flops_per_sample)


@pytest.mark.parametrize("name", [n for n in MODELS if n in PUBLISHED_GMACS and "cifar" not in n])
def test_torchvision_presets_cite_torchvision(name):
    assert "torchvision.models documentation" in MODELS[name].source


@pytest.mark.parametrize("name", list(MODELS))
def test_gradients_come_in_backward_order(name):
    model = MODELS[name]
    forward = [layer.params * 4 for layer in model.layers if layer.params > 0]
    grads = model.grad_bytes_backward()
    assert grads == forward[::-1]
    assert sum(grads) == model.params * 4
    assert sum(model.grad_bytes_backward(bytes_per_param=2)) == model.params * 2
    assert all(g > 0 for g in grads)


@pytest.mark.parametrize("name", list(MODELS))
def test_backward_fractions_sum_to_one(name):
    model = MODELS[name]
    fractions = model.backward_flops_fraction()
    assert len(fractions) == len(model.grad_bytes_backward())
    assert all(f >= 0 for f in fractions)
    assert math.fsum(fractions) == pytest.approx(1.0, abs=1e-12)


def test_zero_param_layers_fold_into_the_next_layer_backward_reaches():
    model = Model("toy", "toy", (Layer("a", 1, 1.0), Layer("scores", 0, 3.0), Layer("b", 1, 1.0)), "test")
    # backward order: b (2 FLOPs), scores (6, no gradient: goes to a), a (2) -> b: 2/10, a: 8/10
    assert model.backward_flops_fraction() == pytest.approx([0.2, 0.8])
    assert model.grad_bytes_backward() == [4, 4]
    # a zero-parameter layer at the very start of forward is the end of backward: it joins the last
    first = Model("toy", "toy", (Layer("pool", 0, 1.0), Layer("a", 2, 1.0), Layer("b", 1, 2.0)), "test")
    assert first.backward_flops_fraction() == pytest.approx([0.5, 0.5])
    assert first.grad_bytes_backward() == [4, 8]


def test_bert_attention_scores_fold_into_value_projection():
    model = get_model("bert-base")
    fractions = model.backward_flops_fraction()
    named = [l for l in reversed(model.layers) if l.params > 0]
    total_bwd = 2 * model.fwd_flops_per_sample
    by_name = {l.name: f for l, f in zip(named, fractions)}
    value = 2 * 768 * 768 * 128 * 2
    scores = 2 * 2 * 128 * 128 * 768 * 2
    assert by_name["encoder.layer.0.attention.self.value"] == pytest.approx((value + scores) / total_bwd)
    assert by_name["encoder.layer.0.attention.self.key"] == pytest.approx(value / total_bwd)


def test_unknown_model_names_the_choices():
    with pytest.raises(ValueError) as err:
        get_model("resnet-9000")
    message = str(err.value)
    assert "resnet-9000" in message
    for name in MODELS:
        assert name in message


def test_custom_model_splits_evenly():
    model = custom_model(params=1_000_000, flops_per_sample=3e9, layers=4)
    assert model.name == "custom"
    assert model.params == 1_000_000
    assert [l.params for l in model.layers] == [250_000] * 4
    assert [l.fwd_flops for l in model.layers] == pytest.approx([0.25e9] * 4)
    assert model.flops_per_sample == pytest.approx(3e9)
    assert model.grad_bytes_backward() == [1_000_000] * 4
    assert model.backward_flops_fraction() == pytest.approx([0.25] * 4)


def test_custom_model_remainder_and_defaults():
    model = custom_model(params=10, flops_per_sample=0.0, layers=3, name="mine")
    assert model.name == "mine"
    assert [l.params for l in model.layers] == [4, 3, 3]
    assert model.backward_flops_fraction() == pytest.approx([1 / 3] * 3)
    assert len(custom_model(5, 1.0).layers) == 1
    assert custom_model(25e6, 1.0, layers=2.0).params == 25_000_000    # whole floats, as TOML gives


@pytest.mark.parametrize("kwargs", [
    dict(params=0, flops_per_sample=1.0),
    dict(params=10, flops_per_sample=-1.0),
    dict(params=10, flops_per_sample=float("nan")),
    dict(params=10, flops_per_sample=1.0, layers=0),
    dict(params=10, flops_per_sample=1.0, layers=11),
    dict(params=1.5, flops_per_sample=1.0),
    dict(params="10", flops_per_sample=1.0),
    dict(params=True, flops_per_sample=1.0),
])
def test_custom_model_rejects_bad_figures(kwargs):
    with pytest.raises(ValueError):
        custom_model(**kwargs)


# -- compute.per_layer: each layer of backward timed by its kind
def test_per_layer_times_norms_by_memory_and_convs_by_flops():
    """conv (2 x 8 x 8 x 3x3 weights on a 4x4 map) then its batch norm, computed by hand."""
    from dpsim.models import Model
    from dpsim.models import Net
    net = Net(8, 4)
    net.conv("conv", 8, 3, padding=1).bn("bn")
    model = Model("tiny", "", tuple(net.layers), "by hand")
    conv_flops = 2 * (8 * 8 * 3 * 3) * (4 * 4)
    bn_values = 8 * 4 * 4
    s_flop, s_byte = 1e-12, 1e-9
    bn_s, conv_s = 12 * bn_values * s_byte, 2 * conv_flops * s_flop      # backward: bn first
    assert model.backward_time_fraction(s_flop, s_byte) == pytest.approx([bn_s / (bn_s + conv_s),
                                                                         conv_s / (bn_s + conv_s)])
    assert model.backward_time_fraction(1.0, 0.0) == model.backward_flops_fraction()


def test_per_layer_moves_bucket_readiness_but_not_the_iteration_on_one_gpu():
    from dpsim import load_scenario, simulate, workload
    base = {"cluster": {"nodes": 1, "gpus_per_node": 1, "gpu": "v100"}, "model": {"preset": "resnet50"},
            "training": {"batch_per_gpu": 64}, "compute": {"samples_per_s": 360}, "sync": {"bucket_mib": 25}}
    flops, timed = (load_scenario(base, {"compute.per_layer": on}) for on in (False, True))
    wf, wt = workload.build(flops), workload.build(timed)
    assert wt.backward_s == wf.backward_s and len(wt.buckets) == len(wf.buckets)
    # norms sit all along the network; the first buckets (fc and the last stage, where the
    # feature maps are small) hold fewer norm values than their FLOP share, so they come earlier
    assert wt.buckets[0].ready_s < wf.buckets[0].ready_s
    for sc in (flops, timed):          # a measured rate is still reproduced exactly
        assert simulate(sc).throughput_samples_per_s == pytest.approx(360, rel=1e-9)
