"""Bad scenarios end in one ScenarioError naming the key; never another exception."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dpsim
from dpsim import config
from dpsim.errors import ScenarioError

BASE = {
    "name": "t",
    "cluster": {"nodes": 1, "gpus_per_node": 2, "gpu": "v100", "intra": "pcie3"},
    "model": {"preset": "resnet20-cifar"},
    "training": {"batch_per_gpu": 8, "iterations": 2, "warmup_iterations": 0},
    "sync": {"strategy": "ring"},
}
FIELDS = [(s, f.name) for s, cls in config.SECTIONS.items() for f in config.dataclasses.fields(cls)]
COUNTS = [("cluster", "nodes"), ("cluster", "gpus_per_node"), ("cluster", "cpu_cores"),
          ("cluster", "gpus_per_pcie_switch"), ("training", "batch_per_gpu"), ("training", "iterations")]

anything = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


def with_value(section, key, value):
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    data.setdefault(section, {})[key] = value
    return data


def test_base_is_valid():
    assert config.load_scenario(BASE).gpus == 2


@settings(max_examples=300, deadline=None)
@given(field=st.sampled_from(FIELDS), value=anything)
def test_any_value_in_any_field_is_accepted_or_named(field, value):
    section, key = field
    try:
        config.load_scenario(with_value(section, key, value))
    except ScenarioError as e:
        # the key itself, or the key a cross-field rule names (a custom model with a preset,
        # more layers than params, strategy "none" on several GPUs, dataparallel on several nodes)
        cross_field = ("model.preset", "model.params", "model.layers", "sync.strategy")
        assert str(e).startswith(f"{section}.{key}") or str(e).startswith(cross_field)


@settings(max_examples=150, deadline=None)
@given(section=st.sampled_from(list(config.SECTIONS)),
       key=st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10), value=anything)
def test_unknown_keys_are_named_with_the_allowed_ones(section, key, value):
    if key in {f.name for f in config.dataclasses.fields(config.SECTIONS[section])}:
        return
    with pytest.raises(ScenarioError) as err:
        config.load_scenario(with_value(section, key, value))
    assert f"{section}.{key}" in str(err.value) and "allowed" in str(err.value)


@settings(max_examples=100, deadline=None)
@given(field=st.sampled_from(COUNTS), value=st.integers(max_value=0))
def test_zero_or_negative_counts_are_refused(field, value):
    section, key = field
    with pytest.raises(ScenarioError, match=f"{section}.{key}.*> 0"):
        config.load_scenario(with_value(section, key, value))


@settings(max_examples=100, deadline=None)
@given(link=st.sampled_from(["intra", "inter", "host_link"]),
       bandwidth=st.floats(max_value=0) | st.just(float("nan")) | st.text(max_size=4))
def test_bad_inline_bandwidth_is_refused(link, bandwidth):
    with pytest.raises(ScenarioError, match=f"cluster.{link}.bandwidth_gbs"):
        config.load_scenario(with_value("cluster", link, {"bandwidth_gbs": bandwidth, "latency_us": 1.0}))


@pytest.mark.parametrize("key, value, allowed", [
    ("cluster.gpu", "gtx9000", "k80"), ("cluster.intra", "carrier-pigeon", "nvlink2"),
    ("sync.strategy", "gossip", "sharded-ps"), ("model.preset", "gpt-17", "resnet50"),
    ("sync.ps_location", "gpu7", "cpu"), ("compute.precision", "fp8", "fp16")])
def test_unknown_names_list_the_choices(key, value, allowed):
    with pytest.raises(ScenarioError, match=f"{key}.*{allowed}"):
        dpsim.load_scenario(BASE, {key: value})


def test_sweep_over_zero_gpus_is_refused():
    with pytest.raises(ScenarioError, match="gpus"):
        dpsim.sweep(BASE, gpus=[])
    with pytest.raises(ScenarioError, match="gpus"):
        dpsim.sweep(BASE, gpus=[0, 2])


def test_custom_model_and_preset_together_is_refused():
    with pytest.raises(ScenarioError, match="model.preset"):
        dpsim.load_scenario(with_value("model", "params", 1000))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=10))
def test_cli_set_never_tracebacks(field, text, dpsim_cli):
    code, out, err = dpsim_cli("show", "cntk-1bit-k80", "--set", f"{field[0]}.{field[1]}={text}")
    assert code in (0, 2)
    if code == 2:
        assert err.startswith("dpsim: error: ") and err.count("\n") == 1
        assert "Traceback" not in err
