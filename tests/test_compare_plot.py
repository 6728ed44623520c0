"""course compare's figure: colour means one thing in both panels (the algorithm), markers tell
rank counts apart, and the legend names both."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from course import compare_plot  # noqa: E402


def row(ranks, sync, compress, pred, meas, speed=None):
    r = {"ranks": ranks, "sync": sync, "compress": compress, "predicted_iteration_s": pred,
         "measured_iteration_s": meas, "runs": [{"measured_iteration_s": meas, "measured_speedup": speed}]}
    if speed is not None:
        r.update(measured_speedup=speed, predicted_speedup=speed * 1.05)
    return r


ROWS = [row(1, "ring", "none", 0.010, 0.010, 1.0), row(2, "ring", "none", 0.006, 0.0062, 1.6),
        row(4, "ring", "none", 0.004, 0.0045, 2.2), row(2, "ps", "none", 0.007, 0.0071, 1.4),
        row(2, "ring", "1bit", 0.012, 0.013, 0.8)]
RESULT = {"rows": ROWS, "median_abs_error": 0.05, "median_abs_speedup_error": 0.05}


def test_one_colour_per_algorithm_in_both_panels():
    fig, (left, right) = plt.subplots(1, 2)
    compare_plot.iteration_panel(left, RESULT)
    compare_plot.speedup_panel(right, RESULT)
    predicted = {line.get_label().split(":")[0]: mcolors.to_hex(line.get_color())
                 for line in right.get_lines() if line.get_label().endswith(": predicted")}
    assert set(predicted) == {"ring", "ps", "1bit"}
    points = [(c.lines[0].get_xdata()[0], c.lines[0]) for c in left.containers]
    for r in ROWS:
        line = next(line for x, line in points if abs(x - r["measured_iteration_s"] * 1e3) < 1e-9)
        expected = "#000000" if r["ranks"] == 1 else predicted[compare_plot.label_of(r)]
        assert mcolors.to_hex(line.get_color()) == expected, r
        assert line.get_marker() == compare_plot.MARKERS[r["ranks"]]
    legend = [t.get_text() for t in left.get_legend().get_texts()]
    assert {"ring", "ps", "1bit", "1 rank (no sync)", "2 ranks", "4 ranks"} <= set(legend)
    plt.close(fig)


def test_a_compare_whose_one_rank_row_names_no_plotted_algorithm_draws():
    """`--sync zero1,zero3 --compress none,powersgd`: the 1-rank row says "ring" (no sync), and no
    row with more ranks is a plain ring; every line is still drawn, one colour each."""
    rows = [row(1, "ring", "none", 0.010, 0.010, 1.0), row(2, "zero1", "none", 0.006, 0.0062, 1.6),
            row(2, "zero3", "none", 0.007, 0.0071, 1.4), row(2, "ring", "powersgd", 0.012, 0.013, 0.8)]
    fig, (left, right) = plt.subplots(1, 2)
    compare_plot.speedup_panel(right, {"rows": rows})
    drawn = {line.get_label().split(":")[0] for line in right.get_lines() if line.get_label().endswith(": predicted")}
    assert drawn == {"zero1", "zero3", "ring+powersgd"}
    plt.close(fig)
