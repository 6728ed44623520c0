"""Figures a student reads without the lecture: node boundaries, lines that coincide, lane
names, legends in the order of the stack, colours told apart."""
import matplotlib.colors as mcolors

import dpsim
from dpsim import plot
from dpsim.vocabulary import BREAKDOWN

SMALL = {"training.iterations": 1, "training.warmup_iterations": 0}


def test_identical_lines_are_drawn_once_under_both_labels():
    same = dpsim.sweep("d2l-ps-vs-ring", [1, 2], {**SMALL, "sync.strategy": "ring"})
    other = dpsim.sweep("d2l-ps-vs-ring", [1, 2], {**SMALL, "sync.strategy": "ps"})
    ax = plot.scaling({"ring": same, "ring again": same, "ps": other}).axes[0]
    labels = [line.get_label() for line in ax.get_lines() if "ideal" not in line.get_label()]
    assert labels == ["ring = ring again (the same line)", "ps"]


def test_the_node_boundary_is_marked_where_a_sweep_leaves_one_node():
    runs = dpsim.sweep("d2l-ps-vs-ring", [1, 2, 4, 8], {**SMALL, "sync.strategy": "ring"})
    ax = plot.scaling({"ring": runs}).axes[0]
    marks = [line for line in ax.get_lines() if "one node" in line.get_label()]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [4, 4]       # d2l's node holds 4 GPUs
    inside = plot.scaling({"ring": runs[:3]}).axes[0]
    assert not [line for line in inside.get_lines() if "one node" in line.get_label()]


def test_breakdown_legend_reads_top_of_the_stack_first():
    res = dpsim.simulate("cntk-1bit-k80", {**SMALL, "sync.compression": "1bit"})
    ax = plot.breakdown([res]).axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    drawn = [p.replace("_", " ") for p in BREAKDOWN if res.breakdown_s.get(p, 0) > 0]
    assert legend == drawn[::-1] and len(legend) >= 3


def test_gantt_explains_its_lane_names_and_tells_reduce_from_reduce_scatter():
    res = dpsim.simulate("cntk-1bit-k80", SMALL, trace=True)
    ax = plot.gantt(res.trace).axes[0]
    lanes = [t.get_text() for t in ax.get_yticklabels()]
    assert any(">" in lane and "pcisw" in lane for lane in lanes)
    caption = ax.get_xlabel()
    for word in ("gpuN", "hostN", "A>B", "pciswN.S", "nicN.J"):
        assert word in caption
    rgb = {k: mcolors.to_rgb(plot.STEP_COLOURS[k]) for k in ("reduce", "reduce-scatter", "all-gather")}
    far = lambda a, b: sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5 > 0.35
    assert far(rgb["reduce"], rgb["reduce-scatter"]) and far(rgb["reduce-scatter"], rgb["all-gather"])


def test_sweep_plot_says_what_it_wrote(tmp_path, dpsim_cli):
    path = tmp_path / "s.png"
    code, out, err = dpsim_cli("sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--set", "training.iterations=1",
                               "--plot", path, "--json")
    assert code == 0 and path.exists()
    assert f"plotted in {path}" in err and "plotted" not in out       # stdout stays the JSON rows
