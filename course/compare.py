"""Predicted against measured: run mpi_impl.train under mpiexec and dpsim on the calibration.

    python -m course compare --ranks 1,2,4 --sync ring,ps --compress none,1bit \\
        [--profile profile.toml] [--json F] [--plot F]

How the CPU machine maps onto dpsim (course/README.md says it in words):
  N ranks           N "GPUs" in one node, all under one PCIe switch; intra and host_link are
                    the measured link (shared memory)
  --sync            sync.strategy of the same name; `mpi` (MPI_Allreduce) is simulated as ring
  --compress        sync.compression none | 1bit
  no overlap        sync.bucket_mb = 0, sync.overlap = false: one sync after backward
  1 rank            no sync at all in dpsim (strategy none); mpi_impl still copies the
                    gradient once, a small cost that shows up as exposed_comm
  N > cores         ranks share cores: every GPU runs at cores/N speed (cluster.gpu_speed),
                    memory-bound kernels too (mem_bw_gbs x cores/N, kernel_launch_us x N/cores),
                    and the link's latency is fitted so that dpsim's ring sync on N ranks takes
                    what calibrate measured (waiting for a descheduled partner dominates);
                    likewise kernel_launch_us for 1-bit, from the 1-bit sync measured on N ranks

Measured phases are mapped onto dpsim's breakdown keys: compute, data_wait, update as they
are; exposed_comm minus compression (mpi_impl's blocking sync span includes the codec);
compression; `other` is the loop's remaining time. dpsim's straggler_wait is added to compute.
"""
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

PHASES = ("compute", "data_wait", "exposed_comm", "compression", "update", "other")
THRESHOLD = 0.15
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ scenarios

def scenario_for(prof, ranks, sync, compress, launch_us=None, measured=None, batch=None):
    """The dpsim scenario (dict) for one mpi_impl configuration on the calibrated machine."""
    d = copy.deepcopy(prof)
    c, comp, s = d.setdefault("cluster", {}), d.setdefault("compute", {}), d.setdefault("sync", {})
    c.update(nodes=1, gpus_per_node=ranks, gpus_per_pcie_switch=ranks)
    s.update(strategy="none" if ranks == 1 else ("ring" if sync == "mpi" else sync),
             compression=compress if ranks > 1 else "none", bucket_mb=0.0, overlap=False)
    d.setdefault("data", {})["source"] = "synthetic"
    t = d.setdefault("training", {})
    t.update(iterations=4, warmup_iterations=1)
    if batch:
        t["batch_per_gpu"] = batch
    if launch_us is not None:
        comp["kernel_launch_us"] = launch_us
    cores = c.get("cpu_cores", ranks)
    share = ranks / cores
    if share > 1:
        c["gpu_speed"] = [1 / share] * ranks
        c["gpu"] = dict(c["gpu"], mem_bw_gbs=c["gpu"]["mem_bw_gbs"] / share)
        comp["kernel_launch_us"] = comp.get("kernel_launch_us", 5.0) * share
        ring_s = ((measured or {}).get("pingpong", {}).get(str(ranks)) or {}).get("ring_s")
        if ring_s and ranks > 1:
            lat = fit_latency(d, ranks, ring_s)
            for key in ("intra", "host_link"):
                c[key] = dict(c[key], latency_us=lat, source=f"fitted to a {ranks}-rank ring on {cores} cores")
        onebit_s = ((measured or {}).get("pingpong", {}).get(str(ranks)) or {}).get("onebit_s")
        if onebit_s and s["compression"] == "1bit":
            comp["kernel_launch_us"] = fit_launch(d, onebit_s)
    return d


def fit_launch(d, onebit_s):
    """kernel_launch_us that makes dpsim's 1-bit sync of scenario d take onebit_s (linear in it)."""
    import dpsim
    probe = copy.deepcopy(d)
    times = []
    for x in (0.0, 1.0):
        probe["compute"] = dict(probe["compute"], kernel_launch_us=x)
        times.append(dpsim.simulate(probe).sync_time_s)
    return round(max((onebit_s - times[0]) / (times[1] - times[0]), 0.0), 3)


def fit_latency(d, ranks, ring_s):
    """Link latency (us) that makes dpsim's ring sync of the model take ring_s (linear in it)."""
    import dpsim
    probe = copy.deepcopy(d)
    probe["sync"] = dict(probe["sync"], strategy="ring", compression="none")
    times = []
    for lat in (0.0, 100.0):
        for key in ("intra", "host_link"):
            probe["cluster"][key] = dict(probe["cluster"][key], latency_us=lat)
        times.append(dpsim.simulate(probe).sync_time_s)
    return round(max(100.0 * (ring_s - times[0]) / (times[1] - times[0]), 0.0), 3)


# ------------------------------------------------------------------ measuring

def mpiexec():
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else "mpiexec"


def measure(ranks, sync, compress, model, width, depth, batch, samples, epochs, timeout=600):
    """mpi_impl.train's JSON result for one configuration."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.json"
        cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "mpi_impl.train",
               "--model", model, "--width", str(width), "--depth", str(depth),
               "--batch-per-rank", str(batch), "--samples", str(samples), "--epochs", str(epochs),
               "--sync", sync, "--compress", compress, "--json", str(out)]
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
        return json.loads(out.read_text())


def measured_phases(result):
    """mpi_impl's per-iteration breakdown under dpsim's keys."""
    b = result["breakdown_s"]
    exposed = max(b.get("exposed_comm", 0.0) - b.get("compression", 0.0), 0.0)
    out = {"compute": b["compute"], "data_wait": b["data_wait"], "exposed_comm": exposed,
           "compression": b.get("compression", 0.0), "update": b["update"]}
    out["other"] = max(result["iteration_time_s"] - sum(out.values()), 0.0)
    return out


def predicted_phases(breakdown):
    b = dict(breakdown)
    out = {k: b.get(k, 0.0) for k in PHASES if k != "other"}
    out["compute"] += b.get("straggler_wait", 0.0)
    out["other"] = 0.0
    return out


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

def configurations(ranks, syncs, compresses):
    """(ranks, sync, compress); one rank has nothing to sync, so it appears once."""
    out = []
    for n in ranks:
        if n == 1:
            out.append((1, "ring", "none"))
            continue
        out += [(n, s, c) for s in syncs for c in compresses]
    return out


def compare(prof, measured, ranks, syncs, compresses, model, width, depth, batch, samples, epochs,
            progress=None):
    import dpsim
    rows, base = [], {}
    for n, sync, comp in configurations(ranks, syncs, compresses):
        if progress:
            progress(f"running {n} rank(s), sync {sync}, compress {comp} ...")
        meas = measure(n, sync, comp, model, width, depth, batch, samples, epochs)
        pred = dpsim.simulate(scenario_for(prof, n, sync, comp, measured=measured, batch=batch))
        row = {"ranks": n, "sync": sync, "compress": comp,
               "predicted_iteration_s": pred.iteration_time_s,
               "measured_iteration_s": meas["iteration_time_s"],
               "predicted_samples_per_s": pred.throughput_samples_per_s,
               "measured_samples_per_s": meas["throughput_samples_per_s"],
               "predicted_phases_s": predicted_phases(pred.breakdown_s),
               "measured_phases_s": measured_phases(meas)}
        row["error"] = row["predicted_iteration_s"] / row["measured_iteration_s"] - 1
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
    return {"rows": rows, "median_abs_error": statistics.median(errors) if errors else None}


def table(result):
    head = (f"{'configuration':<22} {'predicted':>10} {'measured':>10}  {'speed-up':>8} {'speed-up':>8}"
            f"  {'iteration ms':>13} {'error':>7}\n{'':<22} {'samples/s':>10} {'samples/s':>10}  "
            f"{'pred.':>8} {'meas.':>8}  {'pred./meas.':>13}")
    lines = [head]
    for r in result["rows"]:
        name = "1 rank (no sync)" if r["ranks"] == 1 else f"{r['ranks']} ranks {r['sync']} {r['compress']}"
        sp = lambda v: f"{v:8.2f}" if v is not None else f"{'-':>8}"
        lines.append(f"{name:<22} {r['predicted_samples_per_s']:10,.0f} {r['measured_samples_per_s']:10,.0f}  "
                     f"{sp(r['predicted_speedup'])} {sp(r['measured_speedup'])}  "
                     f"{r['predicted_iteration_s'] * 1e3:6.2f}/{r['measured_iteration_s'] * 1e3:<6.2f} "
                     f"{100 * r['error']:+6.1f}%")
    lines.append(f"median absolute error of the iteration time: {100 * result['median_abs_error']:.1f}% "
                 f"over {len(result['rows'])} configurations")
    for r in result["rows"]:
        d = r["diagnosis"]
        if d:
            lines.append(f"  {r['ranks']} ranks {r['sync']} {r['compress']}: off by {100 * r['error']:+.0f}%; "
                         f"phase that differs most: {d['phase']} (predicted {d['predicted_s'] * 1e3:.2f} ms, "
                         f"measured {d['measured_s'] * 1e3:.2f} ms per iteration)")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 5))
    rows = result["rows"]
    top = 1.1 * max(max(r["predicted_iteration_s"], r["measured_iteration_s"]) for r in rows) * 1e3
    ax.plot([0, top], [0, top], "k--", lw=1, label="y = x (perfect prediction)")
    ax.fill_between([0, top], [0, 0.85 * top], [0, 1.15 * top], color="0.9", label="within 15%")
    markers = {"none": "o", "1bit": "^"}
    colours = {1: "C0", 2: "C1", 4: "C2", 8: "C3"}
    for r in rows:
        label = "1 rank" if r["ranks"] == 1 else f"{r['ranks']} ranks, {r['sync']}, {r['compress']}"
        ax.scatter(r["measured_iteration_s"] * 1e3, r["predicted_iteration_s"] * 1e3,
                   marker=markers.get(r["compress"], "s"), color=colours.get(r["ranks"], "C4"),
                   edgecolor="k" if r["sync"] == "ps" else "none", s=50, label=label, zorder=3)
    ax.set_xlim(0, top), ax.set_ylim(0, top)
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_title(f"dpsim vs mpi_impl: median error {100 * result['median_abs_error']:.1f}%")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def load_profile(path):
    with open(path, "rb") as f:
        prof = tomllib.load(f)
    side = Path(path).with_suffix(".measured.json")
    return prof, (json.loads(side.read_text()) if side.exists() else None)
