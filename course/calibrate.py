"""Measure this machine and write a dpsim scenario fragment that describes it.

    python -m course calibrate -o profile.toml [--model mlp --width 1024 --depth 2 --batch 64]

What is measured, and which scenario key it becomes:

  compute      forward + loss + backward of the mpi_impl model at a few batch sizes, one
               process, one BLAS thread. dpsim's curve t(b) = F (b + b_half) / (P e_max)
               is a straight line in b, so a least-squares line t = a + k b gives
               e_max = F / (P k) and b_half = a / k, with P (cluster.gpu.fp32_tflops)
               the FLOP/s of a large matmul on one core.       -> compute.efficiency, half_batch
  update       the momentum SGD step on the model; dpsim charges 20 bytes per parameter at
               the device's memory bandwidth, so that bandwidth is 20 params / t.
                                                               -> cluster.gpu.mem_bw_gbs
  memory copy  a 64 MB array copy (read + write)               -> cluster.host_mem_bw_gbs
  links        ping-pong between 2 ranks under mpiexec (course/pingpong.py): latency is the
               one-way time of 8 bytes, bandwidth the slope over 64 KiB..4 MiB. dpsim's
               GPU-to-GPU route crosses two links (up to the PCIe switch and down), so
               each link gets half the latency.                -> cluster.intra, host_link
  1-bit codec  a 1-bit all-reduce of the model's gradient on 2 ranks. dpsim charges its
               quantise/decode kernels as bytes at memory bandwidth plus a launch cost each
               (dpsim/strategies/onebit.py); NumPy's packbits/unpackbits/take cost far more
               per byte than a copy, so the launch cost is fitted to make dpsim's sync time
               equal the measured one.                         -> compute.kernel_launch_us
  cores        os.sched_getaffinity                             -> cluster.cpu_cores

Everything course-only (the raw timings, the cores, the sync times for more ranks than
cores) goes to a JSON file beside the TOML (profile.measured.json), read by `compare`.
"""
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mpi_impl import data, nets
from mpi_impl.sgd import MomentumSGD

BATCHES = (16, 32, 64, 128)
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ fits (pure, tested)

def fit_compute(points, flops_per_sample, peak_flops):
    """(e_max, b_half) from [(batch, seconds)] under t(b) = F (b + b_half) / (P e_max)."""
    b = np.array([p[0] for p in points], float)
    t = np.array([p[1] for p in points], float)
    k, a = np.polyfit(b, t, 1)                        # t = a + k b
    e_max = flops_per_sample / (peak_flops * k)
    return float(e_max), float(max(a / k, 0.0))


def fit_link(sizes, one_way_s):
    """(bandwidth_gbs, latency_us) of a link from one-way times: latency from the smallest
    message, bandwidth from the slope over messages of 64 KiB and more."""
    big = [(s, t) for s, t in zip(sizes, one_way_s) if s >= 65536]
    slope = np.polyfit([s for s, _ in big], [t for _, t in big], 1)[0]
    return float(1.0 / slope / 1e9), float(one_way_s[0] * 1e6)


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ------------------------------------------------------------------ measurements

def best_of(fn, reps, seconds=None):
    """Median time of fn() over reps calls (after one warm-up)."""
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_flops(n=1024):
    a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
    return 2 * n ** 3 / best_of(lambda: a @ a, 5)


def copy_gbs(mb=64):
    src = np.ones(mb * 2 ** 20 // 4, np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / best_of(lambda: np.copyto(dst, src), 5) / 1e9


def build_net(model, width, depth):
    train, _ = data.load("synthetic", samples=1024)
    return nets.build(model, train.shape, train.classes, width, depth), train


def step_times(model, width, depth, batches=BATCHES, reps=15):
    """Per batch size, median seconds of forward + loss + backward; plus the update."""
    net, train = build_net(model, width, depth)
    out = []
    for b in batches:
        x, y = train.x[:b], train.y[:b]

        def step():
            _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
            net.backward(dlogits)
        out.append((b, best_of(step, reps)))
    opt = MomentumSGD(net.params, net.grads, 0.01, 0.9)
    return net, out, best_of(opt.step, reps * 2)


def mpiexec():
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else "mpiexec"


def run_pingpong(ranks, elements, reps=20, timeout=120):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "course.pingpong",
           "--elements", str(elements), "--reps", str(reps)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ the profile

def measure(model="mlp", width=1024, depth=2, batch=64, batches=BATCHES, reps=15, max_ranks=4):
    """Every measurement, as a dict (the sidecar JSON)."""
    peak = matmul_flops()
    net, points, update_s = step_times(model, width, depth, batches, reps)
    flops = 3 * net.flops_per_sample                  # forward + backward (2x forward)
    elements = net.num_params
    syncs = {}
    for n in sorted({2, *([max_ranks] if max_ranks > cores() else [])}):
        syncs[str(n)] = run_pingpong(n, elements)
    peak = max(peak, flops * max(b for b, _ in points) / min(t for _, t in points))  # e_max <= 1
    return {
        "model": {"name": model, "width": width, "depth": depth, "params": net.num_params,
                  "layers": len(net.layer_offsets), "flops_per_sample": flops},
        "batch": batch, "cores": cores(), "peak_flops": peak,
        "compute_s": [list(p) for p in points], "update_s": update_s,
        "copy_gbs": copy_gbs(), "pingpong": syncs,
    }


def profile_dict(m):
    """The dpsim scenario fragment (a dict with the TOML's keys) from measurements."""
    e_max, b_half = fit_compute(m["compute_s"], m["model"]["flops_per_sample"], m["peak_flops"])
    pp = m["pingpong"]["2"]
    bw, lat = fit_link(pp["sizes_bytes"], pp["one_way_s"])
    link = {"bandwidth_gbs": round(bw, 4), "latency_us": round(lat / 2, 3), "kind": "pcie",
            "name": "shared-memory", "source": "ping-pong under mpiexec -n 2 (course calibrate)"}
    mem_bw = 20 * m["model"]["params"] / m["update_s"] / 1e9
    prof = {
        "name": "this-machine",
        "description": f"this computer, calibrated with python -m course calibrate; a 'GPU' is one core",
        "source": f"measured on {os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M')}",
        "cluster": {
            "gpu": {"fp32_tflops": round(m["peak_flops"] / 1e12, 6), "mem_bw_gbs": round(mem_bw, 4),
                    "name": "this-cpu", "source": "matmul FLOP/s; SGD step bandwidth (course calibrate)"},
            "intra": link, "host_link": dict(link), "cpu_cores": m["cores"],
            "host_mem_bw_gbs": round(m["copy_gbs"], 3),
        },
        "model": {k: m["model"][k] for k in ("params", "flops_per_sample", "layers")},
        "compute": {"efficiency": round(min(e_max, 1.0), 6), "half_batch": round(b_half, 3)},
        "training": {"batch_per_gpu": m["batch"]},
        "data": {"source": "synthetic"},
        # mpi_impl's 1-bit makes two MPI calls (signs, scales) per phase where dpsim sends one
        # message: the second call's latency is the per-message overhead.
        "sync": {"message_overhead_us": round(lat, 3), "bucket_mb": 0.0, "overlap": False},
    }
    prof["compute"]["kernel_launch_us"] = round(fit_launch(prof, pp.get("onebit_s")), 3)
    return prof


def fit_launch(prof, measured_s, ranks=2):
    """Launch cost that makes dpsim's 1-bit sync on `ranks` take measured_s (dpsim is linear in it)."""
    if not measured_s:
        return 5.0
    from course.compare import fit_launch as fit, scenario_for
    return fit(scenario_for(prof, ranks, "ring", "1bit"), measured_s)


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
             f"  array copy      {m['copy_gbs']:8.2f} GB/s -> host_mem_bw_gbs",
             f"  link            {link['bandwidth_gbs']:8.3f} GB/s, {2 * link['latency_us']:.2f} us one-way"]
    for n, pp in m["pingpong"].items():
        if "ring_s" in pp:
            lines.append(f"  {n} ranks sync    ring {pp['ring_s'] * 1e3:.3f} ms, 1-bit {pp['onebit_s'] * 1e3:.3f} ms")
    lines.append(f"  1-bit kernels   kernel_launch_us {c['kernel_launch_us']:.1f} (fitted to the 2-rank 1-bit sync)")
    return "\n".join(lines)
