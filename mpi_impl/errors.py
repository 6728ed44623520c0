"""Bad input raises the same error on every rank; a failure inside a job ends the whole job.

Two rules keep an MPI program from hanging:

1. **Check collectively, before any message is posted.**  If only the rank with a bad
   buffer raised, the others would wait forever in the next collective.  :func:`check_arguments` therefore puts each rank's view
   (buffer length, dtype, algorithm, device) into one tiny ``Allreduce`` (MIN of ``v`` and
   ``-v``, which gives min and max in one call), and every rank raises the same exception
   when any rank is wrong.
2. **Abort on anything else.**  An unexpected exception on one rank must not leave the
   others blocked: :func:`abort_on_error` (a context manager) and :func:`install_excepthook`
   print the error and call ``MPI.COMM_WORLD.Abort(1)`` (through :func:`abort_job`, which
   first lets the message get out), which ends every process of the job, so ``mpiexec``
   exits non-zero.

The command-line programs (mpi_impl.train, mpi_impl.bench) add a third: a bad command line
is a :class:`UsageError`, which every rank reaches alike (the same arguments); rank 0 prints
it as one line and every rank exits with code 2 (:class:`Parser`, :func:`usage_errors`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback

import numpy as np
from dpsim.vocabulary import unknown_algorithm
from mpi4py import MPI

from mpi_impl.files import printable

#: dtypes the all-reduce algorithms can sum (MPI datatypes exist for all of them).
REDUCIBLE_DTYPES = ("float32", "float64", "int32", "int64")
#: dtypes the 1-bit compressor accepts (it needs a sign and a mean).
FLOAT_DTYPES = ("float32", "float64")


def check_arguments(x, comm, *, algo=None, algorithms=(), dtypes=REDUCIBLE_DTYPES,
                    device=False, problem: str | None = None, about: str = "arguments",
                    same: dict | None = None):
    """Raise ValueError/TypeError on every rank if any rank's arguments are wrong.

    Checked: `algo` is one of `algorithms` (when given; the message for an unknown or old
    name is dpsim.vocabulary.unknown_algorithm's), x's dtype is one of `dtypes` and the
    same on all ranks, x has the same number of elements on all ranks, and all ranks agree on
    CPU vs GPU.  `problem` is a message about some other argument (named by `about`) that
    the caller found wrong on this rank; every rank then raises the lowest such rank's
    message (a second, pickled collective, taken only then).  `same` maps names to integer settings that must
    agree across ranks (e.g. 1-bit's block).  Costs one Allreduce of a few integers.
    """
    size = int(getattr(x, "size", -1))
    dtype = str(getattr(x, "dtype", type(x).__name__))
    algo_code = algorithms.index(algo) if algo in algorithms else -1
    dtype_code = dtypes.index(dtype) if dtype in dtypes else -1
    same = same or {}
    mine = [size, algo_code if algorithms else 0, dtype_code, int(device), int(bool(problem))]
    mine += [int(v) for v in same.values()]
    both = np.array(mine + [-v for v in mine], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, both, op=MPI.MIN)
    low, high = both[:len(mine)], -both[len(mine):]

    if high[4]:                        # every rank takes this branch: the same words everywhere
        ranks_problems = [(r, p) for r, p in enumerate(comm.allgather(problem)) if p]
        first, text = ranks_problems[0]
        everywhere = len(ranks_problems) == comm.Get_size()
        raise ValueError(text if everywhere else f"{text} (the {about} of rank {first})")
    if low[1] < 0 or high[1] != low[1]:
        if algo_code < 0:
            raise ValueError(unknown_algorithm(algo, algorithms))
        raise ValueError(f"an unknown or different algorithm on another rank ({algo!r} here); "
                         f"choose one of {', '.join(algorithms)}, the same on every rank")
    if low[2] < 0:
        who = f"dtype {dtype} here" if dtype_code < 0 else "a bad dtype on another rank"
        raise TypeError(f"cannot reduce this buffer ({who}); allowed dtypes: {', '.join(dtypes)}")
    if high[2] != low[2]:
        raise TypeError(f"dtypes differ across ranks ({dtype} here); use one of "
                        f"{', '.join(dtypes)} on every rank")
    if low[0] != high[0]:
        raise ValueError(f"buffer lengths differ across ranks: {low[0]} to {high[0]} elements "
                         f"({size} here); every rank must pass the same number of elements")
    if low[3] != high[3]:
        raise TypeError("some ranks passed GPU (CuPy) arrays and others CPU (NumPy) arrays; "
                        "use the same kind on every rank")
    for i, (name, value) in enumerate(same.items(), start=5):
        if low[i] != high[i]:
            raise ValueError(f"{name} differs across ranks ({low[i]} to {high[i]}, {value} "
                             f"here); every rank must use the same {name}")


#: seconds a rank waits, its output flushed, before it calls MPI Abort (see abort_job)
ABORT_GRACE_S = 0.3


def abort_job(comm, code=1):
    """End every process of the job with MPI Abort, after flushing this rank's output.

    The pause: a rank's stdout and stderr are pipes to MPICH's hydra proxy, which forwards
    them to mpiexec.  Abort kills the job's processes, and the rank's last line (the reason
    for the abort) can still be in the pipe and get lost: flushing only moves it from
    Python's buffer into the pipe.  ABORT_GRACE_S gives the proxy time to pass it on.
    MPICH's Abort asks mpiexec to end the job and may return first; this rank then exits at
    once (os._exit), so that the code after an abort_on_error block never runs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):           # closed or broken: nothing more to say
            pass
    time.sleep(ABORT_GRACE_S)
    comm.Abort(code)
    os._exit(code)          # MPICH's Abort can return before mpiexec ends this process: never go on


def _report_and_abort(exc_type, exc, tb, comm):
    rank = MPI.COMM_WORLD.Get_rank()
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write(f"[rank {rank}] aborting the MPI job after an error:\n{text}")
    abort_job(comm, 1)                          # flushes, and waits for the line to get out


@contextlib.contextmanager
def abort_on_error(comm=None, prog=None):
    """``with abort_on_error(): ...`` -- any exception ends the whole job with exit code 1.

    ``SystemExit(0)`` (a normal ``sys.exit()``) passes through untouched; Ctrl-C ends the
    job with :func:`interrupted`'s one line ("PROG: interrupted", PROG default: the
    script's name) and exit code 130.
    """
    comm = comm or MPI.COMM_WORLD
    try:
        yield
    except KeyboardInterrupt:
        interrupted(prog or os.path.basename(sys.argv[0]), comm)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _report_and_abort(type(exc), exc, exc.__traceback__, comm)
        raise
    except BaseException as exc:
        _report_and_abort(type(exc), exc, exc.__traceback__, comm)


def install_excepthook(comm=None):
    """Make an uncaught exception on any rank abort the whole job (exit code 1)."""
    comm = comm or MPI.COMM_WORLD
    sys.excepthook = lambda t, e, tb: _report_and_abort(t, e, tb, comm)


# ------------------------------------------------------------------ command lines

class UsageError(Exception):
    """Bad input from the user: one line on stderr, exit code 2, no traceback.

    Only raised where every rank reaches the same verdict (arguments, data sizes), so
    that all ranks exit the same way and none is left waiting in a collective."""


class Parser(argparse.ArgumentParser):
    """argparse, but errors become UsageError, and only rank 0 prints --help."""

    def error(self, message):
        raise UsageError(message)

    def _print_message(self, message, file=None):
        if MPI.COMM_WORLD.Get_rank() == 0:
            super()._print_message(message, file)


@contextlib.contextmanager
def usage_errors(prog: str):
    """``with usage_errors("mpi_impl.train"): ...`` -- a UsageError becomes one line on
    rank 0's stderr (``prog: error: ...``) and exit code 2 on every rank."""
    try:
        yield
    except UsageError as error:
        if MPI.COMM_WORLD.Get_rank() == 0:
            text = printable(error)             # one line, control characters escaped
            print(f"{prog}: error: {text}", file=sys.stderr, flush=True)
        sys.exit(2)


#: exit code of a run ended by Ctrl-C (SIGINT), as shells report 128 + 2
INTERRUPTED_EXIT = 130
#: seconds an interrupted rank other than 0 waits before it speaks (see interrupted)
INTERRUPT_GRACE_S = 0.5


_interrupt_once = threading.Lock()
_watching = []                                  # the program watch_ctrl_c was started for
#: seconds the watcher gives MPI Abort to end the job before this process exits by itself
ABORT_DEADLINE_S = 5.0


def watch_ctrl_c(prog: str, comm=None):
    """Make Ctrl-C end the job even while this rank is stuck inside an MPI call.

    Python runs a signal's handler only in the main thread, between bytecodes; a rank blocked
    in MPI (a Wait for a partner that has stopped: Ctrl-C reaches the ranks at different
    moments of an exchange) never gets there.  Python's own C-level handler still notes the
    signal, whichever thread the kernel chose, and writes its number to the wakeup file
    descriptor (signal.set_wakeup_fd).  A daemon thread blocked on that descriptor wakes up
    and calls :func:`interrupted`: MPI Abort from a second thread, which MPI_THREAD_MULTIPLE
    allows.  If the main thread gets there first (its KeyboardInterrupt), the one who comes
    second waits: the line is printed once.  Call it from the main thread, once."""
    comm = comm or MPI.COMM_WORLD
    if _watching:
        return
    _watching.append(prog)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)          # the signal handler must never block
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def wait_for_signal():
        while os.read(read_end, 1) != bytes([signal.SIGINT]):
            pass
        interrupted(prog, comm)

    threading.Thread(target=wait_for_signal, name="ctrl-c", daemon=True).start()


def interrupted(prog: str, comm=None):
    """After Ctrl-C (KeyboardInterrupt) on this rank: one line, "PROG: interrupted", and
    the whole job ends with exit code 130 (MPI Abort: the other ranks may be waiting for
    this one in a collective).

    Ctrl-C on a terminal reaches every rank (mpiexec passes it on): rank 0 speaks and ends
    the job at once, and the others wait INTERRUPT_GRACE_S first, so that the line is
    printed once; a rank interrupted alone still speaks after that pause.  MPI's own note
    about the Abort is silenced (stderr closed after the line).  The files the programs
    write are written under a temporary name and renamed when complete
    (files.write_new), so none is left half written."""
    comm = comm or MPI.COMM_WORLD
    while not _interrupt_once.acquire(blocking=False):
        try:
            threading.Event().wait()            # the other thread of this rank ends the job
        except KeyboardInterrupt:               # a second Ctrl-C changes nothing
            pass
    threading.Timer(ABORT_DEADLINE_S, os._exit, (INTERRUPTED_EXIT,)).start()
    if comm.Get_rank() != 0:
        time.sleep(INTERRUPT_GRACE_S)
    print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stderr.fileno())
    except (OSError, ValueError):
        pass
    abort_job(comm, INTERRUPTED_EXIT)


def algorithm_name(allowed):
    """An argparse type: one name from `allowed`; an unknown or old name (such as "tree") is
    refused with dpsim.vocabulary.unknown_algorithm's one-line message."""
    def parse(text):
        if text not in allowed:
            raise argparse.ArgumentTypeError(unknown_algorithm(text, allowed))
        return text
    return parse


def algorithm_names(allowed):
    """An argparse type: a comma-separated list of names from `allowed` (see algorithm_name)."""
    one = algorithm_name(allowed)
    return lambda text: [one(name.strip()) for name in text.split(",") if name.strip()] or [one(text)]
