"""What if? Re-simulate one training setup while you turn four knobs.

    from course import whatif
    panel = whatif.explore()    # sliders in Jupyter when ipywidgets is installed,
                                # otherwise (or with static=True) a grid of figures

The setup: nodes of 4 V100 GPUs on PCIe 3.0 (two GPUs per PCIe switch, as in the d2l and
PyTorch stories), ResNet-50 in FP32 on synthetic data, dpsim's default compute efficiency,
and the nodes joined by a network with Ethernet's 25 us latency. The knobs:

  bandwidth_gbs   the network between nodes, GB/s per direction (10 GbE = 1.25, 100 GbE = 12.5)
  batch_per_gpu   samples per GPU per iteration
  gpus            GPUs in all: up to 4 fill one node, more add whole nodes
  strategy        how the gradients are synchronised

Each drawing runs dpsim.sweep over 1, 2, 4, ... GPUs up to the chosen count. One measured
iteration is enough: with synthetic data and no jitter every iteration is the same.
"""
import matplotlib.pyplot as plt

import dpsim
from dpsim.vocabulary import BREAKDOWN, COLOURS

GPUS_PER_NODE = 4
GPU_COUNTS = (1, 2, 4, 8, 16, 32)
BATCHES = (8, 16, 32, 64, 128, 256)
STRATEGIES = ("ring", "hierarchical", "halving-doubling", "recursive-doubling", "sharded-ps", "ps")
DEFAULTS = {"bandwidth_gbs": 1.25, "batch_per_gpu": 64, "gpus": 16, "strategy": "ring"}


def scenario(bandwidth_gbs, batch_per_gpu, strategy) -> dict:
    """The what-if setup as a scenario dict (GPU count is set by the sweep)."""
    return {
        "name": "whatif",
        "description": "nodes of 4 V100s on PCIe 3.0, ResNet-50, a network of chosen bandwidth",
        "source": "presets: dpsim.hardware (v100, pcie3); model: dpsim.models (resnet50); "
                  "network latency 25 us as dpsim's Ethernet presets",
        "cluster": {"nodes": 1, "gpus_per_node": GPUS_PER_NODE, "gpu": "v100", "intra": "pcie3",
                    "host_link": "pcie3", "gpus_per_pcie_switch": 2,
                    "inter": {"bandwidth_gbs": float(bandwidth_gbs), "latency_us": 25.0,
                              "kind": "ethernet", "name": f"network {bandwidth_gbs:.3g} GB/s"}},
        "model": {"preset": "resnet50"},
        "training": {"batch_per_gpu": int(batch_per_gpu), "iterations": 1, "warmup_iterations": 0},
        "data": {"source": "synthetic"},
        "sync": {"strategy": strategy},
    }


def counts_up_to(gpus) -> list[int]:
    return [g for g in GPU_COUNTS if g <= gpus] or [1]


def run(bandwidth_gbs, batch_per_gpu, gpus, strategy, counts=None):
    """dpsim results at each GPU count up to `gpus` (1, 2, 4, ...)."""
    return dpsim.sweep(scenario(bandwidth_gbs, batch_per_gpu, strategy), counts or counts_up_to(gpus))


def _speedup_axes(ax, counts):
    ax.plot(counts, counts, "--", color="grey", label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.set_yticks(counts, [str(c) for c in counts])
    ax.minorticks_off()
    ax.grid(True, alpha=0.3)


def draw(bandwidth_gbs=DEFAULTS["bandwidth_gbs"], batch_per_gpu=DEFAULTS["batch_per_gpu"],
         gpus=DEFAULTS["gpus"], strategy=DEFAULTS["strategy"]):
    """One what-if: speed-up against GPUs (left), where one iteration's time goes (right)."""
    results = run(bandwidth_gbs, batch_per_gpu, gpus, strategy)
    one, last = results[0], results[-1]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    counts = [r.gpus for r in results]
    _speedup_axes(left, counts)
    left.plot(counts, [r.speedup for r in results], "o-", color="#4c72b0",
              label=f"{strategy}: {last.speedup:.1f}x on {last.gpus} GPUs")
    left.set_xlabel("GPUs")
    left.set_ylabel("speed-up over one GPU (x)")
    left.set_title("speed-up")
    left.legend(loc="upper left")

    labels = ["1 GPU", f"{last.gpus} GPUs"]
    bottoms = [0.0, 0.0]
    for part in BREAKDOWN:
        values = [one.breakdown_s.get(part, 0.0) * 1e3, last.breakdown_s.get(part, 0.0) * 1e3]
        if any(v > 0 for v in values):
            right.bar(labels, values, bottom=bottoms, color=COLOURS[part], label=part.replace("_", " "))
            bottoms = [b + v for b, v in zip(bottoms, values)]
    right.set_ylabel("time per iteration (ms)")
    right.set_title(f"{last.throughput_samples_per_s:,.0f} samples/s; one sync {last.sync_time_s * 1e3:.1f} ms")
    right.legend(loc="upper left", fontsize="small")
    right.set_ylim(0, max(bottoms) * 1.35)
    nodes = max(1, last.gpus // GPUS_PER_NODE) if last.gpus > GPUS_PER_NODE else 1
    fig.suptitle(f"{strategy}, {last.gpus} GPUs on {nodes} node{'s' if nodes > 1 else ''}, "
                 f"batch {batch_per_gpu} per GPU, network {bandwidth_gbs:.3g} GB/s")
    fig.tight_layout()
    return fig


def static_grid(bandwidths=(1.25, 12.5), batches=(16, 128), strategies=("ring", "hierarchical", "ps"), gpus=16):
    """The same knobs without sliders: rows = network bandwidth, columns = strategy,
    one line per batch size, speed-up against GPUs."""
    counts = counts_up_to(gpus)
    fig, axes = plt.subplots(len(bandwidths), len(strategies), figsize=(3.6 * len(strategies), 3.2 * len(bandwidths)),
                             sharex=True, sharey=True, squeeze=False)
    for i, bw in enumerate(bandwidths):
        for j, strategy in enumerate(strategies):
            ax = axes[i][j]
            _speedup_axes(ax, counts)
            for batch in batches:
                results = run(bw, batch, gpus, strategy, counts)
                ax.plot(counts, [r.speedup for r in results], "o-", label=f"batch {batch}/GPU")
            ax.set_title(f"{strategy}, network {bw:g} GB/s", fontsize="medium")
            if i == len(bandwidths) - 1:
                ax.set_xlabel("GPUs")
            if j == 0:
                ax.set_ylabel("speed-up (x)")
    axes[0][0].legend(loc="upper left", fontsize="small")
    fig.suptitle(f"What if (static): nodes of {GPUS_PER_NODE} V100s, ResNet-50; dashed = ideal")
    fig.tight_layout()
    return fig


def _show(fig):
    """Display a figure once in a notebook (and close it, so it is not drawn twice)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return
    if get_ipython() is not None:
        display(fig)
        plt.close(fig)


def _sliders(w):
    from IPython.display import clear_output, display

    style = {"description_width": "9em"}
    controls = {
        "bandwidth_gbs": w.FloatLogSlider(value=DEFAULTS["bandwidth_gbs"], base=10, min=-1, max=2, step=0.05,
                                          description="network GB/s", readout_format=".3g",
                                          continuous_update=False, style=style),
        "batch_per_gpu": w.SelectionSlider(options=BATCHES, value=DEFAULTS["batch_per_gpu"],
                                           description="batch per GPU", continuous_update=False, style=style),
        "gpus": w.SelectionSlider(options=GPU_COUNTS, value=DEFAULTS["gpus"], description="GPUs",
                                  continuous_update=False, style=style),
        "strategy": w.Dropdown(options=STRATEGIES, value=DEFAULTS["strategy"], description="strategy", style=style),
    }
    out = w.Output()

    def redraw(_change=None):
        fig = draw(**{k: c.value for k, c in controls.items()})   # outside `out`: errors are not swallowed
        with out:
            clear_output(wait=True)
            display(fig)
        plt.close(fig)

    redraw()
    for c in controls.values():
        c.observe(redraw, names="value")
    knobs = list(controls.values())
    panel = w.VBox([w.HBox(knobs[:2]), w.HBox(knobs[2:]), out])
    display(panel)
    return panel


def explore(static=False):
    """Sliders that re-simulate and redraw (ipywidgets), or the static grid where ipywidgets
    is not installed or static=True. Returns the widget panel or the grid's Figure."""
    if not static:
        try:
            import ipywidgets
        except ImportError:
            print("ipywidgets is not installed (pip install ipywidgets): drawing a static grid instead.")
        else:
            return _sliders(ipywidgets)
    fig = static_grid()
    _show(fig)
    return fig
