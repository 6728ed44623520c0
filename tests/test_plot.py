"""dpsim.plot: the figures exist, are labelled, and draw the numbers they are given."""
import pytest

import dpsim
from dpsim import plot

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
        bar = [p for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - x) < 1e-9]
        assert max(p.get_y() + p.get_height() for p in bar) == pytest.approx(run.iteration_time_s * 1e3, rel=1e-9)
        heights = sorted(p.get_height() for p in bar if p.get_height() > 0)
        assert heights == pytest.approx(sorted(v * 1e3 for v in run.breakdown_s.values() if v > 0), rel=1e-9)
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


def test_gantt_draws_on_a_given_axis_and_shades_the_warm_up():
    import matplotlib.pyplot as plt
    res = dpsim.simulate("d2l-ps-vs-ring", {"training.iterations": 2, "training.warmup_iterations": 1,
                                            "sync.strategy": "ring"}, trace=True)
    res.trace.warmup_iterations = 1
    fig, (top, bottom) = plt.subplots(2)
    assert plot.gantt(res.trace, ax=bottom) is fig and not top.collections and bottom.collections
    start, end = res.trace.iteration_starts[0] * 1e3, res.trace.iteration_starts[1] * 1e3
    shaded = [p for p in bottom.patches if p.get_alpha() and p.get_alpha() < 0.5]
    assert len(shaded) == 1
    span = shaded[0]
    assert (span.get_x(), span.get_x() + span.get_width()) == pytest.approx((start, end))
    assert "warm-up" in [t.get_text() for t in bottom.get_legend().get_texts()]


def test_gantt_window_keeps_only_the_chosen_iterations():
    res = dpsim.simulate("d2l-ps-vs-ring", {"training.iterations": 3, "training.warmup_iterations": 0,
                                            "sync.strategy": "ring"}, trace=True)
    fig = plot.gantt(res.trace, iterations=(1, 2))
    ax = fig.axes[0]
    t0, t1 = res.trace.iteration_starts[1] * 1e3, res.trace.iteration_starts[2] * 1e3
    gpu0 = [c for c in ax.collections if c.get_paths() and abs(c.get_paths()[0].vertices[:, 1].min() + 0.4) < 1e-9]
    edges = [v for c in gpu0 for path in c.get_paths() for v in path.vertices[:, 0]]
    assert t0 - 1e-6 <= min(edges) and max(edges) <= t1 + 1e-6
    forwards = [s for s in res.trace.spans if s.lane == "gpu0" and s.name == "forward" and t0 <= s.start * 1e3 < t1]
    assert len(forwards) == 1


def test_run_plot_writes_a_png_with_an_uncompressed_bar(tmp_path, dpsim_cli):
    path = tmp_path / "run.png"
    code, out, _ = dpsim_cli("run", "cntk-1bit-k80", "--set", "sync.compression=1bit", "--plot", path)
    assert code == 0
    assert is_png(path)
    assert str(path) in out


def test_run_plot_with_trace_draws_the_timeline_beside(tmp_path, dpsim_cli):
    path = tmp_path / "run.png"
    code, out, _ = dpsim_cli("run", "d2l-ps-vs-ring", "--set", "training.iterations=2", "--plot", path,
                             "--trace", tmp_path / "t.json")
    assert code == 0
    assert is_png(path) and is_png(tmp_path / "run-timeline.png")
    assert str(tmp_path / "run-timeline.png") in out
