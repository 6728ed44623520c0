"""What mpi_impl.train reports: rank 0's lines, the progress bar, and the JSON result.

Rank 0 prints what runs (:func:`run_banner`) and one CNTK-style line per epoch
(:func:`epoch_line`); on a terminal it also draws a progress bar through each epoch.
--json FILE writes the result (:func:`write_json`).

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
import hashlib
import json
import os
import sys

import numpy as np
from dpsim.vocabulary import BREAKDOWN, OTHER

from mpi_impl import checkpoint, files
from mpi_impl.timeline import WORK


def run_banner(args, net, averager, size, train_samples, test_samples, steps):
    """What runs: the model, the data, the global batch and how the gradient is averaged."""
    return (f"{net.describe()}\n{args.data}: {train_samples} training / {test_samples} test "
            f"samples; {size} ranks x {args.batch_per_rank} = global batch "
            f"{size * args.batch_per_rank}, {steps} steps per epoch\nsync {args.sync}, "
            f"compress {args.compress}"
            + (f" (error feedback {'off' if args.no_error_feedback else 'on'}, "
               f"warm-up {args.warmup_samples} samples)" if args.compress == "1bit" else "")
            + (f", overlap in {len(averager.buckets)} buckets ({averager.mode})" if args.overlap else ""))


def epoch_line(e):
    """CNTK-style summary of one epoch; CNTK's "metric" is the error rate, named so here (the
    JSON carries the accuracy, 1 - error, as a fraction)."""
    return (f"Finished Epoch [{e['epoch']} of {e['epochs']}]: loss = {e['train_loss']:.4f} * "
            f"{e['samples']}, error = {100 * (1 - e['train_accuracy']):.2f}% * {e['samples']}, "
            f"{e['time_s']:.2f}s ({e['samples_per_s']:.1f} samples per second); "
            f"test error = {100 * (1 - e['test_accuracy']):.2f}% * {e['test_samples']}")


# ----------------------------------------------------------------------------- progress bar

#: the programs that start ranks; their stdout is what the user watches
LAUNCHERS = ("mpiexec", "mpirun", "mpiexec.hydra")


def stdout_is_terminal():
    """True if the user watches stdout on a terminal, where a progress bar helps (and in a
    file or a pipe it would only leave carriage returns).  Under mpiexec a rank's stdout is
    a pipe to the launcher, so isatty() says False even when mpiexec writes to a terminal:
    on Linux, walk up from this process to the mpiexec that started it (rank ->
    hydra_pmi_proxy -> mpiexec) and look at that process's stdout instead."""
    if sys.stdout.isatty():
        return True
    try:
        pid = os.getpid()
        for _ in range(3):
            pid = _parent_of(pid)
            if _name_of(pid) in LAUNCHERS:
                return os.readlink(f"/proc/{pid}/fd/1").startswith(("/dev/pts/", "/dev/tty"))
    except (OSError, ValueError, IndexError):      # not Linux, or the process is gone
        pass
    return False


def _parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _name_of(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def show_progress(epoch, epochs, step, steps, width=30):
    filled = width * step // steps
    sys.stdout.write(f"\r  epoch {epoch + 1}/{epochs} [{'#' * filled}{'.' * (width - filled)}] "
                     f"{step}/{steps}")
    if step == steps:
        sys.stdout.write("\r" + " " * (width + 40) + "\r")
    sys.stdout.flush()


# ----------------------------------------------------------------------------- the JSON result

def weights_digest(net):
    return hashlib.sha256(checkpoint.to_numpy(net.params).tobytes()).hexdigest()


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


def write_json(args, size, net, steps, history, digest, extra=None):
    """The result, shaped like the simulator's (see the module docstring); `extra`: more
    top-level keys (mpi_impl.train's memory per rank)."""
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
        **(extra or {}),
    }
    files.write_new(args.json, lambda f: json.dump(result, f, indent=1))
