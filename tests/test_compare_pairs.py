"""course compare pairs the sharded strategies and the new compressions as both halves run
them: ZeRO without compression, PowerSGD on every all-reduce, 1-bit and top-k (their own
exchanges) once per rank count; the rows' names and the figure's colours tell them apart."""
import pytest

from course import compare, compare_plot
from course.__main__ import main


def test_configurations_pair_what_both_halves_run():
    configs = compare.configurations([1, 2], ["ring", "ps", "zero1", "zero3"], ["none", "powersgd", "topk", "1bit"])
    assert configs[0] == (1, "ring", "none")
    two = [c[1:] for c in configs if c[0] == 2]
    assert ("zero1", "none") in two and ("zero3", "none") in two
    assert not [c for c in two if c[0].startswith("zero") and c[1] != "none"]
    assert ("ring", "powersgd") in two and ("ps", "powersgd") in two
    assert [c for c in two if c[1] == "topk"] == [("ring", "topk")]
    assert [c for c in two if c[1] == "1bit"] == [("ring", "1bit")]
    assert len(set(configs)) == len(configs)


def test_zero_alone_still_runs_its_own_rows_and_compressions_over_the_ring():
    """Only ZeRO stages in --sync: ZeRO without compression, and the compressions asked over
    the ring (ZeRO reduce-scatters full-precision gradients), said in a note under the table."""
    assert compare.configurations([2], ["zero2"], ["none"]) == [(2, "zero2", "none")]
    assert compare.configurations([2], ["zero2"], ["none", "1bit"]) == [(2, "zero2", "none"), (2, "ring", "1bit")]
    configs = compare.configurations([1, 2, 3, 4], ["zero1", "zero3"], ["none", "powersgd"])
    assert configs == [(1, "ring", "none")] + [(n, s, c) for n in (2, 3, 4) for s, c in
                                              [("zero1", "none"), ("zero3", "none"), ("ring", "powersgd")]]
    (note,) = compare.notes(["zero1", "zero3"], ["none", "powersgd"])
    assert note.startswith("powersgd:") and "over ring" in note
    assert compare.notes(["ring", "zero1"], ["none", "powersgd"]) == []


def test_names_and_colours_tell_rows_apart():
    rows = [{"ranks": 2, "sync": s, "compress": c} for s, c in
            [("ring", "none"), ("ring", "powersgd"), ("ring", "topk"), ("zero3", "none"), ("ring", "1bit")]]
    names = [compare.name_of(2, r["sync"], r["compress"]) for r in rows]
    assert names == ["2 ranks ring", "2 ranks ring+powersgd", "2 ranks topk", "2 ranks zero3", "2 ranks 1bit"]
    assert len(set(compare_plot.colours(rows).values())) == 5


def test_scenarios_use_the_same_names_in_dpsim(tmp_path):
    import dpsim
    prof = {"cluster": {"gpu": {"fp32_tflops": 0.1, "mem_bw_gbs": 20.0}, "intra": {"bandwidth_gbs": 5.0, "latency_us": 50.0}},
            "model": {"params": 100_000, "flops_per_sample": 600_000.0, "layers": 2}}
    for cfg in [(2, "zero1", "none"), (2, "zero3", "none"), (2, "ring", "topk")]:
        res = dpsim.simulate(compare.scenario_for(prof, *cfg, batch=64))
        assert res.scenario["sync"]["strategy"] == cfg[1] and res.scenario["sync"]["compression"] == cfg[2]


def test_probe_blocks_are_what_course_probe_runs():
    assert compare.probe_block("zero3", "none") == "ring"
    assert compare.probe_block("ps", "powersgd") == "ring"
    assert compare.probe_block("ps", "none") == "ps"
    assert compare.probe_block("ring", "1bit") == "1bit"


def test_the_command_line_takes_the_new_names(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["compare", "--sync", "zero4"])
    assert exit.value.code == 2 and "zero4" in capsys.readouterr().err


MLP_16 = [[16, 64], [10, 16]]       # mpi_impl's MLP at --width 16 --depth 1, 8x8 inputs, rows <= columns


def profile(tmp_path, matrices=MLP_16):
    """A profile as calibrate writes one for --model mlp --width 16 --depth 1 (no sidecar)."""
    from course.calibrate import to_toml
    model = {"params": 64 * 16 + 16 + 16 * 10 + 10, "flops_per_sample": 7000.0, "layers": 2}
    if matrices:
        model["matrices"] = matrices
    prof = {"cluster": {"gpu": {"fp32_tflops": 0.1, "mem_bw_gbs": 20.0},
                        "intra": {"bandwidth_gbs": 5.0, "latency_us": 50.0}}, "model": model}
    path = tmp_path / "p.toml"
    path.write_text(to_toml(prof))
    return path, prof


def test_calibrate_records_the_weight_matrices_powersgd_takes():
    from course.measurements import weight_matrices
    from mpi_impl import nets
    mlp = nets.build("mlp", (1, 8, 8), 10, 1024, 2)
    # inputs x outputs, turned to have no more rows than columns, as mpi_impl's PowerSGD takes them
    assert weight_matrices(mlp) == [[64, 1024], [1024, 1024], [10, 1024]]
    assert weight_matrices(nets.build("mlp", (1, 8, 8), 10, 16, 1)) == MLP_16
    # the CNN: 3x3 convolutions F x C x 3 x 3 as F x 9C, then the linear layer (2w x 2 x 2 inputs)
    cnn = nets.build("cnn", (1, 8, 8), 10, 4, 1)
    assert weight_matrices(cnn) == [[4, 9], [8, 36], [10, 2 * 4 * 2 * 2]]


def test_powersgd_runs_with_the_same_rank_in_both_halves(tmp_path, monkeypatch):
    """The prediction at sync.powersgd_rank 1 on the profile's matrices sends what mpi_impl's
    closed form says its PowerSGD sends (mpi_impl.powersgd.bytes_per_step on the network's own
    arrays), and mpi_impl.train is given --powersgd-rank 1."""
    import dpsim
    from mpi_impl import nets, powersgd
    from course import launch
    _, prof = profile(tmp_path)
    for n in (2, 4):
        res = dpsim.simulate(compare.scenario_for(prof, n, "ring", "powersgd", batch=64))
        assert res.scenario["sync"]["compression"] == "powersgd" and res.scenario["sync"]["powersgd_rank"] == 1
        net = nets.build("mlp", (1, 8, 8), 10, 16, 1)
        arrays = powersgd.parameter_arrays(net, 0, net.num_params)
        assert res.bytes_sent_per_gpu == pytest.approx(powersgd.bytes_per_step(arrays, 1, 4, n), rel=1e-9)
    seen = []

    def run(ranks, module, args, timeout):             # mpi_impl.train, as far as compare sees it
        seen.append(args)
        compare.Path(args[args.index("--json") + 1]).write_text("{}")
    monkeypatch.setattr(launch, "run", run)
    compare.measure(2, "ring", "powersgd", "mlp", 16, 1, 64, 256, 2)
    compare.measure(2, "ring", "topk", "mlp", 16, 1, 64, 256, 2)
    assert "--powersgd-rank" in seen[0] and seen[0][seen[0].index("--powersgd-rank") + 1] == "1"
    assert seen[1][seen[1].index("--topk-ratio") + 1] == "0.01"


def test_an_old_profile_without_matrices_is_refused_for_powersgd_only(tmp_path, capsys):
    from course.__main__ import check_before_work, parser
    old, _ = profile(tmp_path, matrices=None)
    common = ["compare", "--profile", str(old), "--model", "mlp", "--width", "16", "--depth", "1"]
    with pytest.raises(SystemExit) as exit:
        main([*common, "--compress", "none,powersgd"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.count("\n") == 1
    assert "--compress powersgd" in err and "model.matrices" in err and "course calibrate again" in err
    assert check_before_work(parser().parse_args([*common, "--compress", "none,topk"])) is None
    new, _ = profile(tmp_path, matrices=MLP_16)
    assert check_before_work(parser().parse_args([*common[:2], str(new), *common[3:], "--compress", "powersgd"])) is None


def test_powersgd_above_the_matrices_is_one_line(tmp_path):
    """A profile's matrices with a rank above them (edited by hand): dpsim's own refusal."""
    import dpsim
    from dpsim.errors import ScenarioError
    _, prof = profile(tmp_path)
    data = compare.scenario_for(prof, 2, "ring", "powersgd")
    data["sync"]["powersgd_rank"] = 17
    with pytest.raises(ScenarioError, match="choose 1 to 16"):
        dpsim.load_scenario(data)
