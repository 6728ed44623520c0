"""From measured seconds to dpsim scenario keys: the fits calibrate makes.

Each fit inverts one of dpsim's cost formulas for one primitive measurement (never for a
training run that is then compared): dpsim, given the fitted figure, reproduces that
primitive, and its model composes the primitives into every configuration.

  fit_compute    t(b) = F (b + b_half) / (P e_max) is a line in b  -> compute.efficiency, half_batch
  fit_latency    a message's cost inside the loop's rhythm: the latency that makes dpsim's
                 2-rank ring take the ring sync of calibrate's probe (its wait for a slower
                 rank taken out, as mpi_impl.train reports it apart)  -> a link's latency_us
  fit_jitter     the mean wait of 2 ranks for the slower one's compute, against the compute:
                 two draws of a Gaussian of std s differ from their mean by s / sqrt(pi)
                                                                     -> compute.jitter
  fit_capacity   N ranks computing at once, each t_N per step, against one alone (t_1): the
                 devices' worth they get, N t_1 / t_N (dpsim.sharing) -> cluster.devices_per_node
  fit_memory     the update of 2 ranks at once against dpsim's, 20 bytes per parameter at
                 the node's memory bandwidth shared by the busy devices (dpsim.sharing)
                                                                     -> cluster.node_mem_bw_gbs
  fit_timeslice_in_loop  the ring sync of busy-polling ranks that outnumber the devices, in
                 the loop's rhythm: (1 - C/N) x slice / 2 per message (dpsim.sharing)
                                                                     -> cluster.timeslice_us
  fit_timeslice_overhead, fit_shared_jitter  the same probe's compute against the 1-rank
                 probe and dpsim's sharing, and its ranks' wait for the slowest
                                          -> cluster.timeslice_overhead, compute.shared_jitter
  fit_codec      the 1-bit codec's seconds at two buffer sizes against dpsim's kernels
                 (launches x launch + bytes / bandwidth)             -> kernel_launch_us, codec_gbs

collective_seconds is the one place course asks dpsim how long one collective takes.
"""

import math

import numpy as np

from dpsim import sharing
from dpsim.compute import UPDATE_BYTES_PER_PARAM
from dpsim.strategies import onebit


def line(points, anchor=None):
    """(slope, intercept) of [(batch, seconds)]: least squares, or through the anchor's point."""
    b = np.array([p[0] for p in points], float)
    t = np.array([p[1] for p in points], float)
    if anchor is None:
        k, a = np.polyfit(b, t, 1)
        return float(k), float(a)
    t0 = t[b == anchor][0]
    k = float(np.sum((b - anchor) * (t - t0)) / np.sum((b - anchor) ** 2))
    return k, t0 - k * anchor


def fit_compute(points, flops_per_sample, peak_flops, anchor=None):
    """(e_max, b_half) from [(batch, seconds)] under t(b) = F (b + b_half) / (P e_max), a line
    a + k b. anchor: a batch among the points through which the line must pass exactly (the
    batch the runs use), the slope then fitted to the others."""
    k, a = line(points, anchor)
    e_max = flops_per_sample / (peak_flops * k)
    return float(e_max), float(max(a / k, 0.0))


def fit_latency(d, ring_s):
    """Link latency (us per hop) that makes dpsim's ring sync of scenario d take ring_s: what a
    message costs inside the training loop's rhythm (dpsim's ring is linear in it)."""
    nbytes = 4 * d["model"]["params"]                  # the fp32 gradient, one bucket

    def at(lat):
        links = {key: dict(d["cluster"][key], latency_us=lat) for key in ("intra", "host_link")}
        return collective_seconds({**d, "cluster": {**d["cluster"], **links}}, nbytes, "ring")
    t0, t1 = at(0.0), at(100.0)
    return max(100.0 * (ring_s - t0) / (t1 - t0), 0.0)


def straggler_s(probe, block):
    """The mean over a probe's steps of (slowest rank's compute - mean rank's): the part of a
    measured sync that waited for a slower rank (mpi_impl.train calls it straggler_wait)."""
    c = np.array(probe["blocks"][block]["steps_s"]["compute"], float)      # [rank][step]
    return float(np.mean(c.max(axis=0) - c.mean(axis=0)))


def fit_jitter(wait_s, compute_s):
    """compute.jitter (dpsim draws each rank's compute as t (1 + jitter z), z ~ N(0, 1), every
    iteration) from 2 ranks: the slower of two draws exceeds their mean by E|z1 - z2| / 2 =
    1 / sqrt(pi) standard deviations, so jitter = sqrt(pi) x wait / compute."""
    return float(np.sqrt(np.pi) * max(wait_s, 0.0) / compute_s)


def expected_max_normal(n):
    """E[max of n independent N(0, 1)] = the integral of x n phi(x) Phi(x)^(n-1), numerically:
    1/sqrt(pi) for 2 (the closed form fit_jitter uses), 1.0294 for 4 (Tippett's tables,
    Biometrika 17, 1925)."""
    x = np.linspace(-12.0, 12.0, 48_001)
    phi = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = 0.5 * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))
    return float(np.sum(x * n * phi * cdf ** (n - 1)) * (x[1] - x[0]))


def fit_shared_jitter(wait_s, compute_s, ranks):
    """compute.shared_jitter from a probe whose `ranks` ranks all share devices: the slowest
    of n draws t (1 + j z) exceeds their mean by j t E[max of n z] (expected_max_normal)."""
    return float(max(wait_s, 0.0) / compute_s / expected_max_normal(ranks))


def fit_timeslice_overhead(alone_s, together_s, factors, shared):
    """cluster.timeslice_overhead: how much slower than dpsim's processor sharing the ranks that
    share a device computed (together_s[r] against alone_s x factors[r], dpsim.sharing), the
    mean over those ranks; at least 0."""
    ratios = [t / (alone_s * f) for t, f, s in zip(together_s, factors, shared) if s]
    return max(float(np.mean(ratios)) - 1.0, 0.0) if ratios else 0.0


def fit_capacity(alone_s, together_s, devices):
    """Devices' worth that N ranks computing at once get: each rank's step takes
    together_s[r] where one rank alone takes alone_s. N ranks on C devices run each at C/N
    speed (dpsim.sharing), so C = N alone / mean(together); at most N, and, when fewer ranks
    than devices were run, the per-device figure is extended to all of them."""
    n = len(together_s)
    worth = min(n, n * alone_s / float(np.mean(together_s)))
    return worth * devices / n if n < devices else worth


def fit_memory(update_s, params, ranks, capacity):
    """cluster.node_mem_bw_gbs from the update seconds of `ranks` ranks updating at once on
    `capacity` devices' worth: each busy device got 20 bytes x params / update_s of it (its
    time-slicing, dpsim.sharing.rank_factors, taken out), the node all of them together."""
    slowest = sharing.ranks_per_device(ranks, capacity)
    busy = min(ranks, int(np.ceil(capacity)))
    return float(busy * params * UPDATE_BYTES_PER_PARAM * slowest / update_s / 1e9)


def fit_timeslice_in_loop(d, ring_s):
    """The slice (us) that makes dpsim's ring sync of scenario d (busy-polling ranks that
    outnumber the devices) take ring_s: what a message waits for its receiver inside the
    training loop's rhythm, where the receiver's core-mate is itself at work (dpsim's ring is
    linear in the slice: (1 - C/N) slice / 2 per message, dpsim.sharing.wakeup_s)."""
    nbytes = 4 * d["model"]["params"]

    def at(slice_us):
        return collective_seconds({**d, "cluster": {**d["cluster"], "timeslice_us": slice_us}}, nbytes, "ring")
    t0, t1 = at(1.0), at(1001.0)
    return max(1.0 + 1000.0 * (ring_s - t0) / (t1 - t0), 1.0) if t1 > t0 else None


def fit_update_after_codec(plain_s, after_codec_s):
    """compute.update_after_codec: how much slower the same update ran after the 1-bit sync
    than after the ring's (its arrays evicted by the codec); never below 0."""
    return max(after_codec_s / plain_s - 1.0, 0.0)


def fit_codec(values, seconds, ranks, share=1.0):
    """(kernel_launch_us, codec_gbs) from the codec's seconds per 1-bit exchange of each buffer
    size in `values` (two or more) on `ranks` ranks, which dpsim charges as
    launches x launch + bytes / bandwidth (dpsim/strategies/onebit.py: kernels), times the
    ranks' sharing of their devices."""
    launches, per_value = onebit.codec_cost(1.0, ranks)
    t = np.array(seconds, float) / share
    size = np.array(values, float) * per_value                 # bytes the kernels touch
    slope, intercept = np.polyfit(size, t, 1)                   # t = launches x L + bytes x (1/bw)
    if intercept < 0:                               # noise: no launch cost to speak of
        slope, intercept = float(np.sum(t * size) / np.sum(size ** 2)), 0.0
    if slope <= 0:                                  # noise: no cost per byte to speak of (0 = memory speed)
        return float(np.mean(t) / launches * 1e6), 0.0
    return float(intercept / launches * 1e6), float(1 / slope / 1e9)


# ------------------------------------------------------------------ dpsim's side

def collective_seconds(scenario, nbytes, algorithm, compression="none"):
    """Seconds dpsim gives one gradient synchronisation of `nbytes` (fp32 values) by
    `algorithm` on the machine of `scenario` (a dict), nothing else running
    (dpsim.collective_time). Every fit that reads a collective's time from dpsim (fit_latency,
    calibrate's codec fit) goes through here."""
    import dpsim
    d = {**scenario, "sync": {**scenario.get("sync", {}), "compression": compression}}
    return dpsim.collective_time(d, nbytes, algorithm)


# ------------------------------------------------------------------ probes

def block_for(ranks, compress):
    """The probe block whose rhythm a run has: its own 1-bit sync, else the ring's (ps and
    the other full-precision syncs are not probed; the ring stands in for their rhythm)."""
    return "none" if ranks == 1 else ("1bit" if compress == "1bit" else "ring")


def summarise(probes, block=None):
    """Pool probes of one rank count (course/probe.py's JSON) into mean seconds per part,
    taken from the steps of `block` (default: the first): compute per rank, one figure for
    the rest; every block's sync; the best ping-pong of all. Means, not medians: a run's
    iteration time is a mean over its steps, rare slow steps included."""
    block = block if block in probes[0]["blocks"] else next(iter(probes[0]["blocks"]))
    ours = [p["blocks"][block] for p in probes]

    def steps(part):                                   # [rank][step], all probes' steps in a row
        return [sum((b["steps_s"][part][r] for b in ours), []) for r in range(probes[0]["ranks"])]
    compute = np.array(steps("compute"), float)
    out = {"ranks": probes[0]["ranks"], "block": block, "probes": len(probes), "steps": compute.shape[1],
           "compute_s": compute.mean(axis=1).tolist(),
           **{f"{part}_s": float(np.mean(steps(part))) for part in ("update", "load", "scale")},
           "sync_s": {}, "codec_s": None, "sizes_bytes": probes[0]["sizes_bytes"], "one_way_s": []}
    for algo in probes[0]["blocks"]:
        sync = sum((p["blocks"][algo]["sync_steps_s"] for p in probes), [])
        if sync:
            out["sync_s"][algo] = float(np.mean(sync))
    codec = sum((p["blocks"].get("1bit", {}).get("codec_steps_s", []) for p in probes), [])
    if codec:
        out["codec_s"] = float(np.mean(codec))
    if probes[0]["one_way_s"]:
        out["one_way_s"] = np.min([p["one_way_s"] for p in probes], axis=0).tolist()
    return out
