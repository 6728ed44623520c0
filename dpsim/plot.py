"""Figures: speed-up against GPUs, where an iteration's time goes, and the timeline.

    scaling(series)     speed-up against GPU count, one line per label, and the ideal y = x
    breakdown(results)  stacked bars: compute, data wait, exposed comm, ... in ms per iteration
    gantt(trace)        the simulated timeline: one row per GPU, host and busy link channel

Each returns the matplotlib Figure and saves it to `path` when one is given (the format
follows the file's extension: .png, .pdf, .svg). Without a display, matplotlib draws
off-screen (the Agg backend), so these work on a server and in tests.
"""
import math
import os

import matplotlib

if not os.environ.get("DISPLAY") and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from .errors import ScenarioError  # noqa: E402
from .files import shown, writing  # noqa: E402
from .vocabulary import BREAKDOWN, COLOURS  # noqa: E402



def _save(fig, path):
    """Save under a temporary name, renamed to `path` when complete (dpsim.files.writing)."""
    if path is not None:
        try:
            with writing(path, "wb", "--plot") as f:
                fig.savefig(f, format=os.path.splitext(str(path))[1][1:].lower() or None, dpi=120,
                            bbox_inches="tight")
        except (OSError, ValueError) as e:
            raise ScenarioError("--plot", f"cannot write {shown(path)}: {e}") from None
    return fig


def _powers_of_two(counts) -> bool:
    return all(c >= 1 and c & (c - 1) == 0 for c in counts)


def _same_lines(series):
    """The labels of `series` grouped where their (GPUs, speed-up) points are identical: such
    lines would hide each other, so each group is drawn once under all its labels."""
    groups = {}
    for label, results in series.items():
        points = tuple(sorted((r.gpus, r.speedup) for r in results))
        groups.setdefault(points, []).append(label)
    return groups


def _gpus_per_node(series) -> int:
    """GPUs of one node where a sweep went past one node (0 if it never did, or nodes differ)."""
    clusters = [(r.scenario or {}).get("cluster", {}) for results in series.values() for r in results]
    per_node = {c.get("gpus_per_node", 0) for c in clusters if c.get("nodes", 1) > 1}
    return per_node.pop() if len(per_node) == 1 else 0


def scaling(series, path=None, title=""):
    """Speed-up against GPU count: one line per label in `series` (label -> list of Result),
    and the ideal line y = x. The x axis is log2 when every count is a power of two. Where the
    counts go past one node, a dotted line marks it (the network between nodes joins there);
    lines with the same points are drawn once, under all their labels."""
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    counts = sorted({r.gpus for results in series.values() for r in results})
    if not counts:
        counts = [1]
    ax.plot(counts, counts, linestyle="--", color="grey", label="ideal (speed-up = GPUs)")
    for points, labels in _same_lines(series).items():
        label = labels[0] if len(labels) == 1 else " = ".join(labels) + " (the same line)"
        ax.plot([g for g, _ in points], [x for _, x in points], marker="o", label=label)
    per_node = _gpus_per_node(series)
    if per_node:
        ax.axvline(per_node, color="black", linestyle=":", lw=1,
                   label=f"one node ({per_node} GPUs); right of it, nodes talk over the network")
    if len(counts) > 1 and _powers_of_two(counts):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(counts, [str(c) for c in counts])
        low = min([1.0] + [r.speedup for rs in series.values() for r in rs if r.speedup > 0])
        ticks = [2.0 ** k for k in range(math.floor(math.log2(low)), int(math.log2(counts[-1])) + 1)]
        ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speed-up over one GPU (x)")
    ax.set_title(title or "Speed-up against GPU count")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def scaling_bands(series, bands, path=None, title=""):
    """scaling(), each line with its band shaded: bands {id(result): {"speedup": {low, high}}}
    (dpsim.bands.propagate's, one per result), in the colour of the line the result is on."""
    fig = scaling(series, None, title)
    ax = fig.axes[0]
    colour = {line.get_label(): line.get_color() for line in ax.get_lines()}
    for label, results in series.items():
        line = next((name for name in colour if name == label or name.startswith(f"{label} = ")
                     or f" = {label}" in name), None)
        spans = [bands[id(r)]["speedup"] for r in results]
        ax.fill_between([r.gpus for r in results], [b["low"] for b in spans], [b["high"] for b in spans],
                        color=colour.get(line, "0.5"), alpha=0.2, lw=0)
    ax.fill_between([], [], [], color="0.5", alpha=0.2, label="band (the scenario's ranges)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def breakdown(results, path=None, labels=None, title=""):
    """Stacked bars of where an iteration's time goes (ms), one bar per result: anything with a
    `breakdown_s` (a Result, or a Run such as `Result.uncompressed`), stacked bottom up in the
    order of dpsim.vocabulary.BREAKDOWN."""
    bds = [r.breakdown_s for r in results]
    labels = labels or [f"run {i + 1}" for i in range(len(bds))]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.6 * len(bds) + 2.5), 4.8))
    bottom = [0.0] * len(bds)
    for part in BREAKDOWN:
        heights = [bd.get(part, 0.0) * 1e3 for bd in bds]
        if any(heights):
            ax.bar(labels, heights, bottom=bottom, color=COLOURS[part], label=part.replace("_", " "), width=0.6)
            bottom = [b + h for b, h in zip(bottom, heights)]
    for x, total in enumerate(bottom):
        ax.annotate(f"{total:.1f} ms", (x, total), ha="center", va="bottom", xytext=(0, 3), textcoords="offset points")
    ax.set_ylabel("time per iteration (ms)")
    ax.set_ylim(0, max(bottom + [1e-9]) * 1.15)
    ax.set_title(title or "Where an iteration's time goes")
    handles, names = ax.get_legend_handles_labels()           # top of the stack first, as drawn
    ax.legend(handles[::-1], names[::-1], loc="center left", bbox_to_anchor=(1.0, 0.5))
    return _save(fig, path)


# Fixed colours for the steps of an iteration, so every timeline reads the same way; other span
# names (transfers, codec kernels) take colours from a palette in order of first appearance.
STEP_COLOURS = {"load": "#dd8452", "forward": "#4c72b0", "backward": "#8fb0de", "update": "#55a868",
                "reduce": "#c44e52", "host-to-device": "#937860",
                "reduce-scatter": "#6a3d9a", "all-gather": "#e6ab02"}
# How lanes are named (dpsim.cluster's endpoints), written under every timeline.
LANE_NAMES = ("rows: gpuN = GPU N, hostN = node N's CPU; A>B = the link channel from A to B, where "
              "pciswN.S = PCIe switch S of node N, nvswN = its NVSwitch, nicN.J = NIC J, net = the network")
MAIN_STEPS = {"load", "forward", "backward", "update"}      # drawn full height; kernels beside them half


def gantt(trace, path=None, ax=None, title="", max_lanes=24, iterations=None):
    """The trace as a Gantt chart: one row per lane (GPUs first, then hosts, then the busiest
    link channels, at most `max_lanes` rows), one colour per span name, time in ms.
    On a GPU or host row, the iteration's steps (load, forward, backward, update) fill the row
    and other kernels (reduce, quantise, ...) the lower half, as they may run beside them.
    Warm-up iterations are shaded grey. `iterations=(first, stop)`: draw only those (by index)."""
    spans = trace.spans
    marks = trace.iterations()
    if iterations is not None and marks:
        first, stop = iterations
        chosen = marks[first:stop] or marks[-1:]
        t0, t1 = chosen[0][1], chosen[-1][2]
        spans = [s for s in spans if s.end > t0 and s.start < t1]
        marks = chosen
    busy = {}
    for s in spans:
        busy[s.lane] = busy.get(s.lane, 0.0) + s.end - s.start
    order = [lane for lane in trace.lanes() if lane in busy]
    devices = [lane for lane in order if "." not in lane and ">" not in lane]
    links = sorted((lane for lane in order if lane not in devices), key=lambda lane: -busy[lane])
    lanes = (devices + links)[:max_lanes]
    row = {lane: i for i, lane in enumerate(lanes)}
    kinds = list(dict.fromkeys(s.name for s in spans if s.lane in row))
    others = [plt.get_cmap("tab10")(i) for i in (6, 8, 9, 4, 7)] + list(plt.get_cmap("tab20b").colors)
    palette = iter(others * (1 + len(kinds) // len(others)))
    colour = {k: STEP_COLOURS.get(k) or next(palette) for k in kinds}

    fig = ax.figure if ax is not None else plt.figure(figsize=(11, 0.35 * len(lanes) + 1.8))
    ax = ax if ax is not None else fig.add_subplot()
    bars = {}
    for s in spans:
        if s.lane in row:
            bars.setdefault((s.lane, s.name), []).append((s.start * 1e3, (s.end - s.start) * 1e3))
    for (lane, name), xs in bars.items():
        full = lane not in devices or name in MAIN_STEPS
        y = (row[lane] - 0.4, 0.8) if full else (row[lane], 0.4)
        ax.broken_barh(xs, y, color=colour[name], linewidth=0)
    for k, start, end, warmup in marks:
        if warmup:
            ax.axvspan(start * 1e3, end * 1e3, color="grey", alpha=0.12, lw=0)
        ax.axvline(start * 1e3, color="black", lw=0.5, alpha=0.4)
    handles = [Patch(color=colour[k], label=k) for k in kinds]
    if any(w for *_, w in marks):
        handles.append(Patch(color="grey", alpha=0.12, label="warm-up"))
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlabel(f"simulated time (ms); thin lines: iteration starts\n{LANE_NAMES}", fontsize=8)
    ax.set_title(title or "Simulated timeline")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)
    return _save(fig, path)
