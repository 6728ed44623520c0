"""Measure this machine's primitive costs once and write the dpsim scenario fragment that
describes it; `course compare` predicts every configuration from it, without measuring again.

    python -m course calibrate -o profile.toml [--model mlp --width 1024 --depth 2 --batch 64]
                                               [--device cpu|gpu]

Each cost is measured the way the training loop exercises it (mpi_impl's own model, loop
code and codec; course/measurements.py takes the measurements and reads them back as a
`Measurements` record). One fit per group of keys below turns the record into scenario keys,
each applying one of course/fit.py's inversions of a dpsim cost formula:

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
  scheduling   the ring sync of the probe of 2 x devices ranks, its wait for the slowest taken
               out: what a message waits for a busy-polling rank to be scheduled in the loop's
               rhythm, (1 - C/N) x slice / 2 (the same ranks' ping-pong waits far less; both
               are printed)                                  -> cluster.timeslice_us (CPU)
  time-slicing the compute of that probe (two ranks or more on a core) against the 1-rank
               probe's and dpsim's processor sharing, and how far apart its ranks finished
                                  -> cluster.timeslice_overhead, compute.shared_jitter (CPU)
  1-bit codec  OneBitAllreduce's seconds on 2 ranks: the gradient's call as training makes it
               (the 2-rank probe's 1bit block: after backward, before the update; its wait for
               the slower rank taken out) and a call alone at an eighth of the size, at least
               2**20 values; the median of the rounds; less what dpsim's link model says its
               messages take: a cost per call and per byte of dpsim's quantise/decode kernels
                                                     -> compute.kernel_launch_us, codec_gbs
  PowerSGD     its products and Gram-Schmidt on the model's matrices at compare's rank, both
               ranks of the 2-rank probe at once: FLOPs x share / seconds (course/lowrank.py)
                                                                   -> compute.powersgd_gflops
  cores, host  os.sched_getaffinity; a 64 MB copy                 -> cpu_cores, host_mem_bw_gbs
  the model    mpi_impl's network, counted: parameters, FLOPs per sample, layers, and each
               layer's weight matrix as PowerSGD takes it -> model.params, flops_per_sample,
                                                             layers, matrices

The loop latency, the time slice and the codec are fitted through dpsim, on the machine as
fitted before them. The raw timings go to a JSON file beside the TOML (profile.measured.json);
`profile_dict` rebuilds the same profile from it.

Every figure that moves between the rounds is written as {value, low, high}: the fit from all
rounds and the 10-90% range of each round's own fit (course/spread.py), so that dpsim predicts
a band from the profile. The machine's load from other programs is sampled all the while
(course.machine_load.Monitor) and written in the profile's comments and the sidecar. Where
figures' rounds disagree beyond course.spread.LIMITS, calibrate measures once more; if they
still disagree it ends with one line (course.spread.Noisy) and writes no profile, unless
--accept-noisy. With --device gpu the same code runs on
CuPy arrays, ranks sharing the GPUs (they wait on their own CPU cores, so busy_poll is off
there); on a CPU it runs on NumPy.
"""
import json
import os
import time
from dataclasses import dataclass, replace


from course import fit, lowrank, spread
from course.compare import scenario_for
from course.fit import fit_capacity, fit_codec, fit_compute
from course.calibrate_summary import summary  # noqa: F401  (calibrate.summary: what calibrate prints)
from course.machine_load import Monitor
from course.profile_file import sidecar, to_toml, write_pair  # noqa: F401  (calibrate.sidecar, .to_toml)
# LOWRANK, ROUNDS, codec_probe and overhead_s are read as calibrate's names too (tests/test_course.py)
from course.measurements import (LOWRANK, ROUNDS, Measurements, codec_probe, compute_spread,  # noqa: F401
                                 measure, overhead_s, unsteady)
from dpsim import sharing as dpsim_sharing
from dpsim.compute import UPDATE_BYTES_PER_PARAM


# ------------------------------------------------------------------ one fit per group of keys

def fit_compute_keys(m):
    """(peak FLOP/s, compute.efficiency, compute.half_batch) from the matmul's FLOP/s and the
    sweep of forward + backward over batches, a line through the run's batch (fit.fit_compute).
    A loop that beats one matmul makes its own rate the peak (cluster.gpu.fp32_tflops)."""
    peak = m.peak_flops
    e_max, b_half = fit_compute(m.sweep, m.model["flops_per_sample"], peak, anchor=m.batch)
    if not e_max > 0:           # measurements.sweep_shrinks: measured twice and still so
        raise spread.Noisy("the batch sweep's forward+backward fell as the batch grew, measured twice: close "
                           "other programs, run `python -m course doctor`, then calibrate again")
    if e_max > 1:
        peak, e_max = peak * e_max, 1.0
    return peak, e_max, b_half


def fit_sharing(m):
    """cluster.devices_per_node: the devices' worth the sharing probe's ranks get computing at
    once, against the 1-rank probe of the same round (fit.fit_capacity); the median of the rounds."""
    return m.per_round(m.sharing_ranks, lambda p, one: fit_capacity(one.compute_mean_s, p.compute_s, m.devices))


def fit_memory_keys(m, capacity):
    """(cluster.gpu.mem_bw_gbs, cluster.node_mem_bw_gbs): one rank's SGD update moves 20 bytes
    per parameter; 2 ranks updating at once (the 2-rank probe) share the node's bus
    (fit.fit_memory), on `capacity` devices' worth."""
    params = m.model["params"]
    mem_bw = UPDATE_BYTES_PER_PARAM * params / m.update_s / 1e9
    node_bw = m.per_round(2, lambda p, _: fit.fit_memory(p.update_s, params, 2, capacity))
    return mem_bw, node_bw


def fit_update_after_codec_key(m):
    """compute.update_after_codec: the 2-rank probe's update after its 1-bit sync against after
    its ring sync, the median of the rounds (fit.fit_update_after_codec); None without the block."""
    if m.probes[2][0].onebit_update_s is None:
        return None
    return m.per_round(2, lambda p, _: fit.fit_update_after_codec(p.update_s, p.onebit_update_s))


def fit_jitter_key(m):
    """compute.jitter: ranks computing side by side do not finish together; the 2-rank probe's
    wait for the slower one against its compute (fit.fit_jitter)."""
    return m.per_round(2, lambda p, _: fit.fit_jitter(p.straggler_s, p.compute_mean_s))


def fit_pingpong(m):
    """(bandwidth GB/s, one-way seconds of 8 bytes) from the 2-rank ping-pong. The message's
    time is the median (scheduling hiccups and all), the median of the rounds. The bandwidth
    comes from the best time of the largest size (a slope over a few sizes is far noisier),
    the best round's: what the link carries when nothing else crowds the memory bus."""
    return max(p.link_gbs for p in m.probes[2]), m.per_round(2, lambda p, _: p.message_s)


def fit_loop_latency(m, machine):
    """The links' latency_us per hop in the loop's rhythm, which costs far more than in a
    ping-pong (ranks re-synchronise at every step): the latency that makes dpsim's 2-rank
    ring on `machine` (a profile) take the probe's ring sync, its wait for the slower rank
    taken out (fit.fit_latency)."""
    ring_s = m.per_round(2, lambda p, _: p.ring_sync_s - p.straggler_s)
    return fit.fit_latency(scenario_for(machine, 2, "ring", "none"), ring_s)


def oversubscribed_ranks(m, capacity):
    """The rank count of the probe whose ranks outnumber the `capacity` devices (2 x
    sharing_ranks), on a CPU that has it; None otherwise."""
    n = 2 * m.sharing_ranks
    return n if m.cpu and m.probes.get(n) and n > capacity else None


def fit_timeslice_key(m, machine):
    """cluster.timeslice_us in seconds, on a CPU whose 2 x sharing_ranks probe outnumbers the
    devices: the slice that makes dpsim's ring on `machine` (a profile, its loop latency
    fitted) take that probe's ring sync, its wait for the slowest rank taken out
    (fit.fit_timeslice_in_loop). A ping-pong between such ranks waits far less (scheduling_line
    prints both): the receiver's core-mate polls and yields there, and is at work in the loop.
    None otherwise."""
    n = oversubscribed_ranks(m, machine["cluster"]["devices_per_node"])
    if n is None:
        return None
    ring_s = m.per_round(n, lambda p, _: p.ring_sync_s - p.straggler_s)
    slice_us = fit.fit_timeslice_in_loop(scenario_for(machine, n, "ring", "none"), ring_s)
    return None if slice_us is None else slice_us / 1e6


def fit_oversubscribed_keys(m, capacity):
    """(cluster.timeslice_overhead, compute.shared_jitter) on a CPU whose 2 x sharing_ranks
    probe outnumbers the devices, else (None, None): how much slower than dpsim's processor
    sharing its ranks computed, against the 1-rank probe of the same round
    (fit.fit_timeslice_overhead), and how far apart they finished (fit.fit_shared_jitter);
    the medians of the rounds."""
    n = oversubscribed_ranks(m, capacity)
    if n is None:
        return None, None
    factors, shared = dpsim_sharing.rank_factors(n, capacity), dpsim_sharing.shares_device(n, capacity)
    overhead = m.per_round(n, lambda p, one: fit.fit_timeslice_overhead(one.compute_mean_s, p.compute_s,
                                                                       factors, shared))
    jitter = m.per_round(n, lambda p, _: fit.fit_shared_jitter(p.straggler_s, p.compute_mean_s, n))
    return overhead, jitter


def fit_codec_keys(m, machine):
    """(compute.kernel_launch_us, compute.codec_gbs): what OneBitAllreduce calls on 2 ranks
    took at two buffer sizes, less what dpsim's link model says its messages take on
    `machine` (a profile), is the codec's (with its error feedback's arithmetic); dpsim
    charges that as kernels (fit.fit_codec). The call on the gradient itself is the one timed
    in the training loop's rhythm (Measurements.onebit_loop_s) where the probe has it: alone,
    back to back, the same call ran faster (13.5 against about 17 ms on the 2-core machine,
    course/README.md)."""
    d = scenario_for(machine, 2, "ring", "1bit")
    d["compute"].update(kernel_launch_us=0.0, codec_gbs=1e12)      # kernels free: messages only
    values, calls = list(m.codec_values), list(m.onebit_s)
    if m.onebit_loop_s is not None:                 # the gradient's call as training makes it
        params = m.model["params"]
        kept = [(v, t) for v, t in zip(values, calls) if v != params]
        values, calls = [v for v, _ in kept] + [params], [t for _, t in kept] + [m.onebit_loop_s]
    messages = [fit.collective_seconds(d, 4 * v, "ring", "1bit") for v in values]
    kernels = [max(t - msg, 0.0) for t, msg in zip(calls, messages)]
    share = dpsim_sharing.ranks_per_device(2, machine["cluster"]["devices_per_node"])
    return fit_codec(values, kernels, 2, share)


# ------------------------------------------------------------------ the profile

@dataclass(frozen=True)
class Fitted:
    """The profile's figures as fitted, unrounded; those fitted through dpsim are None until
    the machine as fitted before them has been laid out."""
    peak_flops: float
    efficiency: float
    half_batch: float
    devices_per_node: float
    mem_bw_gbs: float
    node_mem_bw_gbs: float
    jitter: float
    link_gbs: float
    message_s: float                     # the ping-pong's one-way time of 8 bytes
    loop_latency_us: float | None = None
    timeslice_s: float | None = None
    codec: tuple | None = None           # (kernel_launch_us, codec_gbs)
    timeslice_overhead: float | None = None
    shared_jitter: float | None = None
    update_after_codec: float | None = None  # the 2-rank probe's update after 1-bit against after the ring
    powersgd_gflops: float | None = None   # None: the probes did not time PowerSGD's products


def profile_dict(measured):
    """The dpsim scenario fragment (a dict with the TOML's keys) from calibrate's measurements
    (the sidecar's dict): one fit per group of keys, then the profile laid out once."""
    m = Measurements.from_sidecar(measured)
    peak, e_max, b_half = fit_compute_keys(m)
    capacity = fit_sharing(m)
    mem_bw, node_bw = fit_memory_keys(m, capacity)
    link_gbs, message_s = fit_pingpong(m)
    f = Fitted(peak, e_max, b_half, capacity, mem_bw, node_bw, fit_jitter_key(m), link_gbs, message_s,
               powersgd_gflops=lowrank.fit_rate(m, capacity))
    overhead, shared_jitter = fit_oversubscribed_keys(m, capacity)
    f = replace(f, loop_latency_us=fit_loop_latency(m, layout(m, f)), timeslice_overhead=overhead,
                shared_jitter=shared_jitter, update_after_codec=fit_update_after_codec_key(m))
    f = replace(f, timeslice_s=fit_timeslice_key(m, layout(m, f)))
    return layout(m, replace(f, codec=fit_codec_keys(m, layout(m, f))))


def layout(m, f):
    """The profile (a dict with the TOML's keys, in the TOML's order) from the measurements and
    the figures fitted so far: a figure not fitted yet is left out, and until the loop's
    latency is fitted the links and the per-message overhead carry the ping-pong's."""
    return {
        "name": "this-machine",
        "description": "this computer, calibrated with python -m course calibrate; a 'GPU' is "
                       + ("one core" if m.cpu else "one GPU, shared by the ranks on it"),
        "source": f"measured on {os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M')}",
        "cluster": cluster_keys(m, f),
        "model": model_keys(m),
        "compute": compute_keys(m, f),
        "training": {"batch_per_gpu": m.batch},
        "data": {"source": "synthetic"},
        "sync": sync_keys(m, f),
    }


def model_keys(m):
    """The model as dpsim's custom model: parameters, FLOPs, layers, and each layer's weight matrix
    (model.matrices, which PowerSGD compresses; left out for a sidecar that did not record them)."""
    keys = {k: m.model[k] for k in ("params", "flops_per_sample", "layers")}
    if m.model.get("matrices"):
        keys["matrices"] = m.model["matrices"]
    return keys


def link_keys(m, f):
    pingpong_us = f.message_s * 1e6 / 2                 # one hop: half the 8-byte one-way time
    if f.loop_latency_us is None:
        latency, source = pingpong_us, "ping-pong under mpiexec -n 2 (course calibrate)"
    else:
        latency = f.loop_latency_us
        source = (f"ping-pong bandwidth; latency per hop in the loop's rhythm (the 2-rank ring sync; "
                  f"a ping-pong's is {pingpong_us:.2f} us) (course calibrate)")
    return {"bandwidth_gbs": round(f.link_gbs, 4), "latency_us": round(latency, 3),
            "kind": "pcie", "name": "shared-memory" if m.cpu else "host-staged", "source": source}


def cluster_keys(m, f):
    link = link_keys(m, f)
    keys = {"gpu": {"fp32_tflops": round(f.peak_flops / 1e12, 6), "mem_bw_gbs": round(f.mem_bw_gbs, 4),
                    "name": f"this-{m.device}", "source": "matmul FLOP/s; SGD step bandwidth (course calibrate)"},
            "intra": link, "host_link": dict(link), "cpu_cores": m.cores,
            "host_mem_bw_gbs": round(m.copy_gbs, 3),
            "devices_per_node": round(f.devices_per_node, 3),
            "node_mem_bw_gbs": round(f.node_mem_bw_gbs, 4),
            "shared_memory_messages": m.cpu}
    if f.timeslice_s is not None:
        keys["timeslice_us"] = round(f.timeslice_s * 1e6, 1)
    if f.timeslice_overhead is not None:
        keys["timeslice_overhead"] = round(f.timeslice_overhead, 4)
    return keys


def compute_keys(m, f):
    keys = {"efficiency": round(f.efficiency, 6), "half_batch": round(f.half_batch, 3),
            "jitter": round(f.jitter, 4), "overhead_ms": round(m.overhead_s * 1e3, 4)}
    for key in ("shared_jitter", "update_after_codec"):
        if getattr(f, key) is not None:
            keys[key] = round(getattr(f, key), 4)
    if f.codec is not None:
        launch_us, codec_gbs = f.codec
        keys.update(kernel_launch_us=round(launch_us, 3), codec_gbs=round(codec_gbs, 4))
    if f.powersgd_gflops is not None:
        keys["powersgd_gflops"] = round(f.powersgd_gflops, 4)
    return keys


def sync_keys(m, f):
    # mpi_impl's 1-bit makes two MPI calls (signs, scales) per phase where dpsim sends one
    # message: the second call's latency, two hops' worth, is the per-message overhead.
    if f.loop_latency_us is None:
        overhead_us = f.message_s * 1e6
    else:
        overhead_us = 2 * f.loop_latency_us
    # mpi_impl's PowerSGD takes its error from its own approximation (Vogels et al., Algorithm 2)
    return {"message_overhead_us": round(overhead_us, 3), "bucket_mib": 0.0, "overlap": False,
            "busy_poll": m.cpu, "powersgd_error": "local"}


# ------------------------------------------------------------------ the command

def measured(progress=None, **kw):
    """measure(), the machine's load sampled while it runs (course.machine_load.Monitor): the
    sidecar, with "machine_load" added."""
    with Monitor() as load:
        m = measure(progress=progress, **kw)
    m["machine_load"] = load.summary()
    return m


def noisy_figures(m):
    """The figures whose rounds disagree beyond course.spread.LIMITS, as [(key, spread)]."""
    return spread.noisy(spread.figure_spreads(m, profile_dict(m), profile_dict)) if spread.rounds_of(m) > 1 else []


def calibrate(out="profile.toml", progress=None, accept_noisy=False, **kw):
    """Measure, fit, write the profile and its sidecar; return (the profile with its ranges,
    the sidecar). If the machine changed while it measured (`unsteady`) or figures' rounds
    disagree (course.spread), measure once more and keep the steadier of the two; if figures
    still disagree, raise course.spread.Noisy (one line) and write nothing, unless accept_noisy."""
    m = measured(progress, **kw)
    warnings = unsteady(m) or [f"{key} disagrees between rounds" for key, _ in noisy_figures(m)]
    if warnings:
        if progress:
            progress(f"the machine changed while measuring ({warnings[0]}): measuring once more")
        again = measured(progress, **kw)
        steadier = lambda x: (len(unsteady(x)), 0 if unsteady(x) else len(noisy_figures(x)), compute_spread(x))
        m = min((m, again), key=steadier)
    prof = profile_dict(m)
    fits = spread.round_fits(m, profile_dict)
    spreads = spread.figure_spreads(m, prof, profile_dict, spread.dpsim_allows(scenario_for(prof, 2, "ring", "none")),
                                    fits)
    found = spread.noisy(spreads)
    if found and not accept_noisy:
        raise spread.Noisy(spread.verdict(found, m.get("machine_load")))
    m["spread"] = spreads
    banded = spread.with_ranges(prof, spreads, spread.samples(fits, spreads))
    write_pair(out, header(m, found) + to_toml(banded), json.dumps(m, indent=1))
    return banded, m


def header(m, found):
    """The profile's comment lines: who wrote it, how busy the machine was, what was accepted."""
    lines = ["written by python -m course calibrate; see course/calibrate.py",
             "{value, low, high}: the fit from all rounds and the 10-90% range of each round's own fit "
             "(course/spread.py); [[samples]]: each round's own fit, which dpsim's band takes together"]
    busy = spread.load_text(m.get("machine_load"))
    if busy:
        lines.append(busy)
    if found:
        lines.append("WARNING: written with --accept-noisy; the rounds disagree on "
                     + ", ".join(key for key, _ in found) + ": predictions from it inherit that moment")
    return "".join(f"# {line}\n" for line in lines)
