"""A per-rank watchdog: end the whole MPI job when this rank stops making progress.

Why: in synchronous data parallelism every step ends in a collective (the gradient
all-reduce).  If one rank stalls -- stopped with SIGSTOP, stuck in I/O, a hung GPU -- it
raises no exception and does not exit, so MPI never notices: every other rank waits inside
the all-reduce forever and the job never ends.  The stalled rank cannot report itself, but
its neighbours can notice that *they* have stopped getting anywhere.

How: the training loop calls ``watchdog.pet(phase, epoch, step)`` each time it moves on
(before loading a batch, before compute, before the sync, before the update, around
evaluation and checkpoints).  A daemon thread looks every so often at how long ago the last
pet was; past ``timeout_s`` seconds it writes one line to stderr naming this rank and the
phase it was waiting in, e.g.

    mpi_impl.train: rank 0 made no progress for 120 s (epoch 3, step 17, waiting in sync);
    a rank may be stalled or dead; ending the job

(on one line), and calls ``on_stall`` -- by default ``MPI.COMM_WORLD.Abort(1)``, which ends
every process of the job, the stopped one included, so ``mpiexec`` exits non-zero.
Calling Abort from this thread while the main thread is blocked in MPI is allowed because
mpi4py initialises MPI with MPI_THREAD_MULTIPLE; where a program asked for less, the thread
ends only its own process (``os._exit(1)``), and mpiexec then ends the rest of the job.

``timeout_s = 0`` turns the watchdog off: ``pet`` still records, no thread runs.
"""
import os
import sys
import threading
import time

from mpi4py import MPI

from mpi_impl.errors import abort_job


def end_the_job():
    """The default on_stall: MPI Abort of the whole job if MPI lets this thread call it."""
    if MPI.Query_thread() == MPI.THREAD_MULTIPLE:
        abort_job(MPI.COMM_WORLD, 1)
    sys.stderr.flush()
    os._exit(1)


class Watchdog:
    """Calls ``on_stall()`` once if ``pet`` is not called for ``timeout_s`` seconds.

    Use as ``with Watchdog(120, rank) as dog: ... dog.pet("compute", epoch, step) ...``;
    the thread runs between ``start()`` and ``stop()`` (the with-block)."""

    def __init__(self, timeout_s, rank, on_stall=end_the_job, prog="mpi_impl.train",
                 clock=time.monotonic, out=None):
        self.timeout_s, self.rank, self.on_stall, self.prog = timeout_s, rank, on_stall, prog
        self.clock = clock
        self.out = out                     # None: sys.stderr at the time of the report
        # (when, phase, epoch, step) as one tuple, so that the thread reads it in one piece
        self.last = (clock(), "set-up", None, None)
        self.fired = False
        self._stop = threading.Event()
        self._thread = None

    def pet(self, phase, epoch=None, step=None):
        """Progress: this rank is now in `phase` (epoch and step counted from 1)."""
        self.last = (self.clock(), phase, epoch, step)

    def check(self):
        """One look: if the last pet is older than timeout_s, report and call on_stall
        (only the first time).  Returns True if it fired now.  The thread calls this; tests
        may call it directly with a fake clock."""
        when, phase, epoch, step = self.last
        if self.fired or not self.timeout_s or self.clock() - when < self.timeout_s:
            return False
        self.fired = True
        where = [f"epoch {epoch}" if epoch is not None else None,
                 f"step {step}" if step is not None else None, f"waiting in {phase}"]
        print(f"{self.prog}: rank {self.rank} made no progress for {self.timeout_s:g} s "
              f"({', '.join(w for w in where if w)}); a rank may be stalled or dead; "
              f"ending the job", file=self.out or sys.stderr, flush=True)
        self.on_stall()
        return True

    def start(self):
        if self.timeout_s and self._thread is None:
            self._stop.clear()
            self.pet("set-up")
            poll = min(1.0, self.timeout_s / 10)     # fires at most 10% late
            self._thread = threading.Thread(target=self._watch, args=(poll,), daemon=True,
                                            name="watchdog")
            self._thread.start()
        return self

    def _watch(self, poll):
        while not self._stop.wait(poll):
            if self.check():
                return

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
