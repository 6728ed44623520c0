"""Run under mpiexec: mpi_impl.train with one rank made to fail, or to compute slower.

    python tests/mpi_checks/train_with_fault.py fail RANK STEP [mpi_impl.train arguments]
    python tests/mpi_checks/train_with_fault.py slow RANK MS   [mpi_impl.train arguments]
    python tests/mpi_checks/train_with_fault.py kill-at-save RANK EPOCH [... --checkpoint DIR]
    python tests/mpi_checks/train_with_fault.py nan RANK STEP  [mpi_impl.train arguments]
    python tests/mpi_checks/train_with_fault.py interrupt RANK STEP [mpi_impl.train arguments]

fail: rank RANK raises RuntimeError at the start of its STEP-th training step (from 1), as
      a bug or a bad batch would; the test expects the whole job to end, non-zero, quickly.
slow: rank RANK's compute (forward + loss + backward) takes MS milliseconds longer at every
      training step, as a slower GPU would; the test expects a straggler_wait.
kill-at-save: the worst moment of a checkpoint. When rank RANK comes to save epoch EPOCH,
      it waits until every other rank's file of that epoch is in DIR, leaves half a
      temporary file of its own, and SIGKILLs itself: the others have saved EPOCH, it has
      not. The test expects --resume to go on from EPOCH - 1.
nan:  rank RANK's weights get a NaN right after its STEP-th momentum step (a divergence on
      one rank); the test expects no rank to save that epoch.
interrupt: rank RANK alone gets SIGINT (Ctrl-C) at the start of its STEP-th training step;
      the test expects one line, exit code 130, the whole job ended and no output file.

The fault is injected here, from outside: mpi_impl.train has no hooks for it. Each wraps a
function that mpi_impl.train calls (GradientAverager.begin right before a step's compute,
nets.softmax_cross_entropy inside it, MomentumSGD.step after it, checkpoint.save at an
epoch's end), then runs train.main().
"""
import os
import signal
import sys
import time

from mpi4py import MPI

from mpi_impl import checkpoint, nets, sgd, train

mode, target, amount, *train_args = sys.argv[1:]
target, amount = int(target), float(amount)
if mode not in ("fail", "slow", "kill-at-save", "nan", "interrupt"):
    sys.exit(f"unknown mode {mode!r}: fail, slow, kill-at-save, nan or interrupt")   # on every rank alike

if MPI.COMM_WORLD.Get_rank() == target:
    if mode in ("fail", "interrupt"):
        begin, steps = sgd.GradientAverager.begin, [0]

        def failing_begin(self, *args, **kwargs):
            steps[0] += 1
            if steps[0] == amount and mode == "interrupt":
                os.kill(os.getpid(), signal.SIGINT)
            elif steps[0] == amount:
                raise RuntimeError(f"injected failure at step {steps[0]}")
            return begin(self, *args, **kwargs)
        sgd.GradientAverager.begin = failing_begin
    elif mode == "kill-at-save":
        save = checkpoint.save

        def save_or_die(directory, rank, epoch, arrays, meta):
            if epoch != amount:
                return save(directory, rank, epoch, arrays, meta)
            others = [checkpoint.path_for(directory, r, epoch)
                      for r in range(MPI.COMM_WORLD.Get_size()) if r != rank]
            deadline = time.monotonic() + 30
            while not all(p.exists() for p in others) and time.monotonic() < deadline:
                time.sleep(0.01)
            half = checkpoint.path_for(directory, rank, epoch).with_suffix(".npz.tmp")
            half.write_bytes(b"PK\x03\x04 half a file")
            os.kill(os.getpid(), signal.SIGKILL)
        checkpoint.save = save_or_die
    elif mode == "nan":
        step, calls = sgd.MomentumSGD.step, [0]

        def step_then_nan(self, *args, **kwargs):
            result = step(self, *args, **kwargs)
            calls[0] += 1
            if calls[0] == amount:
                self.params[0] = float("nan")
            return result
        sgd.MomentumSGD.step = step_then_nan
    else:
        loss = nets.softmax_cross_entropy

        def slow_loss(*args, **kwargs):
            time.sleep(amount / 1000)
            return loss(*args, **kwargs)
        nets.softmax_cross_entropy = slow_loss

train.main(train_args)
