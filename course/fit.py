"""From measured seconds to dpsim scenario keys: the fits that calibrate and compare share.

Each fit inverts one of dpsim's cost formulas, so that dpsim, given the fitted figure,
reproduces the measured part; dpsim's model then composes the parts (and predicts the
strategies and rank counts that were not measured).

  fit_compute   t(b) = F (b + b_half) / (P e_max) is a line in b   -> compute.efficiency, half_batch
  fit_link      one-way ping-pong times: latency, 1 / slope          -> a link's latency_us, bandwidth_gbs
  fit_latency   the link latency that makes dpsim's ring sync take the measured time
  fit_launch    the kernel launch cost that makes dpsim's 1-bit sync take the measured time
  apply_probe   a probe's parts (course/probe.py) on N ranks onto a scenario for N ranks:
                  compute   gpu_speed = dpsim's compute time / the ranks' mean measured time
                            (ranks sharing cores compute slower), the same for every rank:
                            the wait for the slowest rank of each step is part of the measured
                            sync, as in mpi_impl.train's exposed communication
                  scale     the division of the summed gradient by N and taking the next
                  + load    batch from memory, which dpsim does not model (its synthetic data
                            costs nothing; a loader would add a host-to-device copy that the
                            CPU does not make), as compute.overhead_ms
                  update    cluster.gpu.mem_bw_gbs = 20 bytes x params / time
                  link      bandwidth from the ping-pong; latency fitted to the ring sync
                  1-bit     kernel_launch_us fitted to the 1-bit sync
"""
import copy

import numpy as np

from dpsim import compute as dpsim_compute


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


def _sync_time(d, **changes):
    """dpsim's sync_time_s for scenario d with some sections' keys changed."""
    import dpsim
    probe = copy.deepcopy(d)
    for section, keys in changes.items():
        for key, value in keys.items():
            if isinstance(value, dict):
                probe[section][key] = dict(probe[section][key], **value)
            else:
                probe[section][key] = value
    return dpsim.simulate(probe).sync_time_s


def fit_latency(d, ring_s):
    """Link latency (us) that makes dpsim's ring sync of scenario d take ring_s (linear in it)."""
    def at(lat):
        return _sync_time(d, sync={"strategy": "ring", "compression": "none"},
                          cluster={"intra": {"latency_us": lat}, "host_link": {"latency_us": lat}})
    t0, t1 = at(0.0), at(100.0)
    return round(max(100.0 * (ring_s - t0) / (t1 - t0), 0.0), 3)


def fit_launch(d, onebit_s):
    """kernel_launch_us that makes dpsim's 1-bit sync of scenario d take onebit_s (linear in it)."""
    t0, t1 = (_sync_time(d, sync={"compression": "1bit"}, compute={"kernel_launch_us": x}) for x in (0.0, 1.0))
    return round(max((onebit_s - t0) / (t1 - t0), 0.0), 3)


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


def apply_probe(d, s, compress="none"):
    """Put a probe summary `s` (summarise, of the block the run's sync sets the rhythm of:
    block_for) for d's rank count onto scenario dict d, in place."""
    c, comp, m = d["cluster"], d["compute"], d["model"]
    ranks, batch = s["ranks"], d["training"]["batch_per_gpu"]
    extra = s["scale_s"] + s["load_s"]
    device_s = dpsim_compute.compute_time_s(m["flops_per_sample"], batch, c["gpu"]["fp32_tflops"],
                                            comp["efficiency"], comp["half_batch"]) + extra
    comp["overhead_ms"] = round(extra * 1e3, 4)
    c["gpu_speed"] = [round(device_s / (np.mean(s["compute_s"]) + extra), 6)] * ranks
    c["gpu"] = dict(c["gpu"], mem_bw_gbs=round(20 * m["params"] / s["update_s"] / 1e9, 4))
    if ranks > 1 and s["one_way_s"]:
        bw, lat = fit_link(s["sizes_bytes"], s["one_way_s"])
        for key in ("intra", "host_link"):
            c[key] = dict(c[key], bandwidth_gbs=round(bw, 4), latency_us=round(lat / 2, 3))
        if "ring" in s["sync_s"]:
            lat = fit_latency(d, s["sync_s"]["ring"])
            for key in ("intra", "host_link"):
                c[key] = dict(c[key], latency_us=lat, source=f"fitted to the ring sync on {ranks} ranks")
        if compress == "1bit" and "1bit" in s["sync_s"]:
            comp["kernel_launch_us"] = fit_launch(d, s["sync_s"]["1bit"])
    return d
