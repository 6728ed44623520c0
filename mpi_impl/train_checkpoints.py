"""mpi_impl.train's checkpoints: when a run saves, what it refuses to save, and how it
resumes (the file format is checkpoint.py's).

--checkpoint DIR saves every rank's state after every epoch, in a step all ranks take
together (:func:`save_checkpoint`): two generations per rank, so a rank killed while saving
costs one epoch, and never weights that became NaN or inf (the run stops with one line and
exit code DIVERGED_EXIT).  --resume continues from the newest epoch that every rank has
(:func:`restore_checkpoint`), bit for bit as if the run had never stopped, after checking
that the files were written by a run with the same settings (:func:`check_resumable`), and
that each rank's file is its own: every file records the rank that wrote it, the number of
ranks, the run's id (random, drawn when a run starts from scratch and kept across resumes)
and a digest of its arrays (checkpoint.py), so that a file copied from another rank or
another run, or edited, is refused.
A run without --resume refuses a DIR that already holds checkpoints.  save_checkpoint,
restore_checkpoint, refuse_to_overwrite and starting_point are collective: every rank
calls them, and every rank reaches the same verdict.
"""
import secrets

import numpy as np
from mpi4py import MPI

from mpi_impl import checkpoint
from mpi_impl.errors import UsageError
from mpi_impl.files import printable

CHECKPOINT_KEYS = ("model", "width", "depth", "dtype", "data", "samples", "batch_per_rank",
                   "seed", "compress", "overlap", "bucket_mib")

#: exit code of a run whose weights became NaN or inf (2 is a bad command line)
DIVERGED_EXIT = 1


class Diverged(Exception):
    """Some rank's weights or optimizer state became NaN or inf.  Every rank raises it alike
    (the verdict is all-reduced); main prints it as one line and exits with DIVERGED_EXIT."""


def new_run_id(comm):
    """Collective: a random id for a run that starts from scratch, the same on every rank."""
    return comm.bcast(secrets.token_hex(8) if comm.Get_rank() == 0 else None, root=0)


def save_checkpoint(args, comm, net, opt, averager, rng, epoch, samples_trained, history, kept,
                    run_id):
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
            "rank": comm.Get_rank(), "run_id": run_id,
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
    """{array name: (shape, dtype)} of what a checkpoint of this run holds, and the pairs
    of names that may be missing (the averager's 1-bit residuals, (worker, server) per
    bucket, exist after the bucket's first compressed step)."""
    shapes = {"params": (net.params.shape, net.params.dtype),
              "velocity": (opt.velocity.shape, opt.velocity.dtype)}
    residuals, pairs = averager.state_shapes()
    return {**shapes, **residuals}, pairs


def check_settings(args, comm, path, meta):
    """Raise CheckpointError (one line naming `path`) unless `meta` says this rank wrote the
    file, in a run with the same ranks and settings of CHECKPOINT_KEYS (checked before the
    arrays are read: a changed --width is named as such, not as arrays of another shape)."""
    config = meta.get("config")
    if not isinstance(config, dict):
        raise checkpoint.CheckpointError(f"{path}: its meta has no config")
    if "bucket_mb" in config:
        raise checkpoint.CheckpointError(
            f"cannot resume from {path}: it was written when bucket sizes were in MB "
            f"(bucket_mb), they are in MiB now (--bucket-mib); delete it to start again")
    wanted = {k: getattr(args, k) for k in CHECKPOINT_KEYS}
    changed = sorted(k for k in CHECKPOINT_KEYS if config.get(k) != wanted[k])
    if meta.get("rank") != comm.Get_rank() or type(meta.get("run_id")) is not str:
        raise checkpoint.CheckpointError(
            f"cannot resume from {path}: it is not rank {comm.Get_rank()}'s own (its meta says "
            f"rank {meta.get('rank')!r}, run {meta.get('run_id')!r}); delete the checkpoints to "
            f"start again")
    if meta.get("ranks") != comm.Get_size() or changed:
        what = ", ".join(f"--{k.replace('_', '-')}" for k in changed) or "the number of ranks"
        raise checkpoint.CheckpointError(f"cannot resume from {path}: {what} differ from the "
                                         f"run that wrote it")


def check_resumable(args, comm, path, arrays, meta, epoch, steps, shapes, pairs):
    """Raise CheckpointError (one line naming `path`) unless this rank's checkpoint was
    written by a run with the same settings and fits this model: check_settings, arrays as
    checkpoint.check wants them, 1-bit residuals in pairs, samples_trained = epoch x the
    samples of an epoch, an RNG state this RNG takes, and a history (rank 0: one entry per
    epoch)."""
    check_settings(args, comm, path, meta)
    checkpoint.check(path, arrays, meta, epoch=epoch, max_epoch=args.epochs, shapes=shapes,
                     optional=[name for pair in pairs for name in pair])
    for worker, server in pairs:
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
    (epoch, samples_trained, history, run id), or (0, 0, [], None) when DIR holds none.

    Every rank raises the same UsageError, one line naming the file, when the ranks hold no
    epoch in common, or when some rank's file of that epoch is not a readable checkpoint,
    does not fit this run (check_resumable), or comes from another run than rank 0's."""
    rank = comm.Get_rank()
    found, per_rank = list_checkpoints(args, comm)
    if not any(per_rank):
        if rank == 0:
            print(f"no checkpoint in {printable(args.checkpoint)}; starting from epoch 1", flush=True)
        return 0, 0, [], None
    epoch = checkpoint.newest_common(per_rank)
    if epoch is None:
        raise UsageError(f"no epoch is checkpointed by every rank in {args.checkpoint} (epochs "
                         f"per rank: {per_rank}); delete them to start again")
    arrays, meta, problem = _read_own(args, comm, found[epoch], epoch, steps,
                                      _state_shapes(net, opt, averager))
    run_ids = comm.allgather(meta.get("run_id"))
    if problem is None and run_ids[rank] != run_ids[0]:
        problem = (f"cannot resume from {found[epoch]}: it was written by run {run_ids[rank]}, "
                   f"rank 0's checkpoint by run {run_ids[0]}; delete the checkpoints to start again")
    _agree(comm, problem)
    net.params[...] = net.xp.asarray(arrays["params"])
    opt.velocity[...] = net.xp.asarray(arrays["velocity"])
    averager.load_state(arrays)
    rng.bit_generator.state = meta["rng"]
    if rank == 0 and epoch < max(max(e) for e in per_rank if e):
        print(f"resuming from epoch {epoch}, the newest that every rank has (epochs per rank: "
              f"{per_rank})", flush=True)
    return epoch, meta["samples_trained"], meta["history"], meta["run_id"]


def _read_own(args, comm, path, epoch, steps, shapes_and_pairs):
    """(arrays, meta, None) of this rank's checkpoint `path` if it fits this run, else
    ({}, {}, why) in one line (not raised: the caller agrees with the other ranks first)."""
    shapes, pairs = shapes_and_pairs
    try:
        try:
            arrays, meta = checkpoint.read(
                path, shapes, check_meta=lambda meta: check_settings(args, comm, path, meta))
        except checkpoint.CheckpointError as error:
            if str(error).startswith("cannot resume"):
                raise
            raise checkpoint.CheckpointError(f"{error}; delete it to resume from an older "
                                             f"checkpoint") from None
        check_resumable(args, comm, path, arrays, meta, epoch, steps, shapes, pairs)
    except checkpoint.CheckpointError as error:
        return {}, {}, str(error)
    return arrays, meta, None


def refuse_to_overwrite(args, comm):
    """Collective: a run without --resume must not replace checkpoints (it would start again
    from epoch 1 and prune them): UsageError on every rank if --checkpoint DIR holds any."""
    _, per_rank = list_checkpoints(args, comm)
    if any(per_rank):
        raise UsageError(f"--checkpoint {args.checkpoint} already holds checkpoints (epochs per "
                         f"rank: {per_rank}): add --resume to continue, or delete them to start again")


def starting_point(args, comm, net, opt, averager, rng, steps):
    """Collective: where a run starts, (epoch, samples trained, history, kept, run id): from the
    checkpoint --resume finds (kept: its epoch, the checkpoint to keep while saving the
    next; None for epoch 0), else from scratch, after refusing a --checkpoint DIR that
    already holds checkpoints.  The run id is the checkpoints' when resuming, else new."""
    if args.resume:
        epoch, samples_trained, history, run_id = restore_checkpoint(args, comm, net, opt,
                                                                     averager, rng, steps)
        return epoch, samples_trained, history, epoch or None, run_id or new_run_id(comm)
    if args.checkpoint:
        refuse_to_overwrite(args, comm)
    return 0, 0, [], None, new_run_id(comm)
