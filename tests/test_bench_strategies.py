"""python -m dpsim.bench --strategies: every strategy runs in a child process that is stopped
at the limit, and one that does not apply to the cluster is reported, not fatal."""
from dpsim import bench


def test_a_run_within_the_limit_reports_its_path_and_time():
    row = bench.bench_strategy(8, "ring", 60)
    assert not row["timed_out"] and row["cpu_s"] > 0 and row["path"] == "fast"


def test_a_run_past_the_limit_is_stopped_and_says_so():
    row = bench.bench_strategy(1024, "sharded-ps", 0.5, fast=False)    # a million flows a step
    assert row["timed_out"] and row["limit_s"] == 0.5


def test_the_detailed_path_is_run_beside_the_fast_one_and_agrees(capsys):
    rows = [bench.with_detailed(bench.bench_strategy(16, s, 60), 60) for s in ("ring", "sharded-ps")]
    for row in rows:
        assert row["path"] == "fast" and row["detailed"]["path"] == "detailed"
        assert row["relative_difference"] < 1e-9 and row["speedup"] > 0
    bench.print_strategies(rows, [16])
    assert "detailed path" in capsys.readouterr().out


def test_a_strategy_that_does_not_apply_is_an_error_row(capsys):
    rows = [bench.bench_strategy(16, "dataparallel", 60), bench.bench_strategy(16, "fp16", 60)]
    assert "one node only" in rows[0]["error"] and "error" not in rows[1]
    bench.print_strategies(rows, [16])
    out = capsys.readouterr().out
    assert "dataparallel on 16 GPUs: sync.strategy: dataparallel drives the GPUs of one node only" in out


def test_a_run_reports_its_peak_memory(capsys):
    """The child's maximum resident set size, in MiB: more than the interpreter, less than 4 GB."""
    row = bench.bench_strategy(16, "hierarchical", 60)
    assert 10 < row["max_rss_mib"] < 4096
    bench.print_strategies([row], [16])
    assert f"{row['max_rss_mib']:,.0f} MiB" in capsys.readouterr().out
