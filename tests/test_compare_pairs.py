"""course compare pairs the sharded strategies and the new compressions as both halves run
them: ZeRO without compression, PowerSGD on every all-reduce, 1-bit and top-k (their own
exchanges) once per rank count; the rows' names and the figure's colours tell them apart."""
from course import compare, compare_plot
from course.__main__ import main


def test_configurations_pair_what_both_halves_run():
    configs = compare.configurations([1, 2], ["ring", "ps", "zero1", "zero3"], ["none", "powersgd", "topk", "1bit"])
    # (powersgd is not among compare's --compress choices yet: see test_powersgd_is_refused_in_one_line)
    assert configs[0] == (1, "ring", "none")
    two = [c[1:] for c in configs if c[0] == 2]
    assert ("zero1", "none") in two and ("zero3", "none") in two
    assert not [c for c in two if c[0].startswith("zero") and c[1] != "none"]
    assert ("ring", "powersgd") in two and ("ps", "powersgd") in two
    assert [c for c in two if c[1] == "topk"] == [("ring", "topk")]
    assert [c for c in two if c[1] == "1bit"] == [("ring", "1bit")]
    assert len(set(configs)) == len(configs)


def test_zero_alone_still_runs_its_own_rows():
    assert compare.configurations([2], ["zero2"], ["none", "1bit"]) == [(2, "zero2", "none")]


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
    import pytest
    with pytest.raises(SystemExit) as exit:
        main(["compare", "--sync", "zero4"])
    assert exit.value.code == 2 and "zero4" in capsys.readouterr().err


def test_powersgd_is_refused_in_one_line(capsys):
    import pytest
    with pytest.raises(SystemExit) as exit:
        main(["compare", "--compress", "none,powersgd"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.count("\n") == 1 and "powersgd" in err
