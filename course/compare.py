"""Predicted against measured: run mpi_impl.train under mpiexec and dpsim on the calibration.

    python -m course compare --ranks 1,2,4 --sync ring,ps --compress none,1bit \\
        [--profile profile.toml] [--repeats 3] [--no-probe] [--json F] [--plot F]

The machine is shared and its speed moves from second to second, so every configuration
runs `repeats` times, round after round, and each run is predicted from two probes
(course/probe.py) of its own rank count: one right before it and one right after it, each
a separate mpiexec job that times the parts of a training step but never trains. dpsim
gets the probes' figures (course/fit.py: apply_probe) and composes the iteration with its
own model; the measured run is never used to predict itself. A row shows the run with the
median error; `spread` how far apart the runs' measured times were.

How the CPU machine maps onto dpsim (course/README.md says it in words):
  N ranks           N "GPUs" in one node, all under one PCIe switch; intra and host_link are
                    the measured link (shared memory)
  --sync            sync.strategy of the same name (`mpi`: what MPICH picks, dpsim/strategies/mpi.py)
  --compress        sync.compression none | 1bit
  no overlap        sync.bucket_mib = 0, sync.overlap = false: one sync after backward
  1 rank            no sync at all in dpsim (strategy none)
  probed parts      compute speed (gpu_speed), update (mem_bw_gbs), the division by N and
                    batch taking (overhead_ms), the link: bandwidth from the ping-pong,
                    latency fitted to the probed ring sync, kernel_launch_us fitted to the
                    probed 1-bit sync. The other algorithms are never probed: dpsim
                    predicts them from that link.
  --no-probe        the same from calibrate's probe of N ranks (the profile's sidecar); for a
                    rank count calibrate did not probe, N > devices runs each GPU at
                    devices/N speed (and memory-bound kernels likewise)

Both halves report the same parts of an iteration (dpsim.vocabulary.BREAKDOWN), measured by
mpi_impl.train and simulated by dpsim; the measured side also has `other`, the loop's time
outside every part, which dpsim does not model (it is 0 on the predicted side).
"""
import copy
import json
import statistics
import time
import tempfile
import tomllib
from pathlib import Path

from course import fit, launch
from dpsim.vocabulary import BREAKDOWN, OTHER

PHASES = BREAKDOWN + (OTHER,)          # the measured side's parts; the predicted side's other is 0
THRESHOLD = 0.15


# ------------------------------------------------------------------ scenarios

def scenario_for(prof, ranks, sync, compress, launch_us=None, measured=None, batch=None, probe=None):
    """The dpsim scenario (dict) for one mpi_impl configuration on the calibrated machine.

    probe: a probe summary for this rank count (fit.summarise); without one, calibrate's
    probe of this rank count from `measured` (the sidecar JSON), if it made one."""
    d = copy.deepcopy(prof)
    c, comp, s = d.setdefault("cluster", {}), d.setdefault("compute", {}), d.setdefault("sync", {})
    c.update(nodes=1, gpus_per_node=ranks, gpus_per_pcie_switch=ranks)
    s.update(strategy="none" if ranks == 1 else sync,          # the same name in both halves
             compression=compress if ranks > 1 else "none", bucket_mib=0.0, overlap=False)
    d.setdefault("data", {})["source"] = "synthetic"
    t = d.setdefault("training", {})
    t.update(iterations=4, warmup_iterations=1)
    if batch:
        t["batch_per_gpu"] = batch
    if launch_us is not None:
        comp["kernel_launch_us"] = launch_us
    probes = (measured or {}).get("probes", {})
    if probe is None and "blocks" in probes.get(str(ranks), {}):     # (older sidecars: no probes)
        probe = fit.summarise([probes[str(ranks)]], fit.block_for(ranks, s["compression"]))
    if probe is not None:
        return fit.apply_probe(d, probe, s["compression"])
    share = ranks / (measured or {}).get("devices", c.get("cpu_cores", ranks))
    if share > 1:                                  # not probed: devices shared evenly, nothing else
        c["gpu_speed"] = [1 / share] * ranks
        c["gpu"] = dict(c["gpu"], mem_bw_gbs=c["gpu"]["mem_bw_gbs"] / share)
        comp["kernel_launch_us"] = comp.get("kernel_launch_us", 5.0) * share
    return d


fit_launch = fit.fit_launch


# ------------------------------------------------------------------ measuring

def measure(ranks, sync, compress, model, width, depth, batch, samples, epochs, device="cpu", timeout=600):
    """mpi_impl.train's JSON result for one configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        launch.run(ranks, "mpi_impl.train", [
            "--model", model, "--width", width, "--depth", depth, "--batch-per-rank", batch,
            "--samples", samples, "--epochs", epochs, "--sync", sync, "--compress", compress,
            "--device", device, "--json", out], timeout)
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


# ------------------------------------------------------------------ the comparison

ONEBIT_NOTE = ("1bit: mpi_impl's 1-bit SGD has its own exchange (all-to-all, then all-gather) "
               "whatever --sync says, and so does dpsim's: one run per rank count, not one per sync")


def configurations(ranks, syncs, compresses):
    """(ranks, sync, compress); one rank has nothing to sync, so it appears once; 1-bit
    ignores the sync (ONEBIT_NOTE), so it appears once per rank count, under the first."""
    out = []
    for n in ranks:
        if n == 1:
            out.append((1, "ring", "none"))
            continue
        out += [(n, s, c) for s in syncs for c in compresses if c != "1bit" or s == syncs[0]]
    return out


def probe_syncs(ranks, onebit):
    """What a probe times: the ring (for the link) and, where a run uses it, the 1-bit sync."""
    if ranks == 1:
        return []
    return ["ring", "1bit"] if onebit else ["ring"]


def name_of(ranks, sync, compress):
    if ranks == 1:
        return "1 rank (no sync)"
    return f"{ranks} ranks 1bit" if compress == "1bit" else f"{ranks} ranks {sync} {compress}"


def schedule(configs, repeats, probe=True):
    """The order of the work: round after round (a busy minute then hits different
    configurations in different rounds); in a round, the configurations of one rank count
    in a row with a probe before, between and after them, so that every run has a probe
    of its rank count right before and right after it. Items: ("probe", ranks, syncs) or
    ("run", (ranks, sync, compress))."""
    items = []
    for _ in range(repeats):
        for n in dict.fromkeys(c[0] for c in configs):
            group = [c for c in configs if c[0] == n]
            syncs = probe_syncs(n, any(c[2] == "1bit" for c in group))
            for c in group:
                items += [("probe", n, syncs)] * probe + [("run", c)]
            items += [("probe", n, syncs)] * probe
    return items


def median_run(runs):
    """The run whose error is the median (the lower one of the middle two for an even count)."""
    ordered = sorted(runs, key=lambda r: r["error"])
    return ordered[(len(ordered) - 1) // 2]


def compare(prof, measured, ranks, syncs, compresses, model, width, depth, batch, samples, epochs,
            repeats=3, probe=True, progress=None, keep_raw=False, device="cpu"):
    """Run every configuration `repeats` times (see schedule), predict each run from the probes
    right before and after it (probe=False: from the profile alone), and report per
    configuration the run with the median error."""
    import dpsim
    net = dict(model=model, width=width, depth=depth, batch=batch, device=device)
    configs = configurations(ranks, syncs, compresses)
    items = schedule(configs, repeats, probe)
    done, started, total = [], time.perf_counter(), len(configs) * repeats
    for k, item in enumerate(items):
        if item[0] == "probe":
            done.append(launch.probe(item[1], syncs=item[2], **net))
            continue
        cfg = item[1]
        done.append(measure(*cfg, samples=samples, epochs=epochs, **net))
        if progress:
            spent, ran = time.perf_counter() - started, sum(it[0] == "run" for it in items[:k + 1])
            progress(f"[{ran}/{total}] {name_of(*cfg)}: {done[-1]['iteration_time_s'] * 1e3:.2f} ms per "
                     f"iteration; {spent:.0f} s so far, about {spent / (k + 1) * (len(items) - k - 1):.0f} s to go")
    runs = {c: [] for c in configs}
    for k, item in enumerate(items):
        if item[0] != "run":
            continue
        n, sync, comp = cfg = item[1]
        probes = [done[k - 1], done[k + 1]] if probe else []
        summary = fit.summarise(probes, fit.block_for(n, comp)) if probes else None
        pred = dpsim.simulate(scenario_for(prof, n, sync, comp, measured=measured, batch=batch, probe=summary))
        meas = done[k]
        run = {"predicted": pred, "measured": meas, "probe": summary,
               "error": pred.iteration_time_s / meas["iteration_time_s"] - 1}
        if keep_raw:
            run["raw_probes"] = probes
        runs[cfg].append(run)
    rows, base = [], {}
    for cfg in configs:
        n, sync, comp = cfg
        mid = median_run(runs[cfg])
        pred, meas = mid["predicted"], mid["measured"]
        per_run = [r["measured"]["iteration_time_s"] for r in runs[cfg]]
        row = {"ranks": n, "sync": sync, "compress": comp,
               "predicted_iteration_s": pred.iteration_time_s,
               "measured_iteration_s": meas["iteration_time_s"],
               "predicted_samples_per_s": pred.throughput_samples_per_s,
               "measured_samples_per_s": meas["throughput_samples_per_s"],
               "error": mid["error"],
               "runs": [{"predicted_iteration_s": r["predicted"].iteration_time_s,
                         "measured_iteration_s": r["measured"]["iteration_time_s"], "error": r["error"]}
                        for r in runs[cfg]],
               "spread": (max(per_run) - min(per_run)) / statistics.median(per_run),
               "predicted_from": "probes right before and after the run" if probe else "the profile",
               "probe": mid["probe"],
               "predicted_phases_s": predicted_phases(pred.breakdown_s),
               "measured_phases_s": measured_phases(meas)}
        if keep_raw:
            row["raw"] = [{"probes": r.get("raw_probes"), "run": r["measured"]} for r in runs[cfg]]
        row["diagnosis"] = diagnose(row["predicted_iteration_s"], row["measured_iteration_s"],
                                    row["predicted_phases_s"], row["measured_phases_s"],
                                    onebit=comp == "1bit" and n > 1)
        if n == 1:
            base = {"predicted": row["predicted_samples_per_s"], "measured": row["measured_samples_per_s"]}
        rows.append(row)
    for row in rows:
        for side in ("predicted", "measured"):
            row[f"{side}_speedup"] = row[f"{side}_samples_per_s"] / base[side] if base else None
    errors = [abs(r["error"]) for r in rows]
    notes = [ONEBIT_NOTE] if len(syncs) > 1 and "1bit" in compresses else []
    return {"rows": rows, "median_abs_error": statistics.median(errors) if errors else None,
            "repeats": repeats, "probed": probe, "seconds": time.perf_counter() - started, "notes": notes}


def table(result):
    head = (f"{'configuration':<22} {'predicted':>10} {'measured':>10}  {'speed-up':>8} {'speed-up':>8}"
            f"  {'iteration ms':>15} {'error':>7} {'spread':>7}\n{'':<22} {'samples/s':>10} {'samples/s':>10}  "
            f"{'pred.':>8} {'meas.':>8}  {'pred./meas.':>15} {'':>7} {'of runs':>7}")
    lines = [head]
    for r in result["rows"]:
        sp = lambda v: f"{v:8.2f}" if v is not None else f"{'-':>8}"
        ms = f"{r['predicted_iteration_s'] * 1e3:.2f}/{r['measured_iteration_s'] * 1e3:.2f}"
        lines.append(f"{name_of(r['ranks'], r['sync'], r['compress']):<22} {r['predicted_samples_per_s']:10,.0f} "
                     f"{r['measured_samples_per_s']:10,.0f}  {sp(r['predicted_speedup'])} {sp(r['measured_speedup'])}  "
                     f"{ms:>15} {100 * r['error']:+6.1f}% {100 * r.get('spread', 0):6.0f}%")
    runs = result.get("repeats", 1)
    lines.append(f"median absolute error of the iteration time: {100 * result['median_abs_error']:.1f}% "
                 f"over {len(result['rows'])} configurations"
                 f" ({runs} run{'s' if runs > 1 else ''} each, predicted from "
                 f"{'probes right before and after each run' if result.get('probed') else 'the profile'}; "
                 f"each row shows the run with the median error; spread: slowest minus fastest run, "
                 f"of the median)")
    lines += [f"  {note}" for note in result.get("notes", [])]
    for r in result["rows"]:
        d = r["diagnosis"]
        if d:
            lines.append(f"  {name_of(r['ranks'], r['sync'], r['compress'])}: off by {100 * r['error']:+.0f}%; "
                         f"phase that differs most: {d['phase']} (predicted {d['predicted_s'] * 1e3:.2f} ms, "
                         f"measured {d['measured_s'] * 1e3:.2f} ms per iteration)")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 5))
    rows = result["rows"]
    top = 1.1 * max(max(x["predicted_iteration_s"], x["measured_iteration_s"])
                    for r in rows for x in r.get("runs", [r])) * 1e3
    ax.plot([0, top], [0, top], "k--", lw=1, label="y = x (perfect prediction)")
    ax.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="0.9", label="within 15%")
    markers = {"none": "o", "1bit": "^"}
    colours = {1: "C0", 2: "C1", 3: "C4", 4: "C2", 8: "C3"}
    for r in rows:
        label = name_of(r["ranks"], r["sync"], r["compress"])
        style = dict(marker=markers.get(r["compress"], "s"), color=colours.get(r["ranks"], "C4"))
        ax.scatter(r["measured_iteration_s"] * 1e3, r["predicted_iteration_s"] * 1e3, **style,
                   edgecolor="k" if r["sync"] == "ps" else "none", s=50, label=label, zorder=3)
        others = r.get("runs", [])                     # every run, faint: the spread
        ax.scatter([x["measured_iteration_s"] * 1e3 for x in others],
                   [x["predicted_iteration_s"] * 1e3 for x in others], **style, s=12, alpha=0.35, zorder=2)
    ax.set_xlim(0, top), ax.set_ylim(0, top)
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_title(f"dpsim vs mpi_impl: median error {100 * result['median_abs_error']:.1f}%\n"
                 f"(large: each configuration's median run; small: every run)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load_profile(path):
    with open(path, "rb") as f:
        prof = tomllib.load(f)
    side = Path(path).with_suffix(".measured.json")
    return prof, (json.loads(side.read_text()) if side.exists() else None)
