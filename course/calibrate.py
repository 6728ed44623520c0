"""Measure this machine's primitive costs once and write the dpsim scenario fragment that
describes it; `course compare` predicts every configuration from it, without measuring again.

    python -m course calibrate -o profile.toml [--model mlp --width 1024 --depth 2 --batch 64]
                                               [--device cpu|gpu]

Each cost is measured the way the training loop exercises it (mpi_impl's own model, loop
code and codec) and becomes one scenario key (the fits are in course/fit.py):

  compute      forward + loss + backward at batches 16..128, one process (at the run's batch
               also in each 1-rank probe: the median of those moments). dpsim's
               t(b) = F (b + b_half) / (P e_max) is a line in b: e_max = F / (P k),
               b_half = a / k, P the FLOP/s of a large matmul.  -> compute.efficiency, half_batch
  update       the momentum SGD step: 20 bytes per parameter      -> cluster.gpu.mem_bw_gbs
  memory bus   the update of 2 ranks at once (the sharing probe)  -> cluster.node_mem_bw_gbs
  jitter       2 ranks computing side by side: the slower one's excess -> compute.jitter
  overheads    dividing the sum by N and taking a batch: mpi_impl does both every step, dpsim
               models neither (the median of the sweep and the 1-rank probes)
                                                                   -> compute.overhead_ms
  sharing      the same loop on N = devices ranks at once, each step ending in a ring sync as in
               training (ranks that wait for it spin): how much compute N processes really
               get (two vCPUs may give 1.8 cores' worth)
                                                                   -> cluster.devices_per_node
  link         ping-pong between 2 ranks over shared memory: bandwidth from the best time of
               4 MiB, the best round's                             -> cluster.intra, host_link
  loop latency the 2-rank ring sync of the sharing probe, its wait for the slower rank taken
               out: the latency per hop that makes dpsim's ring take as long (a message in
               the loop's rhythm costs far more than in a ping-pong)
                                          -> the links' latency_us, sync.message_overhead_us
  scheduling   the same ping-pong on 2 x devices ranks: what a message waits for a busy-polling
               rank to be scheduled, (1 - C/N) x slice / 2   -> cluster.timeslice_us (CPU)
  1-bit codec  OneBitAllreduce's seconds on 2 ranks at two buffer sizes (the gradient and an
               eighth of it, at least 2**20 values; the median of the rounds), less what dpsim's link
               model says its messages take: a cost per call and per byte of dpsim's
               quantise/decode kernels               -> compute.kernel_launch_us, codec_gbs
  cores, host  os.sched_getaffinity; a 64 MB copy                 -> cpu_cores, host_mem_bw_gbs

The raw timings go to a JSON file beside the TOML (profile.measured.json). With --device gpu
the same code runs on CuPy arrays, ranks sharing the GPUs (they wait on their own CPU cores,
so busy_poll is off there); on a CPU it runs on NumPy.
"""
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from course import fit, launch
from course.compare import scenario_for
from course.fit import fit_capacity, fit_codec, fit_compute, fit_timeslice, summarise  # noqa: F401
from dpsim import sharing as dpsim_sharing
from dpsim.compute import UPDATE_BYTES_PER_PARAM
from mpi_impl import data, nets, pick_device
from mpi_impl.loader import Loader
from mpi_impl.sgd import MomentumSGD

BATCHES = (16, 32, 64, 128)
# The 1-bit codec is timed at two buffer sizes: the model's gradient and an eighth of it, but
# at least 2**20 values, so that the codec's cost per byte stands above the noise of its
# messages (a small model's gradient is too short: its fit came out at zero cost).
CODEC_MIN_VALUES = 1 << 20
ROUNDS = 5                 # of probes on 1, 2 and 4 ranks; each figure is the median of the rounds


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


def step_times(model, width, depth, batch, batches=BATCHES, reps=40, xp=np, clock=time.perf_counter):
    """Per batch size, the median seconds of forward + loss + backward; and the update, the
    division of the gradient by N and taking a batch, at `batch`. Every part is timed inside
    the training loop's own sequence (take a batch, forward + backward, divide, update), so
    that it meets the caches as training leaves them: forward + backward alone, on a hot
    batch, runs some 10% faster than in the loop."""
    train, _ = data.load("synthetic", samples=max(1024, 2 * max(batches)))
    net = nets.build(model, train.shape, train.classes, width, depth, xp=xp)
    opt = MomentumSGD(net.params, net.grads, 0.01, 0.9)
    out, parts = [], {}
    for b in batches:
        loader = Loader(train, b)
        times = {"load_s": [], "compute_s": [], "scale_s": [], "update_s": []}
        for k in range(reps + 2):                  # two warm-up steps
            lo = (k * b) % (len(train) - b)
            t0 = clock()
            x, y = (xp.asarray(a) for a in loader.make_batch(np.arange(lo, lo + b)))
            t1 = clock()
            _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
            net.backward(dlogits)
            t2 = clock()
            xp.multiply(net.grads, 0.5, out=net.grads)
            t3 = clock()
            opt.step()
            t4 = clock()
            if k >= 2:
                for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                    times[key].append(dt)
        out.append((b, float(np.median(times["compute_s"]))))
        if b == batch:
            parts = {key: float(np.median(v)) for key, v in times.items() if key != "compute_s"}
    return net, out, parts


# ------------------------------------------------------------------ the profile

def measure(model="mlp", width=1024, depth=2, batch=64, batches=BATCHES, reps=40, device="cpu", progress=None):
    """Every measurement, as a dict (the sidecar JSON)."""
    say = progress or (lambda text: None)
    dev = pick_device(device)             # NumPy on the CPU, or CuPy and a clock that waits for the GPU
    xp, clock, devices = dev.xp, dev.clock, dev.parallel
    say("timing the model, the update and a copy in one process")
    peak = matmul_flops(xp, clock)
    net, points, parts = step_times(model, width, depth, batch, sorted(set(batches) | {batch}), reps, xp, clock)
    flops = 3 * net.flops_per_sample                  # forward + backward (2x forward)
    net_args = dict(model=model, width=width, depth=depth, batch=batch, device=device)
    values = max(net.num_params, CODEC_MIN_VALUES)
    shared_n = sharing_ranks(devices)
    probes = {str(n): [] for n in sorted({1, 2, shared_n, 2 * shared_n})}
    for r in range(ROUNDS):                       # rounds, so that a busy moment hits one of each
        say(f"probing 1, 2, ... ranks at once (round {r + 1} of {ROUNDS})")
        for n in probes:
            codec = (values, max(values // 8, 1)) if n == "2" else ()
            syncs = ("ring",) if n != "1" else ()      # the rhythm of training: compute, then a sync
            probes[n].append(launch.probe(int(n), syncs=syncs, codec=codec, steps=32, **net_args))
    return {
        "model": {"name": model, "width": width, "depth": depth, "params": net.num_params,
                  "layers": len(net.layer_offsets), "flops_per_sample": flops},
        "batch": batch, "device": device, "devices": devices, "cores": cores(), "peak_flops": peak,
        "compute_s": [list(p) for p in points], **parts,
        "copy_gbs": copy_gbs(), "probes": probes, "sharing_ranks": shared_n,
    }


def sharing_ranks(devices):
    """How many ranks to run at once to see how they share: every core busy (at most 4, so
    that calibrate stays short), or two ranks on one GPU."""
    return max(2, min(devices, 4))


def per_round(m, n, figure):
    """figure(probe of n ranks, probe of 1 rank) for each round; their median."""
    return float(np.median([figure(p, one) for p, one in zip(m["probes"][str(n)], m["probes"]["1"])]))


def compute_moments(m):
    """Forward + backward seconds at the run's batch at every moment calibrate measured it:
    the batch sweep, then the 1-rank probe of every round."""
    sweep = {int(b): t for b, t in m["compute_s"]}
    return [sweep[m["batch"]]] + [compute_step(p) for p in m["probes"]["1"]]


def loop_figures(m):
    """([(batch, forward+backward seconds)], update seconds) as the fits take them. The
    machine's speed drifts from minute to minute, so the figures at the run's batch are the
    median of the moments (compute_moments; the update likewise), and the sweep is scaled to
    that (a drift is a speed factor on every batch)."""
    sweep = {int(b): t for b, t in m["compute_s"]}
    at_batch = statistics.median(compute_moments(m))
    update_s = statistics.median(loop_moments(m, lambda d: d["update_s"]))
    return [(b, t * at_batch / sweep[m["batch"]]) for b, t in sweep.items()], update_s


def loop_moments(m, figure):
    """figure(parts) at every moment calibrate timed the 1-rank loop's parts: the one-process
    sweep (m itself, at the run's batch), then each round's 1-rank probe."""
    return [figure(m)] + [figure(summarise([p])) for p in m["probes"]["1"]]


def overhead_s(m):
    """Dividing the gradient by N plus taking a batch, per step: the median of the moments
    (the one-process sweep, then every 1-rank probe, which runs under mpiexec as training
    does; in-process it came out 0.05-0.1 ms shorter)."""
    return statistics.median(loop_moments(m, lambda d: d["load_s"] + d["scale_s"]))


def link_gbs(probe):
    """GB/s of the largest ping-pong message over its extra time above 8 bytes (best of its round trips)."""
    return probe["sizes_bytes"][-1] / (probe["one_way_s"][-1] - probe["one_way_s"][0]) / 1e9


def compute_spread(m):
    """Slowest over fastest of the compute moments at the run's batch."""
    moments = compute_moments(m)
    return max(moments) / min(moments)


def unsteady(m, ratio=1.3):
    """Warnings, one line each, where the machine changed while calibrate measured it: the
    moments of compute (the sweep and the 1-rank probes) further apart than `ratio` (on a
    quiet 2-core machine they stay within 1.15). The link's rounds vary far more even on a
    quiet machine (2.6 to 18 GB/s here); its best round is taken, so it has no warning."""
    moments = compute_moments(m)
    if max(moments) / min(moments) > ratio:
        return [f"compute at batch {m['batch']} took {min(moments) * 1e3:.2f} to {max(moments) * 1e3:.2f} ms "
                f"at different moments"]
    return []


def compute_step(probe):
    return float(np.mean(summarise([probe])["compute_s"]))


def profile_dict(m):
    """The dpsim scenario fragment (a dict with the TOML's keys) from measurements."""
    cpu = m.get("device", "cpu") == "cpu"
    peak = m["peak_flops"]
    points, update_s = loop_figures(m)
    e_max, b_half = fit_compute(points, m["model"]["flops_per_sample"], peak, anchor=m["batch"])
    if e_max > 1:                     # the loop beats a single matmul: count that rate as the peak
        peak, e_max = peak * e_max, 1.0
    n = m["sharing_ranks"]
    capacity = per_round(m, n, lambda p, one: fit_capacity(compute_step(one), summarise([p])["compute_s"], m["devices"]))
    # What a message costs: the median one-way time of 8 bytes (scheduling hiccups and all),
    # the median of the rounds; the bandwidth from the best time of the largest size (a slope
    # over a few sizes is far noisier), the best round's: what the link carries when nothing
    # else crowds the memory bus (its rounds vary by 5x even on a quiet machine here).
    lat = per_round(m, 2, lambda p, _: p["one_way_median_s"][0])
    bw = max(link_gbs(p) for p in m["probes"]["2"])
    link = {"bandwidth_gbs": round(bw, 4), "latency_us": round(lat * 1e6 / 2, 3),
            "kind": "pcie", "name": "shared-memory" if cpu else "host-staged",
            "source": "ping-pong under mpiexec -n 2 (course calibrate)"}
    mem_bw = UPDATE_BYTES_PER_PARAM * m["model"]["params"] / update_s / 1e9
    node_bw = per_round(m, 2, lambda p, _: fit.fit_memory(summarise([p])["update_s"], m["model"]["params"], 2, capacity))
    # Ranks computing side by side do not finish together: the 2-rank probe's wait for the
    # slower one, as the spread of each rank's compute per step (course/fit.py: fit_jitter).
    jitter = per_round(m, 2, lambda p, _: fit.fit_jitter(fit.straggler_s(p, "ring"), compute_step(p)))
    prof = {
        "name": "this-machine",
        "description": "this computer, calibrated with python -m course calibrate; a 'GPU' is "
                       + ("one core" if cpu else "one GPU, shared by the ranks on it"),
        "source": f"measured on {os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M')}",
        "cluster": {
            "gpu": {"fp32_tflops": round(peak / 1e12, 6), "mem_bw_gbs": round(mem_bw, 4),
                    "name": f"this-{m.get('device', 'cpu')}", "source": "matmul FLOP/s; SGD step bandwidth (course calibrate)"},
            "intra": link, "host_link": dict(link), "cpu_cores": m["cores"],
            "host_mem_bw_gbs": round(m["copy_gbs"], 3),
            "devices_per_node": round(capacity, 3),
            "node_mem_bw_gbs": round(node_bw, 4),
            "shared_memory_messages": cpu,
        },
        "model": {k: m["model"][k] for k in ("params", "flops_per_sample", "layers")},
        "compute": {"efficiency": round(e_max, 6), "half_batch": round(b_half, 3), "jitter": round(jitter, 4),
                    "overhead_ms": round(overhead_s(m) * 1e3, 4)},
        "training": {"batch_per_gpu": m["batch"]},
        "data": {"source": "synthetic"},
        # mpi_impl's 1-bit makes two MPI calls (signs, scales) per phase where dpsim sends one
        # message: the second call's latency is the per-message overhead.
        "sync": {"message_overhead_us": round(lat * 1e6, 3), "bucket_mib": 0.0, "overlap": False,
                 "busy_poll": cpu},
    }
    # A message inside the loop costs far more than in a ping-pong (ranks re-synchronise at
    # every step): the latency per hop is fitted to the 2-rank ring sync of the probes.
    ring_s = per_round(m, 2, lambda p, _: float(np.mean(p["blocks"]["ring"]["sync_steps_s"]))
                       - fit.straggler_s(p, "ring"))
    d = scenario_for(prof, 2, "ring", "none")
    loop_lat = fit.fit_latency(d, ring_s)
    for key in ("intra", "host_link"):
        prof["cluster"][key].update(latency_us=round(loop_lat, 3),
                                    source=f"ping-pong bandwidth; latency per hop in the loop's rhythm (the "
                                           f"2-rank ring sync; a ping-pong's is {lat * 1e6 / 2:.2f} us) (course calibrate)")
    prof["sync"]["message_overhead_us"] = round(2 * loop_lat, 3)
    over = m["probes"].get(str(2 * n))
    if cpu and over and 2 * n > capacity:      # the mean: a rare long wait for the scheduler counts
        slice_s = per_round(m, 2 * n, lambda p, _: fit_timeslice(lat, p["one_way_mean_s"][0], 2 * n, capacity))
        prof["cluster"]["timeslice_us"] = round(slice_s * 1e6, 1)
    launch_us, codec_gbs = onebit_codec(prof, codec_probe(m["probes"]["2"]))
    prof["compute"].update(kernel_launch_us=round(launch_us, 3), codec_gbs=round(codec_gbs, 4))
    return prof


def codec_probe(probes):
    """The 1-bit calls of every round's 2-rank probe as one: per buffer size, the median
    seconds over the rounds (one round alone moved from calibration to calibration)."""
    timed = [p for p in probes if p.get("onebit_s")]
    return {"codec_values": timed[0]["codec_values"],
            "onebit_s": [float(np.median(col)) for col in zip(*(p["onebit_s"] for p in timed))]}


def onebit_codec(prof, probe):
    """(kernel_launch_us, codec_gbs): what one OneBitAllreduce call on 2 ranks took at two buffer
    sizes, less what dpsim's link model says its messages take, is the codec's (with its error
    feedback's arithmetic): dpsim charges that as kernels (course/fit.py: fit_codec)."""
    import dpsim
    messages = []
    for v in probe["codec_values"]:
        d = scenario_for(prof, 2, "ring", "1bit")
        d["model"] = {"params": v, "flops_per_sample": 1.0, "layers": 1}
        d["compute"].update(kernel_launch_us=0.0, codec_gbs=1e12)      # kernels free: messages only
        messages.append(dpsim.simulate(d).sync_time_s)
    kernels = [max(t - msg, 0.0) for t, msg in zip(probe["onebit_s"], messages)]
    share = dpsim_sharing.ranks_per_device(2, prof["cluster"]["devices_per_node"])
    return fit_codec(probe["codec_values"], kernels, 2, share)


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


def calibrate(out="profile.toml", progress=None, **kw):
    """Measure, fit, write the profile and its sidecar. If the machine changed while it
    measured (`unsteady`), measure once more and keep the steadier of the two."""
    m = measure(progress=progress, **kw)
    warnings = unsteady(m)
    if warnings:
        if progress:
            progress(f"the machine changed while measuring ({warnings[0]}): measuring once more")
        again = measure(progress=progress, **kw)
        m = min((m, again), key=compute_spread)
    prof = profile_dict(m)
    Path(out).write_text("# written by python -m course calibrate; see course/calibrate.py\n" + to_toml(prof))
    sidecar(out).write_text(json.dumps(m, indent=1))
    return prof, m


def summary(prof, m):
    c, cl, g, link = prof["compute"], prof["cluster"], prof["cluster"]["gpu"], prof["cluster"]["intra"]
    unit = "cores" if m.get("device", "cpu") == "cpu" else "GPUs"
    points, update_s = loop_figures(m)
    lines = [f"model {m['model']['name']} width {m['model']['width']} depth {m['model']['depth']}: "
             f"{m['model']['params']:,} parameters, {m['model']['flops_per_sample']:,} FLOPs per sample (fwd+bwd)",
             f"  peak (matmul)   {g['fp32_tflops'] * 1e3:8.2f} GFLOP/s per device; {m['devices']} {unit}",
             *(f"  batch {b:4d}      {t * 1e3:8.3f} ms forward+backward" for b, t in points),
             f"  fit             e_max {c['efficiency']:.3f}, half_batch {c['half_batch']:.2f} (batch {m['batch']}: "
             f"the median of the sweep and {len(m['probes']['1'])} probes, the sweep scaled to it)",
             f"  SGD update      {update_s * 1e3:8.3f} ms -> mem_bw_gbs {g['mem_bw_gbs']:.2f}",
             f"  memory bus      2 ranks updating at once share {cl['node_mem_bw_gbs']:.1f} GB/s "
             f"(one alone: {g['mem_bw_gbs']:.1f}) -> node_mem_bw_gbs",
             f"  2 ranks         the slower computes {c['jitter'] / np.sqrt(np.pi):.1%} longer than the mean "
             f"-> compute.jitter {c['jitter']:.3f}",
             f"  overheads       {c['overhead_ms']:8.3f} ms (gradient / N + take a batch; the median of "
             f"the moments) -> compute.overhead_ms",
             f"  array copy      {m['copy_gbs']:8.2f} GB/s -> host_mem_bw_gbs",
             f"  sharing         {m['sharing_ranks']} ranks computing at once get {cl['devices_per_node']:.2f} "
             f"{unit}' worth -> devices_per_node",
             f"  link            {link['bandwidth_gbs']:8.3f} GB/s (ping-pong); a message in the loop's rhythm "
             f"costs {2 * link['latency_us']:.0f} us (fitted to the 2-rank ring sync) -> intra, host_link",
             f"  1-bit codec     {c['kernel_launch_us']:.1f} us per kernel, {c['codec_gbs']:.2f} GB/s on the bytes "
             f"its kernels touch -> kernel_launch_us, codec_gbs"]
    if "timeslice_us" in cl:
        crowded = per_round(m, 2 * m["sharing_ranks"], lambda p, _: p["one_way_mean_s"][0])
        alone = per_round(m, 2, lambda p, _: p["one_way_mean_s"][0])
        lines.append(f"  scheduling      {2 * m['sharing_ranks']} busy-polling ranks: a message waits "
                     f"{(crowded - alone) * 1e6:.0f} us more on average -> timeslice_us {cl['timeslice_us']:.0f}")
    lines.append(f"  (medians of {len(m['probes']['1'])} rounds of probes)")
    for warning in unsteady(m):
        lines.append(f"warning: the machine changed while calibrating: {warning}; other programs were "
                     f"running? calibrate again when it is quiet, or the predictions inherit this moment")
    return "\n".join(lines)
