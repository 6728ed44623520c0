"""The figure of `python -m course compare --plot F`: two panels from compare's result.

  left   predicted against measured iteration time per configuration: y = x, a 10% band,
         bars spanning every run (across) and the predicted band (up and down, where the
         profile has ranges), a colour per algorithm (1-bit is one), a marker per rank count
  right  speed-up against ranks: the predicted line per algorithm with its band shaded, the
         measured median with every run's range, the ideal line

Colour means the same in both panels: the algorithm (`colours`); one rank, which syncs nothing,
is black.

compare.plot draws it; this module only draws (matplotlib, imported when a figure is asked for).
"""
MARKERS = {1: "s", 2: "o", 3: "D", 4: "^", 8: "v"}      # per rank count
ONE_RANK = "k"


def label_of(row):
    """The algorithm a row shows: its sync, its sync and compression ("ring+powersgd"), or the
    compression alone where it has its own exchange ("1bit", "topk")."""
    from course.compare_plan import OWN_EXCHANGE
    if row["compress"] in OWN_EXCHANGE:
        return row["compress"]
    return row["sync"] + (f"+{row['compress']}" if row["compress"] != "none" else "")


def colours(rows):
    """{algorithm: colour}, in order of first appearance among the rows with more than one rank."""
    labels = list(dict.fromkeys(label_of(r) for r in rows if r["ranks"] > 1))
    return {label: f"C{i}" for i, label in enumerate(labels)}


def draw(result, path, noisy, spread_warning):
    """Both panels into the PNG at `path`; `noisy`: the rows whose runs spread more than
    `spread_warning`, which turn the title into a warning."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, sp) = plt.subplots(1, 2, figsize=(11.5, 5))
    iteration_panel(ax, result)
    speedup_panel(sp, result)
    fig.suptitle("dpsim (predicted from the calibration) against mpi_impl (measured)"
                 + (f"\nWARNING: {len(noisy)} configurations' runs spread more than {spread_warning:.0%}: "
                    "errors within the noise" if noisy else ""), fontsize=11, color="C3" if noisy else "k")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def iteration_panel(ax, result):
    """Predicted against measured iteration time (ms), every configuration."""
    rows = result["rows"]
    top = 1.1 * max(max([r["predicted_iteration_s"], r.get("predicted_band_s", {}).get("high", 0.0)]
                        + [x["measured_iteration_s"] for x in r["runs"]]) for r in rows) * 1e3
    ax.plot([0, top], [0, top], "k--", lw=1, label="y = x (perfect prediction)")
    ax.fill_between([0, top], [0, 0.9 * top], [0, 1.1 * top], color="0.9", label="within 10%")
    colour = colours(rows)
    for r in rows:
        style = dict(marker=MARKERS.get(r["ranks"], "P"),
                     color=ONE_RANK if r["ranks"] == 1 else colour[label_of(r)])
        times = [x["measured_iteration_s"] * 1e3 for x in r["runs"]]
        ax.errorbar(r["measured_iteration_s"] * 1e3, r["predicted_iteration_s"] * 1e3,
                    xerr=[[r["measured_iteration_s"] * 1e3 - min(times)], [max(times) - r["measured_iteration_s"] * 1e3]],
                    yerr=band_bars(r, "predicted_band_s", "predicted_iteration_s", 1e3),
                    ls="none", ms=6, capsize=2, **style)
    ax.set_xlim(0, top), ax.set_ylim(0, top)
    ax.set_xlabel("measured iteration time (ms; bars: every run)")
    ax.set_ylabel("predicted iteration time (ms" + ("; bars: the band)" if banded(rows) else ")"))
    ax.set_title(f"iteration time: median error {100 * result['median_abs_error']:.1f}%", fontsize=10)
    ax.legend(handles=ax.get_legend_handles_labels()[0] + legend_keys(rows), fontsize=7, loc="upper left")


def banded(rows):
    return any("predicted_band_s" in r for r in rows)


def band_bars(row, band_key, value_key, scale=1.0):
    """errorbar's [[below], [above]] for a row's predicted band; None where the row has none."""
    band = row.get(band_key)
    if not band:
        return None
    value = row[value_key]
    return [[(value - band["low"]) * scale], [(band["high"] - value) * scale]]


def legend_keys(rows):
    """Legend entries: a colour per algorithm present, a marker per rank count present."""
    from matplotlib.lines import Line2D
    keys = [Line2D([], [], color=c, marker="o", ls="none", label=label) for label, c in colours(rows).items()]
    if any(r["ranks"] == 1 for r in rows):
        keys.append(Line2D([], [], color=ONE_RANK, marker=MARKERS[1], ls="none", label="1 rank (no sync)"))
    return keys + [Line2D([], [], color="0.5", marker=m, ls="none", label=f"{n} ranks")
                   for n, m in MARKERS.items() if n > 1 and any(r["ranks"] == n for r in rows)]


def speedup_series(rows):
    """{algorithm (or "1bit"): its rows with a measured speed-up, the 1-rank row first, by ranks}."""
    series = {}
    for r in rows:
        if r.get("measured_speedup") is None or r["ranks"] == 1:    # the 1-rank row starts every line
            continue
        series.setdefault(label_of(r), []).append(r)
    base = [r for r in rows if r["ranks"] == 1]
    return {label: sorted(base + [r for r in rs if r["ranks"] > 1], key=lambda r: r["ranks"])
            for label, rs in series.items()}


def shade_band(sp, rs, colour):
    """The predicted speed-up's band along one algorithm's line, in its colour (the 1-rank row: 1)."""
    spans = [r.get("predicted_speedup_band") or ({"low": 1.0, "high": 1.0} if r["ranks"] == 1 else None) for r in rs]
    if any(s is None for s in spans) or not any(r.get("predicted_speedup_band") for r in rs):
        return
    sp.fill_between([r["ranks"] for r in rs], [s["low"] for s in spans], [s["high"] for s in spans],
                    color=colour, alpha=0.2, lw=0)


def speedup_panel(sp, result):
    """Speed-up against ranks: predicted lines, measured medians with every run's range."""
    rows = result["rows"]
    ranks = sorted({r["ranks"] for r in rows})
    sp.plot(ranks, ranks, "--", color="grey", lw=1, label="ideal (speed-up = ranks)")
    series = speedup_series(rows)
    colour_of = colours(rows)
    for i, (label, rs) in enumerate(series.items()):
        colour = colour_of[label]
        sp.plot([r["ranks"] for r in rs], [r["predicted_speedup"] for r in rs], "-", color=colour,
                label=f"{label}: predicted")
        shade_band(sp, rs, colour)
        for r in rs:
            each = [x["measured_speedup"] for x in r["runs"]]
            sp.errorbar(r["ranks"] + 0.04 * (i - len(series) / 2), r["measured_speedup"],
                        yerr=[[r["measured_speedup"] - min(each)], [max(each) - r["measured_speedup"]]],
                        fmt="o", color=colour, ms=5, capsize=2)
    sp.plot([], [], "o", color="k", label="measured (median; bars: every run)")
    if banded(rows):
        sp.fill_between([], [], [], color="0.5", alpha=0.2, label="predicted band (the profile's ranges)")
    sp.set_xticks(ranks)
    sp.set_xlabel("ranks")
    sp.set_ylabel("speed-up over one rank (x)")
    err = result.get("median_abs_speedup_error")
    sp.set_title("speed-up" + (f": median error {100 * err:.1f}%" if err is not None else ""), fontsize=10)
    sp.grid(True, alpha=0.3)
    sp.legend(fontsize=7, loc="upper left")
