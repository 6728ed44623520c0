"""What calibrate measures on this machine, and the typed record its fits read.

`measure()` times the primitives and returns the sidecar: a dict of raw timings that
calibrate writes beside the profile as profile.measured.json. `Measurements.from_sidecar`
reads a sidecar back as the record the fits take (course/calibrate.py), so a profile can be
rebuilt from a stored sidecar without measuring again:

    python -c "import json; from course import calibrate; \\
               print(calibrate.to_toml(calibrate.profile_dict(json.load(open('profile.measured.json')))))"

What is measured (one BLAS thread per process):
  one process   a 1024x1024 matmul (peak FLOP/s); forward + loss + backward at the batches
                of BATCHES and the run's, timed inside the training loop's own sequence,
                with the update, the division by N and taking a batch; a 64 MB copy
  probes        course/probe.py on 1, 2, sharing_ranks and 2 x sharing_ranks ranks at once,
                ROUNDS rounds (a busy moment hits one round of each, not every probe of one
                rank count); the 2-rank probe also times OneBitAllreduce at two buffer sizes
                alone, and the gradient's call in a second block of steps, as training makes it,
                and PowerSGD's products on the model's matrices (course/lowrank.py); a round
                whose ring loop stalled (steady_rounds) is probed once more

The machine drifts from minute to minute, so the 1-rank loop's figures are medians of every
moment calibrate timed them: the one-process sweep, then each round's 1-rank probe.
"""
import statistics
import time
from dataclasses import dataclass

import numpy as np

from course import launch
from course.compare_plan import SETTINGS
from course.fit import line, straggler_s, summarise
from dpsim.sweeps import cores
from mpi_impl import data, nets, pick_device
from mpi_impl.loader import Loader
from mpi_impl.sgd import MomentumSGD

BATCHES = (16, 32, 64, 128)
# The 1-bit codec is timed at two buffer sizes: the model's gradient and an eighth of it, but
# at least 2**20 values, so that the codec's cost per byte stands above the noise of its
# messages (a small model's gradient is too short to show a cost per byte).
CODEC_MIN_VALUES = 1 << 20
# Rounds of probes on 1, 2 and 4 ranks; each figure is the median of the rounds, and its range
# is over them. 19: a run like one more round falls outside the range of the rounds' own
# predictions with probability 2/20, so dpsim's band from them is a 90% prediction interval
# (dpsim/bands.py, samples).
ROUNDS = 19
STALLED = 1.5              # a round's ring loop this many times the rounds' median: probed once more
LOWRANK = SETTINGS["powersgd"][0][2]   # PowerSGD's rank as course compare runs it, for its products


# ------------------------------------------------------------------ timing this machine

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
    batch, runs faster than in the loop."""
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


def sharing_ranks(devices):
    """How many ranks to run at once to see how they share: every core busy (at most 4, so
    that calibrate stays short), or two ranks on one GPU."""
    return max(2, min(devices, 4))


def probe_rounds(ranks, net_args, codec_values, say, rounds=ROUNDS, lowrank=LOWRANK):
    """{str(ranks): [course.probe's JSON per round]}: every rank count once a round. Ranks of
    more than one end each step in a ring sync, the rhythm of training; the 2-rank probe
    also times the 1-bit codec at `codec_values`, alone and, in a second block of steps, as
    training calls it: once a step on the gradient, between backward and the update; and
    PowerSGD's products at rank `lowrank` (course/lowrank.py)."""
    def probe(n):
        codec = codec_values if n == "2" else ()
        syncs = ("ring", "1bit") if n == "2" else ("ring",) if n != "1" else ()
        return launch.probe(int(n), syncs=syncs, codec=codec, steps=32, lowrank=lowrank if n == "2" else 0,
                            **net_args)
    probes = {str(n): [] for n in ranks}
    for r in range(rounds):
        say(f"probing 1, 2, ... ranks at once (round {r + 1} of {rounds})")
        for n in probes:
            probes[n].append(probe(n))
    return steady_rounds(probes, probe, say)


def ring_loop_s(probe):
    """A probe's ring sync per step, its mean: what the loop's latency and time slice are fitted to."""
    return float(np.mean(probe["blocks"]["ring"]["sync_steps_s"]))


def steady_rounds(probes, reprobe, say):
    """The rounds, each stalled one probed once more: a round whose ring loop took more than
    STALLED times the median of its rank count's rounds is replaced by reprobe(ranks). Busy-
    polling ranks that outnumber the cores sometimes fall into a placement where a message
    waits a whole slice for its receiver, for a whole round (on the 2-core machine one 4-rank
    round in ten: 15.1 ms a step against 6.6-7.8 in the others, course/README.md); one such
    round decides the time slice's 10-90% range and so every band. The replacement is kept
    whatever it gives, and each is noted (probe["reprobed"]: what the stalled one took)."""
    for n, rounds in probes.items():
        if len(rounds) < 3 or "ring" not in rounds[0]["blocks"]:
            continue
        middle = float(np.median([ring_loop_s(p) for p in rounds]))
        for r, p in enumerate(rounds):
            if ring_loop_s(p) > STALLED * middle:
                say(f"the {n}-rank ring loop of round {r + 1} took {ring_loop_s(p) * 1e3:.2f} ms a step, "
                    f"over {STALLED}x the rounds' median {middle * 1e3:.2f}: probing it once more")
                rounds[r] = {**reprobe(n), "reprobed": {"ring_loop_s": ring_loop_s(p)}}
    return probes


def measure(model="mlp", width=1024, depth=2, batch=64, batches=BATCHES, reps=40, device="cpu", progress=None,
            rounds=ROUNDS):
    """Every measurement, as a dict (the sidecar JSON). rounds: of probes (at least 2 for a spread)."""
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
    probes = probe_rounds(sorted({1, 2, shared_n, 2 * shared_n}), net_args, (values, max(values // 8, 1)), say, rounds)
    return {
        "model": {"name": model, "width": width, "depth": depth, "params": net.num_params,
                  "layers": len(net.layer_offsets), "flops_per_sample": flops, "matrices": weight_matrices(net)},
        "batch": batch, "device": device, "devices": devices, "cores": cores(), "peak_flops": peak,
        "compute_s": [list(p) for p in points], **parts,
        "copy_gbs": copy_gbs(), "probes": probes, "sharing_ranks": shared_n,
    }


def weight_matrices(net):
    """[rows, columns] of each layer's weight as mpi_impl's PowerSGD takes it (powersgd.matrix_of:
    a convolution's F x C x k x k as F x Ckk; turned to have no more rows than columns, so that
    dpsim's P and Q are the same sizes), forward order, one per layer with parameters: dpsim's
    model.matrices. None if a layer had none or several (no such layer in nets.py)."""
    from mpi_impl.powersgd import matrix_of
    out = []
    for i, _, _ in net.layer_offsets:
        found = [matrix_of(shape) for shape in net.layers[i].param_shapes().values() if matrix_of(shape)]
        if len(found) != 1:
            return None
        out.append(sorted(found[0]))
    return out


# ------------------------------------------------------------------ reading the sidecar

def compute_step(probe):
    """A probe's forward + backward seconds per step, the mean of its ranks."""
    return float(np.mean(summarise([probe])["compute_s"]))


def compute_moments(m):
    """Forward + backward seconds at the run's batch at every moment calibrate measured it:
    the batch sweep, then the 1-rank probe of every round.  One round's own sidecar
    (course.spread.round_sidecar, marked "round") has the round's probe alone: the sweep is
    one moment among 1 + rounds in the profile's median, so it must not be half of each
    round's own fit (that put every round's compute on the sweep's side of the profile's)."""
    sweep = {int(b): t for b, t in m["compute_s"]}
    probes = [compute_step(p) for p in m["probes"]["1"]]
    return probes if own_round(m) else [sweep[m["batch"]]] + probes


def loop_moments(m, figure):
    """figure(parts) at every moment calibrate timed the 1-rank loop's parts: the one-process
    sweep (m itself, at the run's batch), then each round's 1-rank probe (one round's own
    sidecar: its probe alone, as compute_moments)."""
    probes = [figure(summarise([p])) for p in m["probes"]["1"]]
    return probes if own_round(m) else [figure(m)] + probes


def own_round(m):
    """Whether m is one round's own sidecar with a 1-rank probe of its own."""
    return m.get("round") is not None and bool(m["probes"].get("1"))


def loop_figures(m):
    """([(batch, forward+backward seconds)], update seconds) as the fits take them: the figures
    at the run's batch are the medians of the moments (compute_moments, loop_moments), and
    the sweep is scaled to that (a drift is a speed factor on every batch)."""
    sweep = {int(b): t for b, t in m["compute_s"]}
    at_batch = statistics.median(compute_moments(m))
    update_s = statistics.median(loop_moments(m, lambda d: d["update_s"]))
    return [(b, t * at_batch / sweep[m["batch"]]) for b, t in sweep.items()], update_s


def overhead_s(m):
    """Dividing the gradient by N plus taking a batch, per step: the median of the moments
    (the one-process sweep, then every 1-rank probe, which runs under mpiexec as training does)."""
    return statistics.median(loop_moments(m, lambda d: d["load_s"] + d["scale_s"]))


def codec_probe(probes):
    """The 1-bit calls of every round's 2-rank probe as one: per buffer size, the median
    seconds over the rounds (one round alone moves from calibration to calibration)."""
    timed = [p for p in probes if p.get("onebit_s")]
    return {"codec_values": timed[0]["codec_values"],
            "onebit_s": [float(np.median(col)) for col in zip(*(p["onebit_s"] for p in timed))]}


def onebit_in_loop(probe):
    """Seconds of one OneBitAllreduce of the gradient as training calls it (the probe's 1-bit
    block: after backward, before the update, the caches and the ranks' rhythm as training
    leaves them), the wait for the slower rank's compute taken out; None without the block."""
    block = probe["blocks"].get("1bit")
    if not block or not block["sync_steps_s"]:
        return None
    return float(np.mean(block["sync_steps_s"])) - straggler_s(probe, "1bit")


def median_or_none(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def compute_spread(m):
    """Slowest over fastest of the compute moments at the run's batch."""
    moments = compute_moments(m)
    return max(moments) / min(moments)


def unsteady(m, ratio=1.3):
    """Warnings, one line each, where the machine changed while calibrate measured it: the
    moments of compute (the sweep and the 1-rank probes) further apart than `ratio` (on a
    quiet 2-core machine they stay within 1.15), or a batch sweep that does not rise with the
    batch (sweep_shrinks). The link's rounds vary far more even on a quiet machine; its best
    round is taken, so it has no warning."""
    moments, out = compute_moments(m), []
    if max(moments) / min(moments) > ratio:
        out.append(f"compute at batch {m['batch']} took {min(moments) * 1e3:.2f} to {max(moments) * 1e3:.2f} ms "
                   f"at different moments")
    if sweep_shrinks(m):
        out.append("forward+backward did not grow with the batch in the sweep (a busy moment slowed the "
                   "small batches): no rate fits it")
    return out


def sweep_shrinks(m):
    """Whether the batch sweep, a line through the run's batch as calibrate fits it
    (fit.fit_compute), does not rise with the batch: no efficiency above 0 fits it."""
    slope, _ = line(m["compute_s"], anchor=m["batch"])
    return not slope > 0


# ------------------------------------------------------------------ the record

@dataclass(frozen=True)
class Probe:
    """One round's probe of `ranks` ranks at once (course/probe.py's JSON) as the fits read it;
    seconds per step are means over the probe's steps (fit.summarise). The ring and ping-pong
    figures are None for a 1-rank probe, which has neither."""
    ranks: int
    compute_s: list              # forward + backward, per rank
    update_s: float              # the momentum SGD step
    straggler_s: float | None    # the ring block's wait for the slower rank's compute (fit.straggler_s)
    ring_sync_s: float | None    # the ring block's sync, that wait included
    onebit_loop_s: float | None  # the 1-bit block's sync, its wait for the slower rank taken out
    onebit_update_s: float | None  # the 1-bit block's update (right after the codec)
    message_s: float | None      # one-way time of 8 bytes, the median of the round trips
    message_mean_s: float | None  # the same, the mean: it holds the rare long waits for the scheduler
    link_gbs: float | None       # the largest message over its extra time above 8 bytes (best round trip)
    lowrank: list | None = None  # [PowerSGD's rank, seconds of its products] (course/lowrank.py), 2 ranks

    @classmethod
    def from_json(cls, p):
        parts = summarise([p])
        ring = p["blocks"].get("ring")
        sizes, best = p["sizes_bytes"], p["one_way_s"]
        return cls(ranks=p["ranks"], compute_s=parts["compute_s"], update_s=parts["update_s"],
                   straggler_s=straggler_s(p, "ring") if ring else None,
                   ring_sync_s=ring_loop_s(p) if ring else None,
                   onebit_loop_s=onebit_in_loop(p),
                   onebit_update_s=summarise([p], "1bit")["update_s"] if "1bit" in p["blocks"] else None,
                   message_s=p["one_way_median_s"][0] if best else None,
                   message_mean_s=p["one_way_mean_s"][0] if best else None,
                   link_gbs=sizes[-1] / (best[-1] - best[0]) / 1e9 if best else None,
                   lowrank=p.get("lowrank"))

    @property
    def compute_mean_s(self):
        return float(np.mean(self.compute_s))


@dataclass(frozen=True)
class Measurements:
    """What calibrate measured, as its fits take it (from_sidecar reads calibrate's sidecar)."""
    model: dict          # name, width, depth, params, layers, flops_per_sample (forward + backward),
                         # matrices (weight_matrices; absent from a sidecar of before it)
    batch: int           # samples per rank per step
    device: str          # cpu | gpu
    devices: int         # the cores (CPU) or GPUs the ranks share
    cores: int           # os.sched_getaffinity
    peak_flops: float    # a 1024x1024 matmul, one process
    sweep: list          # [(batch, forward + backward seconds)], scaled to the median moment at `batch`
    update_s: float      # the momentum SGD step at `batch`, the median of the moments
    overhead_s: float    # dividing the gradient by N plus taking a batch, the median of the moments
    copy_gbs: float      # a 64 MB array copy
    sharing_ranks: int   # ranks of the sharing probe (sharing_ranks())
    probes: dict         # {ranks: [Probe per round]}, the rounds in order
    codec_values: list   # the buffer sizes (values) at which the 1-bit all-reduce was timed
    onebit_s: list       # one OneBitAllreduce call on 2 ranks per size, the median of the rounds
    onebit_loop_s: float | None = None   # the gradient's call in the training loop (Probe), the median

    @classmethod
    def from_sidecar(cls, m):
        sweep, update = loop_figures(m)
        codec = codec_probe(m["probes"]["2"])
        probes = {int(n): [Probe.from_json(p) for p in rounds] for n, rounds in m["probes"].items()}
        return cls(model=m["model"], batch=m["batch"], device=m.get("device", "cpu"), devices=m["devices"],
                   cores=m["cores"], peak_flops=m["peak_flops"], sweep=sweep, update_s=update,
                   overhead_s=overhead_s(m), copy_gbs=m["copy_gbs"], sharing_ranks=m["sharing_ranks"],
                   probes=probes, codec_values=codec["codec_values"], onebit_s=codec["onebit_s"],
                   onebit_loop_s=median_or_none([p.onebit_loop_s for p in probes[2]]))

    @property
    def cpu(self):
        return self.device == "cpu"

    def per_round(self, ranks, figure):
        """figure(probe of `ranks` ranks, the 1-rank probe of the same round) for every round; their median."""
        return float(np.median([figure(p, one) for p, one in zip(self.probes[ranks], self.probes[1])]))
