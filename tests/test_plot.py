"""dpsim.plot: the figures exist, are labelled, and draw the numbers they are given."""
import pytest

import dpsim
from dpsim import cli, plot

SMALL = {"training.iterations": 1, "training.warmup_iterations": 0}


def is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_breakdown_bars_stack_to_the_iteration_time(tmp_path):
    runs = [dpsim.simulate("d2l-ps-vs-ring", {**SMALL, "sync.strategy": s}) for s in ("ps", "ring")]
    fig = plot.breakdown(runs, tmp_path / "b.png", labels=["ps", "ring"])
    assert is_png(tmp_path / "b.png")
    ax = fig.axes[0]
    assert "ms" in ax.get_ylabel()
    for x, run in enumerate(runs):
        bar_tops = [p.get_y() + p.get_height() for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - x) < 1e-9]
        assert max(bar_tops) == pytest.approx(run.iteration_time_s * 1e3, rel=1e-9)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["ps", "ring"]
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"compute", "exposed comm"}


def test_scaling_has_the_ideal_line_and_one_line_per_series(tmp_path):
    series = {s: dpsim.sweep("d2l-ps-vs-ring", [1, 2, 4], {**SMALL, "sync.strategy": s}) for s in ("ps", "ring")}
    fig = plot.scaling(series, tmp_path / "s.png")
    assert is_png(tmp_path / "s.png")
    ax = fig.axes[0]
    lines = ax.get_lines()
    assert len(lines) == 3
    ideal = [line for line in lines if "ideal" in line.get_label()]
    assert len(ideal) == 1 and list(ideal[0].get_xdata()) == [1, 2, 4] == list(ideal[0].get_ydata())
    ring = [line for line in lines if line.get_label() == "ring"][0]
    assert list(ring.get_ydata()) == [r.speedup for r in series["ring"]]
    assert ax.get_xlabel() == "GPUs" and "speed-up" in ax.get_ylabel()


def test_gantt_has_a_row_per_gpu(tmp_path):
    res = dpsim.simulate("d2l-ps-vs-ring", {**SMALL, "sync.strategy": "ring"}, trace=True)
    fig = plot.gantt(res.trace, tmp_path / "g.png")
    assert is_png(tmp_path / "g.png")
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert rows[:4] == ["gpu0", "gpu1", "gpu2", "gpu3"] and len(rows) > 4
    assert "ms" in fig.axes[0].get_xlabel()


def test_run_plot_writes_a_png_with_an_uncompressed_bar(tmp_path, capsys):
    path = tmp_path / "run.png"
    assert cli.main(["run", "cntk-1bit-k80", "--set", "sync.compression=1bit", "--plot", str(path)]) == 0
    assert is_png(path)
    assert str(path) in capsys.readouterr().out
