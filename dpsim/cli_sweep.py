"""`dpsim sweep`: a scenario at several GPU counts, for every combination of varied keys.

    dpsim sweep d2l-ps-vs-ring --gpus 1,2,4,8
    dpsim sweep d2l-ps-vs-ring --gpus 1,2,4,8 --vary sync.strategy=ps,ring --vary sync.compression=none,1bit
    dpsim sweep d2l-ps-vs-ring --gpus 1,2,4,8 --vary sync.strategy=ps,ring --jobs 0 --plot scaling.png
    mpiexec -n 5 python -m mpi4py.futures -m dpsim sweep d2l-ps-vs-ring --gpus 1,2,4,8 --vary ...

This file is the command: it reads the flags and prints. The simulations run in the sweep
library, dpsim.sweeps (dpsim.sweep_grid()).
"""
import json
import sys
import time

from . import bands, config, limits
from .errors import ScenarioError
from .files import FIGURES, check_output_path, printable
from .report import describe
from .strategies import onebit
from .sweeps import cores, sweep_grid


def parse_gpus(text: str) -> list[int]:
    if len(text) > 20 * limits.SWEEP_RUNS:
        raise ScenarioError("--gpus", f"{len(text):,} characters of GPU counts; a sweep has at most "
                                      f"{limits.SWEEP_RUNS:,} rows")
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ScenarioError("--gpus", f"expected comma-separated integers like 1,2,4,8, got '{printable(text, 80)}'")
    if not counts:
        raise ScenarioError("--gpus", "a sweep needs at least one GPU count, e.g. 1,2,4,8")
    return counts


def split_values(text: str) -> list[str]:
    """'ps,ring' -> ['ps', 'ring'], leaving alone the commas inside [...], {...} and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return [p.strip() for p in parts + [text[start:]]]


def parse_vary(pairs, fixed: dict) -> dict:
    """--vary KEY=V1,V2,... (repeatable) -> {KEY: [V1, V2, ...]}, values parsed as --set's are."""
    out = {}
    for pair in pairs or []:
        key, eq, values = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ScenarioError("--vary", f"expected section.key=value1,value2,..., got '{printable(pair, 80)}'")
        if key in out or key in fixed:
            raise ScenarioError("--vary", f"{key} is given twice (by --vary or --set); give each key once")
        texts = split_values(values)
        if "" in texts:
            raise ScenarioError("--vary", f"an empty value in '{printable(pair, 80)}'; expected e.g. {key}=a,b")
        if len(texts) > limits.SWEEP_RUNS:
            raise ScenarioError(key, f"{len(texts):,} values; a sweep has at most {limits.SWEEP_RUNS:,} rows")
        out[key] = [config.parse_value(t, key) for t in texts]
    return out


# ------------------------------------------------------------------ printing

def show(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def print_grid(rows, varied, out=None):
    """One table: a column per varied key, then the GPU count and the results."""
    out = out or sys.stdout
    widths = [max(len(k), *(len(show(s[k])) for s, _ in rows)) for k in varied]
    keys = "".join(f"{k:<{w}}  " for k, w in zip(varied, widths))
    strong = any(r.scenario["training"]["global_batch"] for _, r in rows)     # strong scaling: the batch moves
    print(f"{keys}{'GPUs':>5} {'nodes':>5}{' batch/GPU' if strong else ''} {'iteration ms':>13} {'samples/s':>12} "
          f"{'speed-up':>9} {'efficiency':>11} {'exposed comm ms':>16}", file=out)
    for settings, r in rows:
        values = "".join(f"{show(settings[k]):<{w}}  " for k, w in zip(varied, widths))
        batch = f" {r.scenario['training']['batch_per_gpu']:9d}" if strong else ""
        print(f"{values}{r.gpus:5d} {r.scenario['cluster']['nodes']:5d}{batch} {r.iteration_time_s * 1e3:13.3f} "
              f"{r.throughput_samples_per_s:12,.0f} {r.speedup:9.2f} {r.scaling_efficiency:11.0%} "
              f"{r.breakdown_s['exposed_comm'] * 1e3:16.3f}", file=out)
    for note in coinciding(rows, varied):
        print(f"note: {note}", file=out)


def coinciding(rows, varied):
    """One line per group of rows (same GPU count, different settings) whose results are the
    same, and why where we know (strategies.onebit.OWN_EXCHANGE)."""
    groups = {}
    for settings, r in rows:
        key = (r.gpus, round(r.iteration_time_s, 12), round(r.bytes_sent_per_gpu))
        groups.setdefault(key, []).append((settings, r))
    notes = []
    for (gpus, _, _), same in groups.items():
        if len(same) < 2 or gpus == 1:
            continue
        names = "; ".join(", ".join(f"{k}={show(s[k])}" for k in varied) for s, _ in same)
        why = (f" ({onebit.OWN_EXCHANGE})"
               if all(r.scenario["sync"]["compression"] == "1bit" for _, r in same) else "")
        notes.append(f"on {gpus} GPUs these give the same result: {names}{why}")
    return notes


OPEN_LINE = []          # the stream of a progress bar whose line is not finished yet


def end_progress_line():
    """Finish the line a progress bar left open (before an interrupted command's last line)."""
    while OPEN_LINE:
        OPEN_LINE.pop().write("\n")


def progress_bar(out=None, width=30, unit="simulations"):
    """A progress(done, total) callback that redraws one line: bar, count, elapsed time, ETA."""
    out = out or sys.stderr
    start = last = time.monotonic()
    OPEN_LINE[:] = [out]

    def draw(done, total):
        nonlocal last
        now = time.monotonic()
        if 0 < done < total and now - last < 0.1:          # at most ten redraws a second
            return
        last, elapsed = now, now - start
        eta = f"{elapsed / done * (total - done):.1f} s" if done else "?"
        filled = round(width * done / total) if total else width
        out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {unit}, "
                  f"{elapsed:.1f} s elapsed, ETA {eta} ")
        if done == total:
            out.write("\n")
            OPEN_LINE.clear()
        out.flush()
    return draw


def plot_series(rows, varied, name) -> dict:
    """Label -> Results in GPU order, one line per combination of the varied keys."""
    short = [k.rpartition(".")[2] for k in varied]
    names = short if len(set(short)) == len(short) else list(varied)
    series = {}
    for settings, r in rows:
        label = ", ".join(f"{n}={show(settings[k])}" for n, k in zip(names, varied)) or name
        series.setdefault(label, []).append(r)
    return {label: sorted(results, key=lambda r: r.gpus) for label, results in series.items()}


# ------------------------------------------------------------------ the command

def cmd_sweep(args):
    fixed = config.parse_sets(args.set)
    varied = parse_vary(args.vary, fixed)
    counts = parse_gpus(args.gpus)
    if args.plot:
        check_output_path(args.plot, "--plot", FIGURES)
    sc, ranged = config.load_ranged(args.scenario, fixed)
    if args.jobs > cores():
        print(f"dpsim: note: --jobs {args.jobs} is more than this machine's {cores()} cores; "
              f"using at most {cores()} processes", file=sys.stderr)
    show_progress = args.progress or sys.stderr.isatty()
    rows = sweep_grid(sc, counts, varied, jobs=args.jobs,
                      progress=progress_bar() if show_progress else None)
    ranged, band = sweep_band(ranged, counts, varied, rows, args.jobs)
    if args.plot:
        from . import plot                       # matplotlib only when a plot is asked for
        title = f"{sc.name}: speed-up against GPUs"
        if band:
            plot.scaling_bands(plot_series(rows, varied, sc.name),
                               {id(r): b for (_, r), b in zip(rows, band["bands"])}, args.plot, title)
        else:
            plot.scaling(plot_series(rows, varied, sc.name), args.plot, title)
        # stderr: with --json, stdout carries only the rows
        print(f"dpsim: speed-up against GPUs plotted in {printable(args.plot)}", file=sys.stderr)
    if args.json:
        json.dump([{"settings": settings, **r.to_dict(), **bands.json_keys(ranged, band, i)}
                   for i, (settings, r) in enumerate(rows)], sys.stdout, indent=2, allow_nan=False)
        print()
        return
    print(describe(sc))
    if varied:
        print("varied: " + "; ".join(f"{k} = {', '.join(show(v) for v in vs)}" for k, vs in varied.items()))
    print_grid(rows, varied)
    if band:
        print(f"{bands.describe(ranged, band)}:")
        label = lambda settings, r: ", ".join([*(f"{k}={show(v)}" for k, v in settings.items()), f"{r.gpus} GPUs"])
        print("\n".join(bands.sweep_lines(rows, band, label)))


def sweep_band(ranged, counts, varied, rows, jobs):
    """(dpsim.bands.Ranged, the band of every row) where the scenario has ranges that --vary does
    not replace; (None, None) where not. Each point of the ranges runs the whole sweep again."""
    ranged = ranged.without(varied)
    if not ranged.ranges:
        return None, None
    evaluate = lambda d: [r for _, r in sweep_grid(config.load_scenario(d), counts, varied, jobs=jobs)]
    return ranged, bands.propagate(ranged, evaluate, [r for _, r in rows])


def jobs(text):
    """--jobs: a whole number from 0 to limits.JOBS."""
    import argparse
    try:
        value = int(text) if len(text) < 20 else -1
    except ValueError:
        value = -1
    if not 0 <= value <= limits.JOBS:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 (one process per core) to "
                                         f"{limits.JOBS:,}, got '{printable(text, 40)}'")
    return value


def add_arguments(sw):
    sw.add_argument("--gpus", required=True, help="comma-separated GPU counts, e.g. 1,2,4,8")
    sw.add_argument("--vary", action="append", metavar="KEY=V1,V2,...",
                    help="run every combination of these values, e.g. --vary sync.strategy=ps,ring (repeatable)")
    sw.add_argument("--jobs", type=jobs, default=1, metavar="N",
                    help="simulate in N local processes, at most one per core; 0 = one per core "
                         "(default 1: no extra processes). "
                         "Under `mpiexec -n N python -m mpi4py.futures -m dpsim` the MPI workers are used instead")
    sw.add_argument("--progress", action="store_true",
                    help="draw a progress bar on stderr even when it is not a terminal")
    sw.add_argument("--plot", metavar="FILE", help="save speed-up against GPUs, one line per combination")
    sw.add_argument("--json", action="store_true", help="print the rows as JSON: settings and result")
