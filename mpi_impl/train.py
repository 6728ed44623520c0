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

The file reads top to bottom: the replica, the epoch (the loop above), the run (train),
main.  Around it: train_options.py (the command line and every check before training),
train_checkpoints.py (--checkpoint, --resume, and the stop on NaN or inf weights),
train_results.py (rank 0's lines, the progress bar, --json and its time breakdown),
timeline.py (--trace, and the clock behind the breakdown), watchdog.py (--stall-timeout:
the whole job ends when a rank makes no progress, instead of every other rank waiting in
the all-reduce forever).
"""
import contextlib
import sys
import time
from dataclasses import dataclass

import numpy as np
from dpsim.vocabulary import SHARDED
from mpi4py import MPI

from mpi_impl import data, nets
from mpi_impl.powersgd import PowerSGD, parameter_arrays
from mpi_impl.topk import TopK
from mpi_impl.device import pick_device
from mpi_impl.errors import abort_job, interrupted, usage_errors, watch_ctrl_c
from mpi_impl.loader import Loader
from mpi_impl.sgd import GradientAverager, MomentumSGD
from mpi_impl.timeline import Timeline, write_chrome_trace
from mpi_impl.train_checkpoints import DIVERGED_EXIT, Diverged, save_checkpoint, starting_point
from mpi_impl.train_options import PROG, check_outputs_together, load_data, parse_args
from mpi_impl.train_results import (epoch_line, epoch_record, run_banner, show_progress,
                                    stdout_is_terminal, weights_digest, write_json)
from mpi_impl.watchdog import Watchdog
from mpi_impl.zero import STAGES, Zero, held_memory


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
    run_id: str = ""                   # recorded in every checkpoint, kept across resumes
    progress_bar: bool = False


def build_replica(args, comm, train_set, watchdog):
    """This rank's replica on its device: the model (the same initial weights on every
    rank, from the same seed), its optimizer, gradient averager and loader.  Collective."""
    rank, size = comm.Get_rank(), comm.Get_size()
    device = pick_device(args.device, comm, workers=args.loader_workers)
    xp = device.xp
    tl = Timeline(rank, sync=None if xp is np else device.wait, keep_spans=bool(args.trace))
    net = nets.build(args.model, train_set.shape, train_set.classes, args.width, args.depth,
                     xp=xp, dtype=args.dtype, seed=args.seed)
    if args.sync in SHARDED:           # ZeRO: one object shards the sync and the update
        opt = averager = Zero(net, comm, STAGES[args.sync], args.lr, args.momentum,
                              overlap=args.overlap, bucket_mib=args.bucket_mib, timeline=tl)
    else:
        opt = MomentumSGD(net.params, net.grads, args.lr, args.momentum)
        averager = GradientAverager(net.grads, net.layer_offsets, comm, sync=args.sync,
                                    compress=args.compress, error_feedback=not args.no_error_feedback,
                                    overlap=args.overlap, bucket_mib=args.bucket_mib, timeline=tl,
                                    compressor=compressor_factory(args, net, comm))
    loader = Loader(train_set, args.batch_per_rank, workers=args.loader_workers,
                    prefetch=args.prefetch, decode_ms=args.decode_ms, timeline=tl)
    return Replica(net, opt, averager, loader, tl, rank, size, watchdog)


def compressor_factory(args, net, comm):
    """--compress powersgd or topk: a function (lo, hi) -> the compressor of the gradient
    bucket [lo, hi) (powersgd.py, topk.py); None for the others."""
    feedback = not args.no_error_feedback
    if args.compress == "powersgd":
        return lambda lo, hi: PowerSGD(parameter_arrays(net, lo, hi), comm, args.powersgd_rank,
                                       sync=args.sync, error_feedback=feedback, seed=args.seed)
    if args.compress == "topk":
        return lambda lo, hi: TopK(comm, args.topk_ratio, error_feedback=feedback)
    return None


# ----------------------------------------------------------------------------- the loop

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


# ----------------------------------------------------------------------------- the run

def train(args, comm, watchdog=None):
    """Train as the arguments say; `watchdog` (mpi_impl/watchdog.py) is told of every phase."""
    rank, size = comm.Get_rank(), comm.Get_size()
    watchdog = watchdog or Watchdog(0, rank)                 # 0: records, never fires
    train_set, test_set = load_data(args, size)
    # ---- from here on every rank passed the same checks; collectives are safe
    r = build_replica(args, comm, train_set, watchdog)
    shard = data.shard_indices(len(train_set), rank, size, args.seed)
    rng = np.random.default_rng([args.seed, rank])           # shuffles this rank's shard
    steps = len(shard) // args.batch_per_rank
    first_epoch, r.samples_trained, history, kept, r.run_id = starting_point(
        args, comm, r.net, r.opt, r.averager, rng, steps)
    if rank == 0:
        print(run_banner(args, r.net, r.averager, size, len(train_set), len(test_set), steps),
              flush=True)
    r.progress_bar = rank == 0 and stdout_is_terminal()
    comm.Barrier()
    r.tl.start()
    for epoch in range(first_epoch, args.epochs):
        order = rng.permutation(shard)[:steps * args.batch_per_rank]
        record = train_epoch(epoch, order, args, comm, r, test_set, steps)
        if rank == 0:
            history.append(record)
            print(epoch_line(record), flush=True)
        if args.checkpoint:
            kept = save_epoch(epoch, args, comm, r, rng, history, kept)
    r.averager.close()
    write_outputs(args, comm, r, steps, history)


def train_epoch(epoch, order, args, comm, r, test_set, steps):
    """One epoch on every rank; returns its record on rank 0 (None elsewhere): loss and
    accuracy summed over ranks, every rank's time in parts (gathered), and the test set's
    loss and accuracy (rank 0 evaluates while the others wait)."""
    comm.Barrier()                         # nobody starts the clock while rank 0 evaluates
    r.tl.take_totals()
    bytes_before = r.averager.bytes_sent
    start = time.perf_counter()
    loss_sum, correct, n, compute_s = run_epoch(epoch, order, args, r)
    elapsed = time.perf_counter() - start

    r.watchdog.pet("evaluation", epoch + 1)  # the others wait (here, or at the next Barrier)
    sums = np.array([loss_sum, correct, n], dtype=np.float64)
    comm.Allreduce(MPI.IN_PLACE, sums)
    per_rank = comm.gather({"totals": r.tl.take_totals(), "time_s": elapsed,
                            "compute_steps_s": compute_s,
                            "bytes_sent": r.averager.bytes_sent - bytes_before}, root=0)
    with whole_model(r.opt):           # ZeRO-3: gathered for the evaluation, then freed
        if r.rank != 0:
            return None
        test_loss, test_accuracy = evaluate(r.net, test_set)
    return epoch_record(epoch, args, sums, per_rank, steps, test_loss, test_accuracy,
                        len(test_set))


def save_epoch(epoch, args, comm, r, rng, history, kept):
    """Checkpoint the state after `epoch` (train_checkpoints.py); returns the epoch that is
    now the last good checkpoint.  Weights that are not finite raise Diverged on every rank."""
    r.watchdog.pet("checkpoint", epoch + 1)
    try:
        save_checkpoint(args, comm, r.net, r.opt, r.averager, rng, epoch + 1, r.samples_trained,
                        history if r.rank == 0 else [], kept, r.run_id)
    except Diverged:
        r.averager.close()
        raise
    return epoch + 1


def write_outputs(args, comm, r, steps, history):
    """--trace (every rank's spans, gathered) and --json, written by rank 0."""
    r.watchdog.pet("output")
    events = comm.gather(r.tl.chrome_events(), root=0) if args.trace else None
    memory = comm.gather(memory_held(r), root=0)
    with whole_model(r.opt):                 # ZeRO-3: the weights' digest needs them whole
        if r.rank == 0:
            if args.trace:
                write_chrome_trace(args.trace, events)
            if args.json:
                write_json(args, r.size, r.net, steps, history, weights_digest(r.net),
                           extra=memory_report(memory))


def whole_model(opt):
    """A context in which net.params holds the whole model on every rank (collective):
    ZeRO-3 gathers it (zero.py), every other optimizer has it already."""
    return opt.whole_model() if hasattr(opt, "whole_model") else contextlib.nullcontext()


def memory_held(r):
    """This rank's bytes held for parameters, gradients and optimizer state (zero.py's
    held_memory), and on a GPU the CuPy memory pool's used bytes."""
    held = r.opt.memory() if hasattr(r.opt, "memory") else held_memory(r.net, optimizer_state=[r.opt.velocity])
    if r.net.xp is not np:
        held["device_pool_used_bytes"] = int(r.net.xp.get_default_memory_pool().used_bytes())
    return held


def memory_report(per_rank):
    """--json's memory_per_rank_bytes (the largest rank's figure of each part) and
    memory_bytes_by_rank (every rank's)."""
    return {"memory_per_rank_bytes": {k: max(m[k] for m in per_rank) for k in per_rank[0]},
            "memory_bytes_by_rank": per_rank}


# ----------------------------------------------------------------------------- entry point

def main(argv=None):
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    watch_ctrl_c(PROG, comm)
    try:
        with usage_errors(PROG):
            args = parse_args(argv, comm.Get_size())
            check_outputs_together(args, comm)
            with Watchdog(args.stall_timeout, rank, prog=PROG) as watchdog:
                train(args, comm, watchdog)
    except SystemExit:
        raise
    except KeyboardInterrupt:                   # Ctrl-C: one line, and no rank left waiting
        interrupted(PROG, comm)
    except Diverged as error:                   # every rank is here, for the same reason
        if rank == 0:
            print(f"{PROG}: error: {error}", file=sys.stderr, flush=True)
        sys.exit(DIVERGED_EXIT)
    except BaseException as error:              # anything else: take the whole job down
        print(f"rank {rank}: {type(error).__name__}: {error}", file=sys.stderr)
        abort_job(comm, 1)                      # flushes, and waits for the line to get out


if __name__ == "__main__":
    main()
