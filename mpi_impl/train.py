"""Data-parallel training with hand-written collectives, measured phase by phase.

    mpiexec -n 4 python -m mpi_impl.train --data digits --model mlp --sync ring
    mpiexec -n 4 python -m mpi_impl.train --data digits --compress 1bit --warmup-samples 5000
    mpiexec -n 2 python -m mpi_impl.train --model cnn --width 16 --overlap --bucket-mib 0.01 \\
        --json run.json --trace trace.json

Every rank holds a full copy of the model and trains on its own shard of the data. One
training step on every rank:

    1. load       take the next batch of this rank's shard (from the loader's queue, or
                  decoded right here with --loader-workers 0)
    2. compute    forward, loss, backward: the gradient of this rank's batch_per_rank samples
    3. sync       grads <- all-reduce(grads) / N   (--sync, --compress, --overlap)
    4. update     momentum SGD step, identical on every rank

so N ranks with b samples each do the same as one process with batch N*b.

What --overlap means (details in mpi_impl/sgd.py): the gradient is cut into buckets of
whole layers (--bucket-mib, in MiB as dpsim's sync.bucket_mib), and each bucket's
all-reduce starts as soon as backward has produced it. With --sync mpi on the CPU that is
MPI's non-blocking Iallreduce; with the other algorithms, or --compress 1bit, a
communication thread runs the blocking algorithm on each bucket while the main thread goes
on with backward (real concurrency needs a free core for that thread). Without --overlap:
one all-reduce after backward.

Rank 0 prints one line per epoch; --json writes the result, --trace a Chrome trace with one
process per rank. --checkpoint DIR saves every rank's state after every epoch, in a step all
ranks take together (mpi_impl/checkpoint.py): two generations per rank, so a rank killed
while saving costs one epoch; --resume continues from the newest epoch that every rank has.
Weights that became NaN or inf are never saved: the run stops with one line and exit code 1.
--stall-timeout S ends the whole job (MPI Abort, one line naming the rank and the phase it
waited in) when a rank makes no progress for S seconds, as happens to every other rank when
one is stopped or hung: they wait in the all-reduce forever (mpi_impl/watchdog.py).

The JSON's top level follows the simulator's result contract: iteration_time_s,
throughput_samples_per_s, bytes_sent_per_gpu, and breakdown_s, seconds per iteration with
the keys dpsim.vocabulary.BREAKDOWN + (vocabulary.OTHER,), which add up to iteration_time_s:

  compute         forward + loss + backward, the mean over ranks
  data_wait       the loop waiting for the next batch
  exposed_comm    the loop's wait for the averaged gradient after backward, less the
                  two parts below
  compression     the encode/decode seconds within that wait: each step's wait is split
                  with vocabulary.split_sync_wait(wait, codec seconds of the step)
  straggler_wait  the mean over steps of (slowest rank's compute - mean rank's compute),
                  from every rank's per-step compute seconds, gathered at the epoch's end;
                  a rank's wait for the sync includes waiting for the slowest rank, so it
                  is taken out of that rank's exposed_comm (never more than all of it)
  update          the momentum SGD step
  other           the rest of the loop's time (Python between the parts)

(meanings as in vocabulary.MEANING). work_s, seconds per iteration, holds amounts of work
that may hide behind those parts: load (producing batches, also by loader threads),
communication (the all-reduce work, wherever it ran), codec (1-bit encode/decode work).
Both are taken over the epochs after the first (which pays one-time costs) when there are
several. Each entry of "epochs" has the same two dicts as totals in seconds for that epoch,
the mean over ranks (breakdown_s adds up to its time_s, the mean over ranks of the loop's
time), and per rank (breakdown_s_per_rank, work_s_per_rank).
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from dpsim.vocabulary import BREAKDOWN, MIB, OTHER
from mpi4py import MPI

import mpi_impl
from mpi_impl import checkpoint, data, nets
from mpi_impl.device import pick_device
from mpi_impl.errors import Parser, UsageError, abort_job, algorithm_name, usage_errors
from mpi_impl.loader import Loader
from mpi_impl.sgd import GradientAverager, MomentumSGD
from mpi_impl.timeline import WORK, Timeline, write_chrome_trace
from mpi_impl.watchdog import Watchdog

PROG = "mpi_impl.train"


# ----------------------------------------------------------------------------- command line

def _number(kind, low, inclusive):
    """An argparse type: a `kind` number >= low (> low unless `inclusive`); never NaN or
    infinite, each refused in one line."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < low or (value == low and not inclusive):
            bound = f">= {low}" if inclusive else f"> {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value
    return parse


positive_int = _number(int, 0, inclusive=False)
count = _number(int, 0, inclusive=True)
positive_float = _number(float, 0, inclusive=False)
nonnegative_float = _number(float, 0, inclusive=True)


def build_parser():
    p = Parser(prog=PROG, description="Synchronous data-parallel SGD (and 1-bit SGD) under mpiexec.",
               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("model")
    m.add_argument("--model", choices=("mlp", "cnn"), default="mlp", help="the network (mpi_impl/nets.py)")
    m.add_argument("--width", type=positive_int, default=64,
                   help="mlp: hidden units per layer; cnn: channels of the first conv")
    m.add_argument("--depth", type=positive_int, default=1, help="mlp: hidden layers")
    m.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="parameters and gradients")
    d = p.add_argument_group("data")
    d.add_argument("--data", choices=data.SOURCES, default="synthetic", help="the training set (mpi_impl/data.py)")
    d.add_argument("--data-dir", help="cifar10: folder with data_batch_*.bin")
    d.add_argument("--samples", type=positive_int,
                   help="training samples (synthetic: how many to make, default 16384; others: a cap)")
    d.add_argument("--loader-workers", type=count, default=0,
                   help="background loader threads; 0 loads inside the training loop")
    d.add_argument("--prefetch", type=positive_int, default=2, help="batches queued per loader worker")
    d.add_argument("--decode-ms", type=nonnegative_float, default=0.0,
                   help="busy CPU work per sample, standing in for JPEG decoding")
    t = p.add_argument_group("training")
    t.add_argument("--batch-per-rank", type=positive_int, default=32, help="samples per rank per step")
    t.add_argument("--epochs", type=positive_int, default=5, help="the first is not counted in the timings")
    t.add_argument("--lr", type=positive_float, default=0.05, help="learning rate")
    t.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum")
    t.add_argument("--seed", type=count, default=0, help="weights, data and shuffling")
    t.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: CuPy, a GPU per local rank")
    t.add_argument("--stall-timeout", type=nonnegative_float, default=120.0, metavar="SECONDS",
                   help="end the whole job if a rank makes no progress for this long (some rank "
                        "stalled or dead: the others would wait in the all-reduce forever); 0 = never")
    s = p.add_argument_group("gradient synchronisation")
    s.add_argument("--sync", choices=mpi_impl.ALGORITHMS, type=algorithm_name(mpi_impl.ALGORITHMS),
                   default="ring", help="the all-reduce algorithm (mpi_impl/README.md)")
    s.add_argument("--compress", choices=("none", "1bit"), default="none", help="1bit: 1-bit SGD with error feedback")
    s.add_argument("--no-error-feedback", action="store_true",
                   help="1bit: drop the quantisation error instead of carrying it to the next step")
    s.add_argument("--warmup-samples", type=count, default=0,
                   help="1bit: full-precision sync until this many samples are trained globally (CNTK's -a)")
    s.add_argument("--overlap", action="store_true",
                   help="all-reduce gradient buckets while backward still runs: MPI's "
                        "Iallreduce for --sync mpi on the CPU, a communication thread running "
                        "the blocking algorithm otherwise (see mpi_impl/sgd.py)")
    s.add_argument("--bucket-mib", type=nonnegative_float, default=25.0,
                   help="bucket size for --overlap in MiB (2**20 bytes); 0 = one bucket")
    s.add_argument("--bucket-mb", action=Renamed, new="--bucket-mib",
                   why=f"bucket sizes are in MiB ({MIB} bytes) here and in dpsim")
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="FILE", help="write metrics and time breakdown as JSON")
    o.add_argument("--trace", metavar="FILE", help="write a Chrome trace (one process per rank)")
    o.add_argument("--checkpoint", metavar="DIR",
                   help="save a checkpoint here after every epoch (two generations per rank; "
                        "a run stops, exit 1, rather than save NaN or inf weights)")
    o.add_argument("--resume", action="store_true",
                   help="continue from the newest epoch that every rank has in --checkpoint DIR")
    return p


class Renamed(argparse.Action):
    """An option that has a new name: using it is a one-line usage error naming the new one."""

    def __init__(self, option_strings, dest, new, why, **kwargs):
        super().__init__(option_strings, argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)
        self.new, self.why = new, why

    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError(f"{option_string} is now {self.new}: {self.why}")


def parse_args(argv, size):
    """Parse and check everything that can be checked without data or other ranks."""
    args = build_parser().parse_args(argv)
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint DIR")
    check_output_paths(args)
    if args.sync == "nccl" and args.device != "gpu":
        cpu = ", ".join(a for a in mpi_impl.ALGORITHMS if a != "nccl")
        raise UsageError(f"--sync nccl runs on NVIDIA GPUs: add --device gpu, or pick --sync from {cpu}")
    if args.device == "gpu":
        try:
            import cupy  # noqa: F401
        except ImportError:
            raise UsageError("--device gpu needs CuPy: pip install cupy-cuda12x (or use --device cpu)") from None
    return args


def check_output_paths(args):
    """Refuse, before any training, output paths that could not be written at the end:
    --json and --trace must name a file, not a directory, in a directory that exists;
    --checkpoint must not be a file.  (dpsim.errors.check_output_path is the simulator's
    twin; mpi_impl imports nothing of dpsim but its vocabulary.)"""
    for option in ("json", "trace"):
        value = getattr(args, option)
        if value is None:
            continue
        if "\x00" in value:
            raise UsageError(f"--{option}: {value!r} contains a NUL byte; no file can have that name")
        path = Path(value)
        if path.is_dir():
            raise UsageError(f"--{option}: {value!r} is a directory; give a file name")
        if not path.parent.is_dir():
            raise UsageError(f"--{option}: no directory to write {value!r} into")
    if args.checkpoint and "\x00" in args.checkpoint:
        raise UsageError(f"--checkpoint {args.checkpoint!r} contains a NUL byte")
    if args.checkpoint and Path(args.checkpoint).exists() and not Path(args.checkpoint).is_dir():
        raise UsageError(f"--checkpoint {args.checkpoint} is a file; give a directory")


def load_data(args, size):
    """(train, test) data sets, after checking that every rank gets at least one batch."""
    try:
        train_set, test_set = data.load(args.data, samples=args.samples, data_dir=args.data_dir,
                                        seed=args.seed)
    except data.DataError as error:
        raise UsageError(str(error)) from None
    n = len(train_set)
    if size > n:
        raise UsageError(f"{size} ranks but --data {args.data} has only {n} training samples; "
                         f"use at most {n} ranks")
    per_rank = n // size
    if args.batch_per_rank > per_rank:
        raise UsageError(f"--batch-per-rank {args.batch_per_rank} is larger than each rank's shard "
                         f"({n} training samples / {size} ranks = {per_rank}); use at most {per_rank}")
    if args.model == "cnn" and (train_set.shape[1] % 4 or train_set.shape[2] % 4):
        raise UsageError(f"--model cnn needs image sides divisible by 4, got {train_set.shape}")
    return train_set, test_set


# ----------------------------------------------------------------------------- set-up

def weights_digest(net):
    return hashlib.sha256(checkpoint.to_numpy(net.params).tobytes()).hexdigest()


CHECKPOINT_KEYS = ("model", "width", "depth", "dtype", "data", "samples", "batch_per_rank",
                   "seed", "compress", "overlap", "bucket_mib")

#: exit code of a run whose weights became NaN or inf (2 is a bad command line)
DIVERGED_EXIT = 1


class Diverged(Exception):
    """Some rank's weights or optimizer state became NaN or inf.  Every rank raises it alike
    (the verdict is all-reduced); main prints it as one line and exits with DIVERGED_EXIT."""


def save_checkpoint(args, comm, net, opt, averager, rng, epoch, samples_trained, history, kept):
    """Checkpoint the state after `epoch` in one coordinated step (mpi_impl/checkpoint.py).

    If any rank's weights, momentum or 1-bit residuals hold a NaN or inf, no rank writes
    anything and every rank raises Diverged.  Otherwise every rank writes its file (atomic),
    waits until all ranks have, then deletes its generations other than `epoch` and `kept`
    (the checkpoint before this one, saved or resumed from; None if there is none), so that
    at every moment each rank holds an epoch that all ranks hold."""
    arrays = {"params": net.params, "velocity": opt.velocity, **averager.state()}
    finite = all(bool(net.xp.isfinite(a).all()) for a in arrays.values())
    if not comm.allreduce(int(finite), op=MPI.MIN):
        kept_text = ("no checkpoint was saved" if kept is None
                     else f"the checkpoint of epoch {kept} is kept")
        raise Diverged(f"weights are not finite after epoch {epoch} (diverged: try a smaller "
                       f"--lr); {kept_text}")
    meta = {"epoch": epoch, "samples_trained": samples_trained, "ranks": comm.Get_size(),
            "rng": rng.bit_generator.state, "history": history,
            "config": {k: getattr(args, k) for k in CHECKPOINT_KEYS}}
    checkpoint.save(args.checkpoint, comm.Get_rank(), epoch, arrays, meta)
    comm.Barrier()                               # every rank has `epoch` now
    checkpoint.prune(args.checkpoint, comm.Get_rank(), keep={epoch, kept})


def _agree(comm, problem, hint=""):
    """Collective: raise the same UsageError on every rank if any rank has a `problem` (the
    lowest such rank's message, plus `hint`)."""
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        raise UsageError(problems[0] + hint)


def list_checkpoints(args, comm):
    """Collective: ({epoch: path} of this rank's checkpoints, [sorted epochs of each rank])."""
    try:
        found, problem = checkpoint.generations(args.checkpoint, comm.Get_rank()), None
    except checkpoint.CheckpointError as error:
        found, problem = {}, str(error)
    _agree(comm, problem, "; delete it to go on")
    return found, comm.allgather(sorted(found))


def _state_shapes(net, opt, averager):
    """{array name: (shape, dtype)} of what a checkpoint of this run holds, and the names
    that may be missing (1-bit residuals exist after the first compressed step)."""
    shapes = {"params": (net.params.shape, net.params.dtype),
              "velocity": (opt.velocity.shape, opt.velocity.dtype)}
    residuals = []
    for b, (onebit, (lo, hi)) in enumerate(zip(averager.onebit or [], averager.buckets)):
        worker, server = onebit.residual_sizes(hi - lo)
        shapes[f"worker_residual_{b}"] = ((worker,), net.grads.dtype)
        shapes[f"server_residual_{b}"] = ((server,), net.grads.dtype)
        residuals += [f"worker_residual_{b}", f"server_residual_{b}"]
    return shapes, residuals


def check_resumable(args, comm, path, arrays, meta, epoch, steps, shapes, optional):
    """Raise CheckpointError (one line naming `path`) unless this rank's checkpoint was
    written by a run with the same settings and fits this model: ranks and the settings of
    CHECKPOINT_KEYS equal, arrays as checkpoint.check wants them, 1-bit residuals in pairs,
    samples_trained = epoch x the samples of an epoch, an RNG state this RNG takes, and a
    history (rank 0: one entry per epoch)."""
    config = meta.get("config")
    if not isinstance(config, dict):
        raise checkpoint.CheckpointError(f"{path}: its meta has no config")
    if "bucket_mb" in config:
        raise checkpoint.CheckpointError(
            f"cannot resume from {path}: it was written when bucket sizes were in MB "
            f"(bucket_mb), they are in MiB now (--bucket-mib); delete it to start again")
    wanted = {k: getattr(args, k) for k in CHECKPOINT_KEYS}
    changed = sorted(k for k in CHECKPOINT_KEYS if config.get(k) != wanted[k])
    if meta.get("ranks") != comm.Get_size() or changed:
        what = ", ".join(f"--{k.replace('_', '-')}" for k in changed) or "the number of ranks"
        raise checkpoint.CheckpointError(f"cannot resume from {path}: {what} differ from the "
                                         f"run that wrote it")
    checkpoint.check(path, arrays, meta, epoch=epoch, max_epoch=args.epochs, shapes=shapes,
                     optional=optional)
    for worker in (name for name in optional if name.startswith("worker_")):
        server = worker.replace("worker_", "server_")
        if (worker in arrays) != (server in arrays):
            raise checkpoint.CheckpointError(f"{path}: {worker} and {server} come in pairs, "
                                             f"it has one of them")
    expected = epoch * steps * args.batch_per_rank * comm.Get_size()
    if meta.get("samples_trained") != expected:
        raise checkpoint.CheckpointError(f"{path}: samples_trained is "
                                         f"{meta.get('samples_trained')!r}, epoch {epoch} of "
                                         f"this run means {expected}")
    try:
        np.random.default_rng().bit_generator.state = meta.get("rng")
    except (TypeError, ValueError, KeyError, AttributeError):
        raise checkpoint.CheckpointError(f"{path}: its RNG state is not a PCG64 state") from None
    history = meta.get("history")
    if not isinstance(history, list) or not all(isinstance(h, dict) for h in history) or \
            (comm.Get_rank() == 0 and len(history) != epoch):
        raise checkpoint.CheckpointError(f"{path}: its history is not one record per epoch")


def restore_checkpoint(args, comm, net, opt, averager, rng, steps):
    """Collective: load the newest epoch that every rank has in --checkpoint DIR; returns
    (epoch, samples_trained, history), or (0, 0, []) when DIR holds no checkpoint.

    Every rank raises the same UsageError, one line naming the file, when the ranks hold no
    epoch in common, or when some rank's file of that epoch is not a readable checkpoint or
    does not fit this run (check_resumable)."""
    rank = comm.Get_rank()
    found, per_rank = list_checkpoints(args, comm)
    if not any(per_rank):
        if rank == 0:
            print(f"no checkpoint in {args.checkpoint}; starting from epoch 1", flush=True)
        return 0, 0, []
    epoch = checkpoint.newest_common(per_rank)
    if epoch is None:
        raise UsageError(f"no epoch is checkpointed by every rank in {args.checkpoint} (epochs "
                         f"per rank: {per_rank}); delete them to start again")
    path, problem = found[epoch], None
    try:
        try:
            arrays, meta = checkpoint.read(path)
        except checkpoint.CheckpointError as error:
            raise checkpoint.CheckpointError(f"{error}; delete it to resume from an older "
                                             f"checkpoint") from None
        shapes, optional = _state_shapes(net, opt, averager)
        check_resumable(args, comm, path, arrays, meta, epoch, steps, shapes, optional)
    except checkpoint.CheckpointError as error:
        problem = str(error)
    _agree(comm, problem)
    net.params[...] = net.xp.asarray(arrays["params"])
    opt.velocity[...] = net.xp.asarray(arrays["velocity"])
    averager.load_state(arrays)
    rng.bit_generator.state = meta["rng"]
    if rank == 0 and epoch < max(max(e) for e in per_rank if e):
        print(f"resuming from epoch {epoch}, the newest that every rank has (epochs per rank: "
              f"{per_rank})", flush=True)
    return epoch, meta["samples_trained"], meta["history"]


def refuse_to_overwrite(args, comm):
    """Collective: a run without --resume must not replace checkpoints (it would start again
    from epoch 1 and prune them): UsageError on every rank if --checkpoint DIR holds any."""
    _, per_rank = list_checkpoints(args, comm)
    if any(per_rank):
        raise UsageError(f"--checkpoint {args.checkpoint} already holds checkpoints (epochs per "
                         f"rank: {per_rank}): add --resume to continue, or delete them to start again")


# ----------------------------------------------------------------------------- the loop

@dataclass
class Replica:
    """This rank's copy of the model, what trains it, and its counters."""
    net: nets.Net
    opt: MomentumSGD
    averager: GradientAverager
    loader: Loader
    tl: Timeline
    rank: int
    size: int
    watchdog: Watchdog                 # petted at every phase of a step
    steps_done: int = 0                # training steps taken by this process
    samples_trained: int = 0           # by all ranks together, since the very start
    progress_bar: bool = False


def run_epoch(epoch, order, args, r):
    """One pass over this rank's shard (in `order`); returns this rank's (loss sum,
    correct, samples, [compute seconds of each step])."""
    net, tl, xp, pet = r.net, r.tl, r.net.xp, r.watchdog.pet
    steps = len(order) // args.batch_per_rank
    loss_sum, correct, next_bar = 0.0, 0, 0.0
    compute_s = []
    batches = r.loader.epoch(order)
    for step in range(steps):
        r.steps_done += 1

        # 1. load
        pet("loading", epoch + 1, step + 1)
        with tl.span("next batch", phase="data_wait"):
            x, y = next(batches)
            x, y = xp.asarray(x), xp.asarray(y)

        # 2. compute (with --overlap, backward starts bucket all-reduces as it goes)
        pet("compute", epoch + 1, step + 1)
        r.averager.begin(compressed=r.samples_trained >= args.warmup_samples)
        with tl.span("forward + backward", phase="compute") as compute:
            logits = net.forward(x)
            loss, dlogits, ok = nets.softmax_cross_entropy(logits, y)
            net.backward(dlogits, on_grads_ready=r.averager.ready)
        compute_s.append(compute.seconds)

        # 3. sync: grads <- all-reduce(grads) / N (the wait: exposed_comm and compression)
        pet("sync", epoch + 1, step + 1)
        r.averager.finish()

        # 4. update
        pet("update", epoch + 1, step + 1)
        with tl.span("sgd step", phase="update"):
            r.opt.step()

        r.samples_trained += args.batch_per_rank * r.size
        loss_sum = loss_sum + loss * len(y)
        correct = correct + ok
        if r.progress_bar and (step + 1 == steps or time.perf_counter() > next_bar):
            show_progress(epoch, args.epochs, step + 1, steps)
            next_bar = time.perf_counter() + 0.1
    return float(loss_sum), int(correct), steps * args.batch_per_rank, compute_s


def evaluate(net, dataset, batch=500):
    """(mean loss, accuracy) on a whole data set, in batches."""
    xp = net.xp
    loss_sum, correct = 0.0, 0
    for i in range(0, len(dataset), batch):
        x, y = xp.asarray(dataset.x[i:i + batch]), xp.asarray(dataset.y[i:i + batch])
        loss, _, ok = nets.softmax_cross_entropy(net.forward(x), y)
        loss_sum += float(loss) * len(y)
        correct += int(ok)
    return loss_sum / len(dataset), correct / len(dataset)


def stdout_is_terminal():
    """True if the user watches stdout on a terminal. Under mpiexec a rank's stdout is a
    pipe to the launcher, so (on Linux) look at the stdout of the mpiexec that started us."""
    if sys.stdout.isatty():
        return True
    pid = os.getpid()
    for _ in range(3):                          # rank -> hydra_pmi_proxy -> mpiexec
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if name in ("mpiexec", "mpirun", "mpiexec.hydra"):
                return os.readlink(f"/proc/{pid}/fd/1").startswith(("/dev/pts/", "/dev/tty"))
        except (OSError, ValueError, IndexError):
            return False
    return False


def show_progress(epoch, epochs, step, steps, width=30):
    filled = width * step // steps
    sys.stdout.write(f"\r  epoch {epoch + 1}/{epochs} [{'#' * filled}{'.' * (width - filled)}] "
                     f"{step}/{steps}")
    if step == steps:
        sys.stdout.write("\r" + " " * (width + 40) + "\r")
    sys.stdout.flush()


def epoch_line(e):
    """CNTK-style summary of one epoch."""
    return (f"Finished Epoch [{e['epoch']} of {e['epochs']}]: loss = {e['train_loss']:.4f} * "
            f"{e['samples']}, metric = {100 * (1 - e['train_accuracy']):.2f}% * {e['samples']}, "
            f"{e['time_s']:.2f}s ({e['samples_per_s']:.1f} samples per second); "
            f"test metric = {100 * (1 - e['test_accuracy']):.2f}% * {e['test_samples']}")


def train(args, comm, watchdog=None):
    """Train as the arguments say; `watchdog` (mpi_impl/watchdog.py) is told of every phase."""
    rank, size = comm.Get_rank(), comm.Get_size()
    watchdog = watchdog or Watchdog(0, rank)                 # 0: records, never fires
    train_set, test_set = load_data(args, size)
    # ---- from here on every rank passed the same checks; collectives are safe
    device = pick_device(args.device, comm, workers=args.loader_workers)
    xp = device.xp
    tl = Timeline(rank, sync=None if xp is np else device.wait, keep_spans=bool(args.trace))
    net = nets.build(args.model, train_set.shape, train_set.classes, args.width, args.depth,
                     xp=xp, dtype=args.dtype, seed=args.seed)
    opt = MomentumSGD(net.params, net.grads, args.lr, args.momentum)
    averager = GradientAverager(net.grads, net.layer_offsets, comm, sync=args.sync,
                                compress=args.compress, error_feedback=not args.no_error_feedback,
                                overlap=args.overlap, bucket_mib=args.bucket_mib, timeline=tl)
    loader = Loader(train_set, args.batch_per_rank, workers=args.loader_workers,
                    prefetch=args.prefetch, decode_ms=args.decode_ms, timeline=tl)
    shard = data.shard_indices(len(train_set), rank, size, args.seed)
    rng = np.random.default_rng([args.seed, rank])           # shuffles this rank's shard
    steps = len(shard) // args.batch_per_rank

    first_epoch, samples_trained, history = 0, 0, []
    if args.resume:
        first_epoch, samples_trained, history = restore_checkpoint(args, comm, net, opt, averager,
                                                                   rng, steps)
    elif args.checkpoint:
        refuse_to_overwrite(args, comm)
    kept = first_epoch if args.resume and first_epoch else None    # the last good checkpoint
    if rank == 0:
        print(f"{net.describe()}\n{args.data}: {len(train_set)} training / {len(test_set)} test "
              f"samples; {size} ranks x {args.batch_per_rank} = global batch "
              f"{size * args.batch_per_rank}, {steps} steps per epoch\nsync {args.sync}, "
              f"compress {args.compress}"
              + (f" (error feedback {'off' if args.no_error_feedback else 'on'}, "
                 f"warm-up {args.warmup_samples} samples)" if args.compress == "1bit" else "")
              + (f", overlap in {len(averager.buckets)} buckets ({averager.mode})" if args.overlap else ""),
              flush=True)

    replica = Replica(net, opt, averager, loader, tl, rank, size, watchdog,
                      samples_trained=samples_trained,
                      progress_bar=rank == 0 and stdout_is_terminal())
    comm.Barrier()
    tl.start()
    for epoch in range(first_epoch, args.epochs):
        order = rng.permutation(shard)[:steps * args.batch_per_rank]
        comm.Barrier()                         # nobody starts the clock while rank 0 evaluates
        tl.take_totals()
        bytes_before = averager.bytes_sent
        start = time.perf_counter()
        loss_sum, correct, n, compute_s = run_epoch(epoch, order, args, replica)
        elapsed = time.perf_counter() - start

        watchdog.pet("evaluation", epoch + 1)  # the others wait (here, or at the next Barrier)
        sums = np.array([loss_sum, correct, n], dtype=np.float64)
        comm.Allreduce(MPI.IN_PLACE, sums)
        per_rank = comm.gather({"totals": tl.take_totals(), "time_s": elapsed,
                                "compute_steps_s": compute_s,
                                "bytes_sent": averager.bytes_sent - bytes_before}, root=0)
        if rank == 0:
            test_loss, test_accuracy = evaluate(net, test_set)
            record = epoch_record(epoch, args, sums, per_rank, steps, test_loss, test_accuracy,
                                  len(test_set))
            history.append(record)
            print(epoch_line(record), flush=True)
        if args.checkpoint:
            watchdog.pet("checkpoint", epoch + 1)
            try:
                save_checkpoint(args, comm, net, opt, averager, rng, epoch + 1,
                                replica.samples_trained, history if rank == 0 else [], kept)
            except Diverged:
                averager.close()
                raise
            kept = epoch + 1
    averager.close()

    watchdog.pet("output")
    events = comm.gather(tl.chrome_events(), root=0) if args.trace else None
    if rank == 0:
        if args.trace:
            write_chrome_trace(args.trace, events)
        if args.json:
            write_json(args, size, net, steps, history, weights_digest(net))


def rank_breakdowns(per_rank):
    """Each rank's epoch, from what it gathered: (parts, work) per rank, the parts being
    BREAKDOWN + (OTHER,) in seconds, adding up to that rank's loop time.

    straggler_wait of rank r: the sum over steps of (slowest rank's compute - r's compute);
    r waited that long for the slowest rank inside its sync, so it moves out of r's
    exposed_comm (never more than all of it). Its mean over ranks is the sum over steps of
    (max - mean) over ranks of the step's compute."""
    compute = np.array([r["compute_steps_s"] for r in per_rank])         # ranks x steps
    behind = (compute.max(axis=0) - compute).sum(axis=1) if compute.size else np.zeros(len(per_rank))
    parts, work = [], []
    for r, waited_for_slowest in zip(per_rank, behind):
        totals = r["totals"]
        b = {k: totals[k] for k in BREAKDOWN}
        exposed = b["exposed_comm"]
        b["straggler_wait"] = min(float(waited_for_slowest), exposed)
        b["exposed_comm"] = exposed - b["straggler_wait"]
        b[OTHER] = r["time_s"] - sum(b.values())
        parts.append(b)
        work.append({k: totals[k] for k in WORK})
    return parts, work


def mean_of(dicts):
    return {k: float(np.mean([d[k] for d in dicts])) for k in dicts[0]}


def epoch_record(epoch, args, sums, per_rank, steps, test_loss, test_accuracy, test_samples):
    loss_sum, correct, n = sums
    time_s = float(np.mean([r["time_s"] for r in per_rank]))
    parts, work = rank_breakdowns(per_rank)
    return {
        "epoch": epoch + 1, "epochs": args.epochs, "samples": int(n),
        "train_loss": loss_sum / n, "train_accuracy": correct / n,
        "test_loss": test_loss, "test_accuracy": test_accuracy, "test_samples": test_samples,
        "time_s": time_s, "samples_per_s": n / time_s, "iteration_time_s": time_s / steps,
        "steps": steps,
        "bytes_sent_per_rank": float(np.mean([r["bytes_sent"] for r in per_rank])),
        "breakdown_s": mean_of(parts), "work_s": mean_of(work),
        "breakdown_s_per_rank": parts, "work_s_per_rank": work,
    }


def write_json(args, size, net, steps, history, digest):
    """The result, shaped like the simulator's (see the module docstring)."""
    steady = history[1:] if len(history) > 1 else history
    iterations = sum(e["steps"] for e in steady)
    seconds = sum(e["time_s"] for e in steady)
    per_iteration = lambda key: {k: sum(e[key][k] for e in steady) / iterations for k in steady[0][key]}
    result = {
        "iteration_time_s": seconds / iterations,
        "throughput_samples_per_s": sum(e["samples"] for e in steady) / seconds,
        "bytes_sent_per_gpu": sum(e["bytes_sent_per_rank"] for e in steady) / iterations,
        "breakdown_s": per_iteration("breakdown_s"),
        "work_s": per_iteration("work_s"),
        "final_train_loss": history[-1]["train_loss"],
        "final_test_accuracy": history[-1]["test_accuracy"],
        "final_weights_sha256": digest,
        "ranks": size, "global_batch": size * args.batch_per_rank, "steps_per_epoch": steps,
        "model": {"name": args.model, "params": net.num_params,
                  "param_bytes": net.num_params * net.params.itemsize,
                  "flops_per_sample": net.flops_per_sample},
        "config": vars(args),
        "epochs": history,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)


# ----------------------------------------------------------------------------- entry point

def main(argv=None):
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        with usage_errors(PROG):
            args = parse_args(argv, comm.Get_size())
            with Watchdog(args.stall_timeout, rank, prog=PROG) as watchdog:
                train(args, comm, watchdog)
    except SystemExit:
        raise
    except Diverged as error:                   # every rank is here, for the same reason
        if rank == 0:
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        sys.exit(DIVERGED_EXIT)
    except BaseException as error:              # anything else: take the whole job down
        print(f"rank {rank}: {type(error).__name__}: {error}", file=sys.stderr)
        abort_job(comm, 1)                      # flushes, and waits for the line to get out


if __name__ == "__main__":
    main()
