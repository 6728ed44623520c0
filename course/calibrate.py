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
  scheduling   the same ping-pong on 2 x devices ranks: what a message waits for a busy-polling
               rank to be scheduled, (1 - C/N) x slice / 2   -> cluster.timeslice_us (CPU)
  1-bit codec  OneBitAllreduce's seconds on 2 ranks at two buffer sizes (the gradient and an
               eighth of it, at least 2**20 values; the median of the rounds), less what dpsim's link
               model says its messages take: a cost per call and per byte of dpsim's
               quantise/decode kernels               -> compute.kernel_launch_us, codec_gbs
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
from pathlib import Path

import numpy as np

from course import fit, spread
from course.compare import scenario_for
from course.fit import fit_capacity, fit_codec, fit_compute, fit_timeslice
from course.machine_load import Monitor
# ROUNDS, codec_probe and overhead_s are read as calibrate's names too (tests/test_course.py)
from course.measurements import (ROUNDS, Measurements, codec_probe, compute_spread,  # noqa: F401
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


def fit_timeslice_key(m, capacity, message_s):
    """cluster.timeslice_us in seconds, on a CPU whose 2 x sharing_ranks probe outnumbers the
    devices: its mean one-way time of 8 bytes (a rare long wait for the scheduler counts)
    against the 2-rank ping-pong's `message_s` (fit.fit_timeslice). None otherwise."""
    n = 2 * m.sharing_ranks
    if not (m.cpu and m.probes.get(n) and n > capacity):
        return None
    return m.per_round(n, lambda p, _: fit_timeslice(message_s, p.message_mean_s, n, capacity))


def fit_codec_keys(m, machine):
    """(compute.kernel_launch_us, compute.codec_gbs): what one OneBitAllreduce call on 2 ranks
    took at two buffer sizes, less what dpsim's link model says its messages take on
    `machine` (a profile), is the codec's (with its error feedback's arithmetic); dpsim
    charges that as kernels (fit.fit_codec)."""
    d = scenario_for(machine, 2, "ring", "1bit")
    d["compute"].update(kernel_launch_us=0.0, codec_gbs=1e12)      # kernels free: messages only
    messages = [fit.collective_seconds(d, 4 * v, "ring", "1bit") for v in m.codec_values]
    kernels = [max(t - msg, 0.0) for t, msg in zip(m.onebit_s, messages)]
    share = dpsim_sharing.ranks_per_device(2, machine["cluster"]["devices_per_node"])
    return fit_codec(m.codec_values, kernels, 2, share)


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


def profile_dict(measured):
    """The dpsim scenario fragment (a dict with the TOML's keys) from calibrate's measurements
    (the sidecar's dict): one fit per group of keys, then the profile laid out once."""
    m = Measurements.from_sidecar(measured)
    peak, e_max, b_half = fit_compute_keys(m)
    capacity = fit_sharing(m)
    mem_bw, node_bw = fit_memory_keys(m, capacity)
    link_gbs, message_s = fit_pingpong(m)
    f = Fitted(peak, e_max, b_half, capacity, mem_bw, node_bw, fit_jitter_key(m), link_gbs, message_s)
    f = replace(f, loop_latency_us=fit_loop_latency(m, layout(m, f)),
                timeslice_s=fit_timeslice_key(m, capacity, message_s))
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
    return keys


def compute_keys(m, f):
    keys = {"efficiency": round(f.efficiency, 6), "half_batch": round(f.half_batch, 3),
            "jitter": round(f.jitter, 4), "overhead_ms": round(m.overhead_s * 1e3, 4)}
    if f.codec is not None:
        launch_us, codec_gbs = f.codec
        keys.update(kernel_launch_us=round(launch_us, 3), codec_gbs=round(codec_gbs, 4))
    return keys


def sync_keys(m, f):
    # mpi_impl's 1-bit makes two MPI calls (signs, scales) per phase where dpsim sends one
    # message: the second call's latency, two hops' worth, is the per-message overhead.
    if f.loop_latency_us is None:
        overhead_us = f.message_s * 1e6
    else:
        overhead_us = 2 * f.loop_latency_us
    return {"message_overhead_us": round(overhead_us, 3), "bucket_mib": 0.0, "overlap": False,
            "busy_poll": m.cpu}


# ------------------------------------------------------------------ the command

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
    warnings = unsteady(m) + [f"{key} disagrees between rounds" for key, _ in noisy_figures(m)]
    if warnings:
        if progress:
            progress(f"the machine changed while measuring ({warnings[0]}): measuring once more")
        again = measured(progress, **kw)
        m = min((m, again), key=lambda x: (len(noisy_figures(x)), compute_spread(x)))
    prof = profile_dict(m)
    spreads = spread.figure_spreads(m, prof, profile_dict, spread.dpsim_allows(scenario_for(prof, 2, "ring", "none")))
    found = spread.noisy(spreads)
    if found and not accept_noisy:
        raise spread.Noisy(spread.verdict(found, m.get("machine_load")))
    m["spread"] = spreads
    banded = spread.with_ranges(prof, spreads)
    write_pair(out, header(m, found) + to_toml(banded), json.dumps(m, indent=1))
    return banded, m


def header(m, found):
    """The profile's comment lines: who wrote it, how busy the machine was, what was accepted."""
    lines = ["written by python -m course calibrate; see course/calibrate.py",
             "{value, low, high}: the fit from all rounds and the 10-90% range of each round's own fit "
             "(course/spread.py)"]
    busy = spread.load_text(m.get("machine_load"))
    if busy:
        lines.append(busy)
    if found:
        lines.append("WARNING: written with --accept-noisy; the rounds disagree on "
                     + ", ".join(key for key, _ in found) + ": predictions from it inherit that moment")
    return "".join(f"# {line}\n" for line in lines)


def write_pair(out, profile_text, sidecar_text):
    """The profile and its sidecar, each under a temporary name until both are complete, then
    renamed one right after the other (dpsim.files.writing): Ctrl-C leaves the old pair."""
    from dpsim.files import writing
    with writing(sidecar(out), flag="-o") as side, writing(out, flag="-o") as profile:
        profile.write(profile_text)
        side.write(sidecar_text)


def summary(prof, measured):
    """What calibrate prints: each measurement and the key it became."""
    m = Measurements.from_sidecar(measured)
    prof = spread.values(prof)
    c, cl, g, link = prof["compute"], prof["cluster"], prof["cluster"]["gpu"], prof["cluster"]["intra"]
    unit = "cores" if m.cpu else "GPUs"
    rounds = len(m.probes[1])
    lines = [f"model {m.model['name']} width {m.model['width']} depth {m.model['depth']}: "
             f"{m.model['params']:,} parameters, {m.model['flops_per_sample']:,} FLOPs per sample (fwd+bwd)",
             f"  peak (matmul)   {g['fp32_tflops'] * 1e3:8.2f} GFLOP/s per device; {m.devices} {unit}",
             *(f"  batch {b:4d}      {t * 1e3:8.3f} ms forward+backward" for b, t in m.sweep),
             f"  fit             e_max {c['efficiency']:.3f}, half_batch {c['half_batch']:.2f} (batch {m.batch}: "
             f"the median of the sweep and {rounds} probes, the sweep scaled to it)",
             f"  SGD update      {m.update_s * 1e3:8.3f} ms -> mem_bw_gbs {g['mem_bw_gbs']:.2f}",
             f"  memory bus      2 ranks updating at once share {cl['node_mem_bw_gbs']:.1f} GB/s "
             f"(one alone: {g['mem_bw_gbs']:.1f}) -> node_mem_bw_gbs",
             f"  2 ranks         the slower computes {c['jitter'] / np.sqrt(np.pi):.1%} longer than the mean "
             f"-> compute.jitter {c['jitter']:.3f}",
             f"  overheads       {c['overhead_ms']:8.3f} ms (gradient / N + take a batch; the median of "
             f"the moments) -> compute.overhead_ms",
             f"  array copy      {m.copy_gbs:8.2f} GB/s -> host_mem_bw_gbs",
             f"  sharing         {m.sharing_ranks} ranks computing at once get {cl['devices_per_node']:.2f} "
             f"{unit}' worth -> devices_per_node",
             f"  link            {link['bandwidth_gbs']:8.3f} GB/s (ping-pong); a message in the loop's rhythm "
             f"costs {2 * link['latency_us']:.0f} us (fitted to the 2-rank ring sync) -> intra, host_link",
             f"  1-bit codec     {c['kernel_launch_us']:.1f} us per kernel, {c['codec_gbs']:.2f} GB/s on the bytes "
             f"its kernels touch -> kernel_launch_us, codec_gbs"]
    if "timeslice_us" in cl:
        lines.append(scheduling_line(m, cl["timeslice_us"]))
    lines.append(f"  (medians of {rounds} rounds of probes)")
    lines += range_lines(measured.get("spread", {}), measured.get("machine_load"))
    for warning in unsteady(measured):
        lines.append(f"warning: the machine changed while calibrating: {warning}; other programs were "
                     f"running? calibrate again when it is quiet, or the predictions inherit this moment")
    return "\n".join(lines)


def range_lines(spreads, load):
    """Each figure's range (10-90% of the rounds' own fits), and the machine's load."""
    lines = ["  ranges (10-90% of each round's own fit; dpsim predicts a band from them):"] if spreads else []
    lines += [f"    {key:32s} {s['value']:.4g} ({s['low']:.4g} - {s['high']:.4g})" for key, s in spreads.items()]
    busy = spread.load_text(load)
    return lines + ([f"  {busy}"] if busy else [])


def scheduling_line(m, timeslice_us):
    n = 2 * m.sharing_ranks
    crowded = m.per_round(n, lambda p, _: p.message_mean_s)
    alone = m.per_round(2, lambda p, _: p.message_mean_s)
    return (f"  scheduling      {n} busy-polling ranks: a message waits "
            f"{(crowded - alone) * 1e6:.0f} us more on average -> timeslice_us {timeslice_us:.0f}")
