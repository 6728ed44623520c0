"""Memory per GPU (dpsim.memory) against the ZeRO paper's figures and figures written out by
hand; a scenario that does not fit; the bad input of issue 29's new keys."""
import pytest

from dpsim import load_scenario, memory, models, simulate
from dpsim.hardware import GPUS

from dpsim_helpers import star

PSI = 7.5e9          # ZeRO, Figure 1: 7.5B parameters, N_d = 64, Adam, mixed precision (K = 12)


@pytest.mark.parametrize("strategy, gb", [("ring", 120.0), ("zero1", 31.4), ("zero2", 16.6), ("zero3", 1.9)])
def test_model_states_are_the_zero_papers_figure_1(strategy, gb):
    """The figures as Figure 1 prints them, to their one decimal."""
    states = memory.model_states(PSI, 64, "fp16", "adam", strategy)
    assert sum(states.values()) / 1e9 == pytest.approx(gb, abs=0.05)


def test_fp32_sgd_holds_twelve_bytes_per_parameter_and_adam_sixteen():
    assert sum(memory.model_states(1000, 4, "fp32", "sgd").values()) == 12_000
    assert sum(memory.model_states(1000, 4, "fp32", "adam").values()) == 16_000
    assert sum(memory.model_states(1000, 4, "fp32", "sgd", "zero2").values()) == 4000 + 1000 + 1000


def test_vgg16_activations_written_out_from_its_table():
    """Simonyan & Zisserman 2015, configuration D: the outputs of its 13 convolutions and 3
    fully connected layers, one sample at 224 x 224."""
    convs = 2 * 64 * 224**2 + 2 * 128 * 112**2 + 3 * 256 * 56**2 + 3 * 512 * 28**2 + 3 * 512 * 14**2
    assert models.get_model("vgg16").activation_values == convs + 4096 + 4096 + 1000
    sc = load_scenario({"model": {"preset": "vgg16"}, "training": {"batch_per_gpu": 8}})
    assert memory.per_gpu(sc)["activations"] == (convs + 9192) * 8 * 4


def test_zero3_holds_the_two_largest_neighbouring_units_with_prefetch():
    assert memory.gathered_parameters([10, 30, 5, 20], "fp16", prefetch=True) == 2 * (10 + 30)
    assert memory.gathered_parameters([10, 30, 5, 20], "fp32", prefetch=False) == 4 * 30


def test_every_gpu_preset_has_its_memory_and_source():
    for gpu in GPUS.values():
        assert gpu.memory_gb > 0 and gpu.memory_source, gpu.name


def big(**training):
    data = star(4, params=2_500_000_000)
    data["compute"] = {"precision": "fp16"}
    data["training"] = {"optimizer": "adam", "iterations": 1, "warmup_iterations": 0, **training}
    return data


def test_a_scenario_that_does_not_fit_is_marked(dpsim_cli, tmp_path):
    """2.5B parameters x 16 bytes = 40 GB of model states: more than a 32 GB V100."""
    res = simulate(big())
    assert res.fits_in_memory is False and res.to_dict()["fits_in_memory"] is False
    assert res.memory_per_gpu_bytes["optimizer_state"] == 12 * 2.5e9
    sharded = simulate(big(), {"sync.strategy": "zero2"})
    assert sharded.fits_in_memory is True
    assert sharded.memory_per_gpu_bytes["optimizer_state"] == 12 * 2.5e9 / 4


def test_memory_check_error_is_one_line_and_exit_2(dpsim_cli, tmp_path):
    import tomli_w
    toml = tmp_path / "big.toml"
    toml.write_bytes(tomli_w.dumps(big(memory_check="error")).encode())
    code, out, err = dpsim_cli("run", toml)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "training.memory_check" in err and "32 GB" in err
    toml.write_bytes(tomli_w.dumps(big()).encode())
    code, out, err = dpsim_cli("run", toml)
    assert code == 0 and "    does not fit: needs 40 GB per GPU" in out      # the diagnosis says it too


@pytest.mark.parametrize("sets, key, words", [
    (["sync.compression=powersgd", "sync.powersgd_rank=0"], "sync.powersgd_rank", "> 0"),
    (["sync.compression=powersgd", "sync.powersgd_rank=65"], "sync.powersgd_rank", "layer3.0.conv1"),
    (["sync.compression=topk", "sync.topk_ratio=0"], "sync.topk_ratio", "> 0"),
    (["sync.compression=topk", "sync.topk_ratio=1.5"], "sync.topk_ratio", "at most 1"),
    (["sync.strategy=zero1", "cluster.gpus_per_node=1"], "sync.strategy", "shards over the GPUs"),
    (["sync.strategy=zero3", "sync.compression=fp16"], "sync.compression", "none"),
])
def test_bad_input_is_one_line_and_exit_2(dpsim_cli, sets, key, words):
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = dpsim_cli("run", "cntk-1bit-k80", *args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert key in err and words in err


def test_the_printed_result_says_it_does_not_fit():
    import io

    from dpsim.config import load_scenario as load
    from dpsim.report import print_result
    sc = load(big())
    out = io.StringIO()
    print_result(sc, simulate(sc), out)
    assert "DOES NOT FIT: needs 40 GB per GPU (optimizer state 30 GB), more than the v100's 32 GB" in out.getvalue()
    assert "memory per GPU         40 GB of 32 GB: parameters 5 GB, gradients 5 GB, optimizer state 30 GB" in out.getvalue()
