"""Measure this machine and write a dpsim scenario fragment that describes it.

    python -m course calibrate -o profile.toml [--model mlp --width 1024 --depth 2 --batch 64]
                                               [--device cpu|gpu]

What is measured, and which scenario key it becomes (fits in course/fit.py):

  compute      forward + loss + backward of the mpi_impl model at a few batch sizes, one
               process, one BLAS thread. dpsim's curve t(b) = F (b + b_half) / (P e_max)
               is a straight line in b, so a least-squares line t = a + k b gives
               e_max = F / (P k) and b_half = a / k, with P (cluster.gpu.fp32_tflops)
               the FLOP/s of a large matmul on one core.       -> compute.efficiency, half_batch
  update       the momentum SGD step on the model; dpsim charges 20 bytes per parameter at
               the device's memory bandwidth, so that bandwidth is 20 params / t.
                                                               -> cluster.gpu.mem_bw_gbs
  overheads    dividing the summed gradient by N and taking a batch from memory: mpi_impl
               does both every step, dpsim models neither.     -> compute.overhead_ms
  memory copy  a 64 MB array copy (read + write)               -> cluster.host_mem_bw_gbs
  links        ping-pong between 2 ranks under mpiexec (course/probe.py): latency is the
               one-way time of 8 bytes, bandwidth the slope over 64 KiB..4 MiB. dpsim's
               GPU-to-GPU route crosses two links (up to the PCIe switch and down), so
               each link gets half the latency.                -> cluster.intra, host_link
  1-bit codec  a 1-bit all-reduce of the model's gradient on 2 ranks. dpsim charges its
               quantise/decode kernels as bytes at memory bandwidth plus a launch cost each
               (dpsim/strategies/onebit.py); NumPy's packbits/unpackbits/take cost far more
               per byte than a copy, so the launch cost is fitted to make dpsim's sync time
               equal the measured one.                         -> compute.kernel_launch_us
  cores        os.sched_getaffinity                             -> cluster.cpu_cores
  in parallel  course/probe.py on 1, 2 and 4 ranks (or --ranks' largest): every part of a
               training step timed with N ranks at once, among them how fast each rank
               computes while N share the cores (with more ranks than cores, and with other
               programs running, fewer than N ranks' worth run at a time).

Everything course-only (the raw timings, the cores, the probes) goes to a JSON file beside
the TOML (profile.measured.json), read by `compare`. With --device gpu the same code runs on
CuPy arrays (ranks sharing the GPUs); on a CPU it runs on NumPy.
"""
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from course import launch
from course.fit import fit_compute, fit_launch, fit_link, summarise  # noqa: F401 (fit_* re-exported)
from mpi_impl import data, nets, pick_device
from mpi_impl.loader import Loader
from mpi_impl.sgd import MomentumSGD

BATCHES = (16, 32, 64, 128)


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ------------------------------------------------------------------ measurements

def median_time(fn, reps, clock=time.perf_counter):
    """Median time of fn() over reps calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(reps):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def matmul_flops(xp=np, clock=time.perf_counter, n=1024):
    a = xp.asarray(np.random.default_rng(0).standard_normal((n, n)).astype(np.float32))
    return 2 * n ** 3 / median_time(lambda: a @ a, 5, clock)


def copy_gbs(mb=64):
    src = np.ones(mb * 2 ** 20 // 4, np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / median_time(lambda: np.copyto(dst, src), 5) / 1e9


def step_times(model, width, depth, batch, batches=BATCHES, reps=15, xp=np, clock=time.perf_counter):
    """Per batch size, median seconds of forward + loss + backward; and the update, the
    division of the gradient by N, and taking a batch, at `batch`."""
    train, _ = data.load("synthetic", samples=1024)
    net = nets.build(model, train.shape, train.classes, width, depth, xp=xp)
    out = []
    for b in batches:
        x, y = xp.asarray(train.x[:b]), xp.asarray(train.y[:b])

        def step():
            _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
            net.backward(dlogits)
        out.append((b, median_time(step, reps, clock)))
    opt = MomentumSGD(net.params, net.grads, 0.01, 0.9)
    loader, indices = Loader(train, batch), np.arange(batch)
    parts = {"update_s": median_time(opt.step, reps * 2, clock),
             "scale_s": median_time(lambda: xp.multiply(net.grads, 0.5, out=net.grads), reps * 2, clock),
             "load_s": median_time(lambda: [xp.asarray(a) for a in loader.make_batch(indices)], reps * 2, clock)}
    return net, out, parts


# ------------------------------------------------------------------ the profile

def measure(model="mlp", width=1024, depth=2, batch=64, batches=BATCHES, reps=15, max_ranks=4, device="cpu"):
    """Every measurement, as a dict (the sidecar JSON)."""
    dev = pick_device(device)             # NumPy on the CPU, or CuPy and a clock that waits for the GPU
    xp, clock, devices = dev.xp, dev.clock, dev.parallel
    peak = matmul_flops(xp, clock)
    net, points, parts = step_times(model, width, depth, batch, batches, reps, xp, clock)
    flops = 3 * net.flops_per_sample                  # forward + backward (2x forward)
    probes = {str(n): launch.probe(n, model, width, depth, batch, device=device,
                                   syncs=("ring", "1bit") if n > 1 else ())
              for n in sorted({1, 2, max_ranks})}
    peak = max(peak, flops * max(b for b, _ in points) / min(t for _, t in points))  # e_max <= 1
    return {
        "model": {"name": model, "width": width, "depth": depth, "params": net.num_params,
                  "layers": len(net.layer_offsets), "flops_per_sample": flops},
        "batch": batch, "device": device, "devices": devices, "cores": cores(), "peak_flops": peak,
        "compute_s": [list(p) for p in points], **parts,
        "copy_gbs": copy_gbs(), "probes": probes,
    }


def profile_dict(m):
    """The dpsim scenario fragment (a dict with the TOML's keys) from measurements."""
    e_max, b_half = fit_compute(m["compute_s"], m["model"]["flops_per_sample"], m["peak_flops"])
    pp = summarise([m["probes"]["2"]], "ring")
    bw, lat = fit_link(pp["sizes_bytes"], pp["one_way_s"])
    link = {"bandwidth_gbs": round(bw, 4), "latency_us": round(lat / 2, 3), "kind": "pcie",
            "name": "shared-memory", "source": "ping-pong under mpiexec -n 2 (course calibrate)"}
    mem_bw = 20 * m["model"]["params"] / m["update_s"] / 1e9
    prof = {
        "name": "this-machine",
        "description": "this computer, calibrated with python -m course calibrate; a 'GPU' is "
                       + ("one core" if m.get("device", "cpu") == "cpu" else "one GPU, shared by the ranks on it"),
        "source": f"measured on {os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M')}",
        "cluster": {
            "gpu": {"fp32_tflops": round(m["peak_flops"] / 1e12, 6), "mem_bw_gbs": round(mem_bw, 4),
                    "name": f"this-{m.get('device', 'cpu')}", "source": "matmul FLOP/s; SGD step bandwidth (course calibrate)"},
            "intra": link, "host_link": dict(link), "cpu_cores": m["cores"],
            "host_mem_bw_gbs": round(m["copy_gbs"], 3),
        },
        "model": {k: m["model"][k] for k in ("params", "flops_per_sample", "layers")},
        "compute": {"efficiency": round(min(e_max, 1.0), 6), "half_batch": round(b_half, 3),
                    "overhead_ms": round((m["scale_s"] + m["load_s"]) * 1e3, 4)},
        "training": {"batch_per_gpu": m["batch"]},
        "data": {"source": "synthetic"},
        # mpi_impl's 1-bit makes two MPI calls (signs, scales) per phase where dpsim sends one
        # message: the second call's latency is the per-message overhead.
        "sync": {"message_overhead_us": round(lat, 3), "bucket_mib": 0.0, "overlap": False},
    }
    prof["compute"]["kernel_launch_us"] = round(launch_cost(prof, pp["sync_s"].get("1bit")), 3)
    return prof


def launch_cost(prof, measured_s, ranks=2):
    """Launch cost that makes dpsim's 1-bit sync on `ranks` take measured_s (dpsim is linear in it)."""
    if not measured_s:
        return 5.0
    from course.compare import scenario_for
    return fit_launch(scenario_for(prof, ranks, "ring", "1bit"), measured_s)


def to_toml(d, prefix=""):
    """A flat-enough dict as TOML: top-level strings, then one table per section."""
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)
    lines = [f"{k} = {value(v)}" for k, v in d.items() if not isinstance(v, dict)]
    for section, table in d.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"] + [f"{k} = {value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def sidecar(path):
    return Path(path).with_suffix(".measured.json")


def calibrate(out="profile.toml", **kw):
    m = measure(**kw)
    prof = profile_dict(m)
    Path(out).write_text("# written by python -m course calibrate; see course/calibrate.py\n" + to_toml(prof))
    sidecar(out).write_text(json.dumps(m, indent=1))
    return prof, m


def summary(prof, m):
    c, g, link = prof["compute"], prof["cluster"]["gpu"], prof["cluster"]["intra"]
    lines = [f"model {m['model']['name']} width {m['model']['width']} depth {m['model']['depth']}: "
             f"{m['model']['params']:,} parameters, {m['model']['flops_per_sample']:,} FLOPs per sample (fwd+bwd)",
             f"  peak (matmul)   {g['fp32_tflops'] * 1e3:8.2f} GFLOP/s per core; {m['cores']} cores",
             *(f"  batch {b:4d}      {t * 1e3:8.3f} ms forward+backward" for b, t in m["compute_s"]),
             f"  fit             e_max {c['efficiency']:.3f}, half_batch {c['half_batch']:.2f}",
             f"  SGD update      {m['update_s'] * 1e3:8.3f} ms -> mem_bw_gbs {g['mem_bw_gbs']:.2f}",
             f"  gradient / N    {m['scale_s'] * 1e3:8.3f} ms  + take a batch {m['load_s'] * 1e3:.3f} ms "
             f"-> compute.overhead_ms",
             f"  array copy      {m['copy_gbs']:8.2f} GB/s -> host_mem_bw_gbs",
             f"  link            {link['bandwidth_gbs']:8.3f} GB/s, {2 * link['latency_us']:.2f} us one-way"]
    one = summarise([m["probes"]["1"]])["compute_s"][0]
    for n, raw in m["probes"].items():
        p = summarise([raw], "ring")
        if p["ranks"] > 1:
            mean = sum(p["compute_s"]) / p["ranks"]
            lines.append(f"  {n} ranks         compute {mean * 1e3:.2f} ms a step, {mean / one:.2f} x one rank's "
                         f"(ranks sharing {m['devices']} {'cores' if m.get('device', 'cpu') == 'cpu' else 'GPUs'}); "
                         f"sync ring {p['sync_s']['ring'] * 1e3:.3f} ms, 1-bit {p['sync_s']['1bit'] * 1e3:.3f} ms")
    lines.append(f"  1-bit kernels   kernel_launch_us {c['kernel_launch_us']:.1f} (fitted to the 2-rank 1-bit sync)")
    return "\n".join(lines)
