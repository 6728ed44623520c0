"""A custom model's weight matrices (model.matrices): what course calibrate writes for mpi_impl's
MLP, so that dpsim can cost PowerSGD on it. The layers they make, PowerSGD's sync on them
against dpsim.analytic's closed forms and bytes counted by hand, and bad values refused in one
line."""
import pytest

from dpsim import analytic, load_scenario, models
from dpsim.engine import Engine
from dpsim.hardware import GPUS

from dpsim_helpers import star

ALPHA, BETA = 6e-6, 1 / 12.5e9
GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)
LAUNCH, MEM_BW = 5e-6, GPUS["v100"].mem_bw_gbs * 1e9
# mpi_impl's MLP on 8 x 8 synthetic images, width 1024, depth 2: weights 64x1024, 1024x1024,
# 1024x10 and one bias per output, 1024 + 1024 + 10
MLP = [[64, 1024], [1024, 1024], [1024, 10]]
BIASES = 1024 + 1024 + 10
PARAMS = 64 * 1024 + 1024 * 1024 + 1024 * 10 + BIASES


def mlp(n, **sync):
    data = star(n, 12.5, 3.0, params=PARAMS, **sync)
    data["model"].update(layers=3, matrices=MLP, flops_per_sample=6 * PARAMS)
    data["training"] = {"iterations": 2, "warmup_iterations": 1}
    return data


def test_each_layer_holds_its_matrix_and_a_share_of_the_vectors():
    model = models.custom_model(PARAMS, 6 * PARAMS, 3, matrices=MLP)
    share = BIASES // 3                                        # 686, the remainder 0
    assert [layer.params for layer in model.layers] == [65536 + share, 1048576 + share, 10240 + share]
    assert [layer.matrix for layer in model.layers] == [(64, 1024), (1024, 1024), (1024, 10)]
    assert model.params == PARAMS
    # forward FLOPs: a third of the training FLOPs, shared as the parameters are
    assert model.layers[1].fwd_flops == pytest.approx(2 * PARAMS * (1048576 + share) / PARAMS)


def test_without_matrices_a_custom_model_is_equal_layers_as_before():
    model = models.custom_model(10, 30.0, 3)
    assert [layer.params for layer in model.layers] == [4, 3, 3]
    assert [layer.fwd_flops for layer in model.layers] == [pytest.approx(10 / 3)] * 3
    assert not any(layer.matrix for layer in model.layers)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("rank", [1, 4])
def test_powersgd_on_the_calibrated_mlp_matches_closed_form(n, rank):
    sc = load_scenario(mlp(n, compression="powersgd", powersgd_rank=rank))
    matrices = [tuple(m) for m in MLP]
    p, q, u = analytic.powersgd_wire(matrices, BIASES, rank)
    # by hand: P is rows x r, Q columns x r, the biases as they are, 4 bytes each
    assert (p, q, u) == (4 * rank * (64 + 1024 + 1024), 4 * rank * (1024 + 1024 + 10), 4 * BIASES)
    flops = GPUS["v100"].fp32_tflops * 1e12 * sc.compute.efficiency
    expected = (sum(analytic.ring(n, b, ALPHA, BETA, GAMMA) for b in (p, q, u))
                + analytic.powersgd_codec(matrices, BIASES, rank, LAUNCH, MEM_BW, flops))
    assert Engine(sc).sync_alone() == pytest.approx(expected, rel=0.01)
    assert Engine(sc).run().bytes_sent_per_gpu == pytest.approx(2 * (n - 1) / n * (p + q + u), rel=1e-9)


def test_matrices_split_into_buckets_with_their_layers():
    """With buckets of 1 MiB backward makes two: the 1024x10 and 1024x1024 layers, then the
    64x1024 one; each bucket carries its own matrices to PowerSGD."""
    from dpsim import workload
    buckets = workload.build(load_scenario(mlp(2, compression="powersgd", bucket_mib=1.0))).buckets
    assert [[m[:2] for m in b.matrices] for b in buckets] == [[(1024, 10), (1024, 1024)], [(64, 1024)]]
    assert sum(b.nbytes for b in buckets) == 4 * PARAMS


@pytest.mark.parametrize("change, key, words", [
    ({"matrices": [[64, 1024]]}, "model.matrices", "set model.layers = 1"),
    ({"matrices": [[64, 1024], [1024, 1024], [1024, 100]]}, "model.matrices", "more than model.params"),
    ({"matrices": [[64, 1024], [0, 1024], [1024, 10]]}, "model.matrices[1]", "two whole numbers > 0"),
    ({"matrices": [[64, 1024], [1024], [1024, 10]]}, "model.matrices[1]", "two whole numbers > 0"),
    ({"matrices": [[64, 1024.5], [1024, 1024], [1024, 10]]}, "model.matrices[0]", "two whole numbers > 0"),
    ({"matrices": "64x1024"}, "model.matrices", "a list of [rows, columns]"),
    ({"matrices": []}, "sync.compression", "model.matrices"),
])
def test_bad_matrices_are_one_line_and_exit_2(dpsim_cli, tmp_path, change, key, words):
    import tomli_w
    data = mlp(2, compression="powersgd")
    data["model"].update(change)
    toml = tmp_path / "s.toml"
    toml.write_bytes(tomli_w.dumps(data).encode())
    code, out, err = dpsim_cli("run", toml)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert key in err and words in err


def test_a_preset_takes_no_matrices_and_replaces_them(dpsim_cli):
    code, _, err = dpsim_cli("run", "cntk-1bit-k80", "--set", "model.matrices=[[2, 2]]")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "model.matrices" in err
    sc = load_scenario(mlp(2)).with_overrides({"model.preset": "resnet50"})
    assert sc.model.matrices == [] and sc.model_spec().name == "resnet50"


def test_rank_above_every_matrix_names_the_largest(dpsim_cli, tmp_path):
    import tomli_w
    toml = tmp_path / "s.toml"
    toml.write_bytes(tomli_w.dumps(mlp(2, compression="powersgd", powersgd_rank=1025)).encode())
    code, _, err = dpsim_cli("run", toml)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "sync.powersgd_rank" in err and "1024 x 1024" in err and "1 to 1024" in err
