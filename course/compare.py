"""Predicted against measured: dpsim predicts every configuration from one calibration, then
mpi_impl.train runs it under mpiexec, and the two are set side by side.

    python -m course compare --profile profile.toml --ranks 1,2,3,4 --sync ring,ps \
        --compress none,1bit [--repeats 3] [--probe] [--json F] [--plot F]

The prediction comes from the profile alone (`course calibrate` measured its primitives),
made once per configuration before anything runs; no run is used to predict anything. Each
configuration then runs `repeats` times, round after round (a busy minute hits different
configurations in different rounds); a row holds the median of its runs' iteration times,
their spread, and the speed-up against the 1-rank row, predicted and measured.

How the machine maps onto dpsim (course/README.md says it in words):
  N ranks           N "GPUs" in one node, all under one PCIe switch, on the profile's
                    devices_per_node devices (dpsim.sharing: more ranks than cores share them)
  --sync            sync.strategy of the same name (`mpi`: what MPICH picks, dpsim/strategies/mpi.py)
  --sync zero*      sync.strategy zero1 | zero2 | zero3 (sharded data parallelism; no compression)
  --compress        sync.compression none | 1bit | powersgd | topk, each with the same settings in
                    both halves (compare_plan.SETTINGS: PowerSGD's rank 1, top-k's ratio 0.01);
                    PowerSGD compresses the profile's model.matrices (calibrate writes the
                    network's), and with only ZeRO syncs the compressions run over the ring
  no overlap        sync.bucket_mib = 0, sync.overlap = false: one sync after backward
  1 rank            no sync at all in dpsim (strategy none)

--probe: right before each run, a probe (course/probe.py) of its rank count times the parts
of a step as the machine is at that moment. It never changes the prediction; it says which
part moved when a row is off ("compute took 9 ms in the probe, the profile says 7").

Both halves report the same parts of an iteration (dpsim.vocabulary.BREAKDOWN), measured by
mpi_impl.train and simulated by dpsim; the measured side also has `other`, the loop's time
outside every part, which dpsim does not model (it is 0 on the predicted side).
"""
import copy
import json
import statistics
import tempfile
import time
import tomllib
from pathlib import Path

from course import compare_bands, fit, launch
from course.compare_plan import (ONEBIT_NOTE, OWN_EXCHANGE, configurations, name_of,  # noqa: F401 (re-exported)
                                 notes, probe_block, schedule, sync_keys, train_options)
from course.machine_load import Monitor
from dpsim.vocabulary import ALGORITHMS, BREAKDOWN, MIB, OTHER, SEGMENT_BYTES, SHARDED

# The algorithms both halves have: dpsim does not simulate nccl, mpi_impl does not run
# hierarchical or dataparallel (dpsim.vocabulary.ALGORITHMS says which half has what).
SYNCS = tuple(name for name in ALGORITHMS if name not in ("nccl", "hierarchical", "dataparallel")) + tuple(SHARDED)
COMPRESSIONS = ("none", "1bit", "powersgd", "topk")
PHASES = BREAKDOWN + (OTHER,)          # the measured side's parts; the predicted side's other is 0
THRESHOLD = 0.15
PROFILE_BYTES = 1 << 20           # calibrate writes about 2 KB
SIDECAR_BYTES = 16 << 20          # and a sidecar of about 200 KB


# ------------------------------------------------------------------ scenarios

def scenario_for(prof, ranks, sync, compress, batch=None):
    """The dpsim scenario (dict) for one mpi_impl configuration on the calibrated machine."""
    d = copy.deepcopy(prof)
    c, s = d.setdefault("cluster", {}), d.setdefault("sync", {})
    c.update(nodes=1, gpus_per_node=ranks, gpus_per_pcie_switch=ranks)
    s.update(strategy="none" if ranks == 1 else sync,          # the same name in both halves
             compression=compress if ranks > 1 else "none", bucket_mib=0.0, overlap=False,
             segment_mib=SEGMENT_BYTES / MIB)                  # mpi_impl pipelines its steps so
    if ranks > 1:
        s.update(sync_keys(compress))                          # the settings mpi_impl runs with too
    d.setdefault("data", {})["source"] = "synthetic"
    t = d.setdefault("training", {})
    t.update(iterations=40, warmup_iterations=1)     # enough draws of compute.jitter for a stable mean
    if batch:
        t["batch_per_gpu"] = batch
    return d


# ------------------------------------------------------------------ measuring

def measure(ranks, sync, compress, model, width, depth, batch, samples, epochs, device="cpu", timeout=600):
    """mpi_impl.train's JSON result for one configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        launch.run(ranks, "mpi_impl.train", [
            "--model", model, "--width", width, "--depth", depth, "--batch-per-rank", batch,
            "--samples", samples, "--epochs", epochs, "--sync", sync, "--compress", compress,
            *train_options(compress), "--device", device, "--json", out], timeout)
        return json.loads(out.read_text())


def measured_phases(result):
    """mpi_impl.train's per-iteration breakdown: already in dpsim's parts, plus `other`."""
    return {k: result["breakdown_s"].get(k, 0.0) for k in PHASES}


def predicted_phases(breakdown):
    return {**{k: breakdown.get(k, 0.0) for k in BREAKDOWN}, OTHER: 0.0}


def diagnose(predicted_s, measured_s, pred_phases, meas_phases, threshold=THRESHOLD, onebit=False):
    """None if the iteration times agree within threshold; else the phase that differs most,
    with predicted and measured seconds. onebit: exposed_comm and compression are judged
    together as "exposed_comm+compression", because dpsim counts all of 1-bit's memory work
    (residual updates too) as compression while mpi_impl times only encode/decode as such."""
    if abs(predicted_s - measured_s) <= threshold * measured_s:
        return None
    if onebit:
        join = "exposed_comm+compression"
        pred_phases, meas_phases = ({**p, join: p.get("exposed_comm", 0.0) + p.get("compression", 0.0)}
                                    for p in (pred_phases, meas_phases))
        phases = [k for k in PHASES if k not in ("exposed_comm", "compression")] + [join]
    else:
        phases = PHASES
    phase = max(phases, key=lambda k: abs(pred_phases.get(k, 0.0) - meas_phases.get(k, 0.0)))
    return {"phase": phase, "predicted_s": pred_phases.get(phase, 0.0), "measured_s": meas_phases.get(phase, 0.0)}


def moved_part(probe, pred_phases):
    """From a probe summary (fit.summarise) taken right before a run: each part as the probe
    saw it beside the prediction's, and the one that moved most (seconds per step)."""
    seen = {"compute": sum(probe["compute_s"]) / len(probe["compute_s"]), "update": probe["update_s"],
            "sync": next(iter(probe["sync_s"].values()), 0.0)}
    said = {"compute": pred_phases["compute"] + pred_phases["straggler_wait"], "update": pred_phases["update"],
            "sync": pred_phases["exposed_comm"] + pred_phases["compression"]}
    part = max(seen, key=lambda k: abs(seen[k] - said[k]))
    return {"probe_s": seen, "predicted_s": said, "moved": part}


# ------------------------------------------------------------------ the comparison

def median_run(runs):
    """The run whose measured iteration time is the median (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r["iteration_time_s"])
    return ordered[(len(ordered) - 1) // 2]


def compare(prof, ranks, syncs, compresses, model, width, depth, batch, samples, epochs,
            repeats=3, probe=False, progress=None, keep_raw=False, device="cpu"):
    """Predict every configuration from the profile, then run each `repeats` times (see
    schedule) and set the median measurement beside the prediction."""
    import dpsim
    net = dict(model=model, width=width, depth=depth, batch=batch, device=device)
    configs = configurations(ranks, syncs, compresses)
    predicted = {c: dpsim.simulate(scenario_for(prof, *c, batch=batch)) for c in configs}
    bands, band_method = predicted_bands(prof, configs, predicted, batch)
    items = schedule(configs, repeats, probe)
    runs, probes = {c: [] for c in configs}, {c: [] for c in configs}
    started, total, last_probe = time.perf_counter(), len(configs) * repeats, None
    with Monitor() as load:                       # the machine's load while the runs measure
        for k, item in enumerate(items):
            if item[0] == "probe":
                last_probe = launch.probe(item[1], syncs=item[2], **net)
                continue
            cfg = item[1]
            runs[cfg].append(measure(*cfg, samples=samples, epochs=epochs, **net))
            if last_probe is not None:
                probes[cfg].append(last_probe)
            if progress:
                spent, done = time.perf_counter() - started, sum(it[0] == "run" for it in items[:k + 1])
                progress(f"[{done}/{total}] {name_of(*cfg)}: {runs[cfg][-1]['iteration_time_s'] * 1e3:.2f} ms per "
                         f"iteration (predicted {predicted[cfg].iteration_time_s * 1e3:.2f}); {spent:.0f} s so far, "
                         f"about {spent / (k + 1) * (len(items) - k - 1):.0f} s to go")
    rows = [row_for(cfg, predicted[cfg], runs[cfg], probes[cfg], keep_raw) for cfg in configs]
    base = next((r for r in rows if r["ranks"] == 1), None)
    for row in rows:
        add_speedups(row, base)
        compare_bands.add_band(row, bands.get(row_key(row)))
    errors = [abs(r["error"]) for r in rows]
    speedup_errors = [abs(r["speedup_error"]) for r in rows if r["speedup_error"] is not None and r["ranks"] > 1]
    return {"rows": rows, "median_abs_error": statistics.median(errors) if errors else None,
            "worst_abs_error": max(errors) if errors else None,
            "median_abs_speedup_error": statistics.median(speedup_errors) if speedup_errors else None,
            "repeats": repeats, "probed": probe, "predicted_from": "the profile",
            "seconds": time.perf_counter() - started, "notes": notes(syncs, compresses),
            "machine_load": load.summary(), **compare_bands.summary(rows, band_method)}


def row_key(row):
    return row["ranks"], row["sync"], row["compress"]


def predicted_bands(prof, configs, predicted, batch):
    """({configuration: {quantity: {low, high}}}, how they were found) from the profile's
    samples (calibrate's rounds) or ranges by dpsim.bands; ({}, None) for a profile without."""
    from dpsim import bands, simulate
    ranged = bands.split(prof)
    if not ranged.ranges:
        return {}, None
    band = bands.propagate(ranged, lambda p: [simulate(scenario_for(p, *c, batch=batch)) for c in configs],
                           [predicted[c] for c in configs])
    return dict(zip(configs, band["bands"])), f"{band['points']} runs of each configuration: {band['method']}"


def row_for(cfg, pred, runs, probes, keep_raw=False):
    n, sync, comp = cfg
    mid = median_run(runs)
    times = [r["iteration_time_s"] for r in runs]
    row = {"ranks": n, "sync": sync, "compress": comp,
           "predicted_iteration_s": pred.iteration_time_s, "measured_iteration_s": mid["iteration_time_s"],
           "predicted_samples_per_s": pred.throughput_samples_per_s,
           "measured_samples_per_s": mid["throughput_samples_per_s"],
           "error": pred.iteration_time_s / mid["iteration_time_s"] - 1,
           "runs": [{"measured_iteration_s": t, "measured_samples_per_s": r["throughput_samples_per_s"]}
                    for t, r in zip(times, runs)],
           "spread": (max(times) - min(times)) / statistics.median(times),
           "predicted_phases_s": predicted_phases(pred.breakdown_s),
           "measured_phases_s": measured_phases(mid)}
    row["diagnosis"] = diagnose(row["predicted_iteration_s"], row["measured_iteration_s"],
                                row["predicted_phases_s"], row["measured_phases_s"], onebit=comp == "1bit" and n > 1)
    row["probe"] = None
    if probes:
        block = fit.block_for(n, comp)
        summary = fit.summarise(probes, block if block in probes[0]["blocks"] else None)
        row["probe"] = moved_part(summary, row["predicted_phases_s"])
    if keep_raw:
        row["raw"] = {"runs": runs, "probes": probes}
    return row


def add_speedups(row, base):
    """Speed-up against the 1-rank row, both sides. Measured: each run against the 1-rank run
    of its own round (the same minutes of the machine), and the median of those, so that a
    busy moment in one round does not meet a quiet one of another."""
    if base is None:
        row.update(predicted_speedup=None, measured_speedup=None, speedup_error=None)
        return
    row["predicted_speedup"] = row["predicted_samples_per_s"] / base["predicted_samples_per_s"]
    for r, one in zip(row["runs"], base["runs"]):                  # runs are kept in round order
        r["measured_speedup"] = r["measured_samples_per_s"] / one["measured_samples_per_s"]
    row["measured_speedup"] = statistics.median(r["measured_speedup"] for r in row["runs"])
    row["speedup_error"] = row["predicted_speedup"] / row["measured_speedup"] - 1


# Runs of one configuration further apart than this are too noisy to conclude from; on a quiet
# 2-core machine oversubscribed rows spread by up to 26% (course/README.md, compare 1).
SPREAD_WARNING = 0.35


def noisy_rows(result):
    return [r for r in result["rows"] if r["spread"] > SPREAD_WARNING]


def table(result):
    head = (f"{'configuration':<22} {'iteration ms':>15} {'error':>7} {'spread':>7}  {'speed-up':>15} {'error':>7}\n"
            f"{'':<22} {'pred. / meas.':>15} {'':>7} {'of runs':>7}  {'pred. / meas.':>15} {'':>7}")
    lines = [head]
    for r in result["rows"]:
        ms = f"{r['predicted_iteration_s'] * 1e3:.2f} / {r['measured_iteration_s'] * 1e3:.2f}"
        sp = (f"{r['predicted_speedup']:.2f} / {r['measured_speedup']:.2f}" if r.get("measured_speedup") else "-")
        sp_err = f"{100 * r['speedup_error']:+6.1f}%" if r.get("speedup_error") is not None and r["ranks"] > 1 else ""
        lines.append(f"{name_of(r['ranks'], r['sync'], r['compress']):<22} {ms:>15} {100 * r['error']:+6.1f}% "
                     f"{100 * r['spread']:6.0f}%  {sp:>15} {sp_err:>7}")
    runs = result.get("repeats", 1)
    lines.append(f"median |error| of the iteration time {100 * result['median_abs_error']:.1f}% "
                 f"(worst {100 * result['worst_abs_error']:.1f}%) over {len(result['rows'])} configurations"
                 + (f"; of the speed-up {100 * result['median_abs_speedup_error']:.1f}%"
                    if result.get("median_abs_speedup_error") is not None else ""))
    lines.append(f"  predicted from {result.get('predicted_from', 'the profile')}; measured: the median of "
                 f"{runs} run{'s' if runs > 1 else ''} each; spread: slowest minus fastest run, of the median")
    lines += [f"  {note}" for note in result.get("notes", [])]
    noisy = noisy_rows(result)
    if noisy:
        lines.append(f"  WARNING: {len(noisy)} of {len(result['rows'])} configurations ran more than "
                     f"{SPREAD_WARNING:.0%} apart from run to run (" + ", ".join(
                         name_of(r["ranks"], r["sync"], r["compress"]) for r in noisy[:4])
                     + (", ..." if len(noisy) > 4 else "") + "): an error smaller than the spread says "
                     "nothing there. Another program running? Close it and compare again.")
    lines += compare_bands.table(result, name_of)
    for r in result["rows"]:
        d, name = r["diagnosis"], name_of(r["ranks"], r["sync"], r["compress"])
        if d:
            lines.append(f"  {name}: off by {100 * r['error']:+.0f}%; phase that differs most: {d['phase']} "
                         f"(predicted {d['predicted_s'] * 1e3:.2f} ms, measured {d['measured_s'] * 1e3:.2f} ms "
                         f"per iteration)")
            if r.get("probe"):
                p = r["probe"]
                lines.append(f"    probe right before the run: {p['moved']} took {p['probe_s'][p['moved']] * 1e3:.2f} ms "
                             f"a step, the profile says {p['predicted_s'][p['moved']] * 1e3:.2f}")
    return "\n".join(lines)


def plot(result, path):
    """A PNG at `path`. Left: predicted against measured iteration time. Right: speed-up against
    ranks, the prediction as a line per sync, the measured median as a point with every run's
    range, and the ideal y = x (course/compare_plot.py draws them). Written under a temporary
    name, renamed when complete (dpsim.files.writing); the format follows the extension."""
    import matplotlib

    from course import compare_plot                  # matplotlib only when a plot is asked for
    from dpsim.files import writing
    fmt = Path(path).suffix[1:].lower() or "png"
    with writing(path, "wb", "--plot") as f, matplotlib.rc_context({"savefig.format": fmt}):
        compare_plot.draw(result, f, noisy_rows(result), SPREAD_WARNING)


def profile_problem(path, net):
    """One line saying what is wrong with the profile at `path` for the model `net` ({model,
    width, depth}), or None: it reads as TOML, dpsim accepts it, and it was calibrated for this
    model (by its sidecar's record, or else by its parameter count)."""
    from dpsim import load_scenario
    from dpsim.errors import ScenarioError
    from dpsim.files import printable
    if "\x00" in str(path):
        return f"--profile {printable(path, 120)}: contains a NUL byte"
    if not Path(path).exists():
        return f"--profile {printable(path, 120)}: no such file"
    try:
        prof, measured = load_profile(path)
    except ScenarioError as error:
        return f"--profile: {error}"
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError, RecursionError) as error:
        return f"--profile {printable(path, 120)}: not a profile written by calibrate ({str(error).splitlines()[0]})"
    path = printable(path, 120)
    if not isinstance(prof, dict) or measured is not None and not isinstance(measured, dict):
        return f"--profile {path}: not a profile written by calibrate (its sidecar is not a JSON object)"
    try:
        load_scenario(scenario_for(prof, 2, "ring", "none"))
    except ScenarioError as error:
        return f"--profile {path}: {error}"
    if measured:
        had = {k: measured.get("model", {}).get(k) for k in ("name", "width", "depth")}
        want = {"name": net["model"], "width": net["width"], "depth": net["depth"]}
        if had != want:
            return (f"--profile {path} was calibrated for {had}, not {want}; run calibrate with the "
                    f"same --model/--width/--depth")
        return None
    too_big = model_too_big(**net)
    if too_big:
        return too_big
    params, has = model_params(**net), prof.get("model", {}).get("params")
    if has != params:
        return (f"--profile {path} describes a model of {has} parameters; "
                f"--model {net['model']} --width {net['width']} --depth {net['depth']} has {params:,} "
                f"(its sidecar {Path(path).with_suffix('.measured.json').name} is missing)")
    return None


def powersgd_problem(path, compresses):
    """One line if --compress powersgd is asked of a profile whose model has no weight matrices
    (model.matrices, which calibrate writes; PowerSGD compresses them), else None."""
    from dpsim.files import printable
    if "powersgd" not in compresses:
        return None
    prof, _ = load_profile(path)                  # read already by profile_problem
    if prof.get("model", {}).get("matrices"):
        return None
    return (f"--compress powersgd: --profile {printable(path, 120)} has no model.matrices (the weight shapes "
            f"PowerSGD compresses); run python -m course calibrate again to write them, or leave out powersgd")


def model_too_big(model, width, depth):
    """One line if mpi_impl.train would refuse this network as too large to hold (its own limit,
    mpi_impl.train_options.MODEL_NUMBERS_LIMIT), found by arithmetic before anything is built."""
    from types import SimpleNamespace
    from mpi_impl.train_options import MODEL_NUMBERS_LIMIT, model_numbers
    numbers = model_numbers(SimpleNamespace(model=model, width=width, depth=depth, batch_per_rank=1), (1, 8, 8), 10)
    if numbers > MODEL_NUMBERS_LIMIT:
        return (f"--model {model} --width {width} --depth {depth}: about {numbers:,} numbers, above "
                f"mpi_impl.train's limit {MODEL_NUMBERS_LIMIT:,}; make it smaller")
    return None


def model_params(model, width, depth):
    """Parameters of mpi_impl's network as compare runs it (synthetic data)."""
    from mpi_impl import data, nets
    train, _ = data.load("synthetic", samples=64)
    return nets.build(model, train.shape, train.classes, width, depth).num_params


def load_profile(path):
    """The profile TOML (a dpsim scenario fragment) and its sidecar's measurements, if any: each
    a regular file of bounded size (dpsim.files.read_regular; ScenarioError otherwise)."""
    from dpsim.files import read_regular
    prof = tomllib.loads(read_regular(path, "profile", PROFILE_BYTES).decode("utf-8"))
    side = Path(path).with_suffix(".measured.json")
    if not side.exists() and not side.is_symlink():
        return prof, None
    return prof, json.loads(read_regular(side, "profile sidecar", SIDECAR_BYTES).decode("utf-8"))
