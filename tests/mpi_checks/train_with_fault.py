"""Run under mpiexec: mpi_impl.train with one rank made to fail, or to compute slower.

    python tests/mpi_checks/train_with_fault.py fail RANK STEP [mpi_impl.train arguments]
    python tests/mpi_checks/train_with_fault.py slow RANK MS   [mpi_impl.train arguments]

fail: rank RANK raises RuntimeError at the start of its STEP-th training step (from 1), as
      a bug or a bad batch would; the test expects the whole job to end, non-zero, quickly.
slow: rank RANK's compute (forward + loss + backward) takes MS milliseconds longer at every
      training step, as a slower GPU would; the test expects a straggler_wait.

The fault is injected here, from outside: mpi_impl.train has no hooks for it. Both wrap a
function that mpi_impl.train calls once per training step (GradientAverager.begin right
before the step's compute, nets.softmax_cross_entropy inside it), then run train.main().
"""
import sys
import time

from mpi4py import MPI

from mpi_impl import nets, sgd, train

mode, target, amount, *train_args = sys.argv[1:]
target, amount = int(target), float(amount)
if mode not in ("fail", "slow"):
    sys.exit(f"unknown mode {mode!r}: fail or slow")      # on every rank alike

if MPI.COMM_WORLD.Get_rank() == target:
    if mode == "fail":
        begin, steps = sgd.GradientAverager.begin, [0]

        def failing_begin(self, *args, **kwargs):
            steps[0] += 1
            if steps[0] == amount:
                raise RuntimeError(f"injected failure at step {steps[0]}")
            return begin(self, *args, **kwargs)
        sgd.GradientAverager.begin = failing_begin
    else:
        loss = nets.softmax_cross_entropy

        def slow_loss(*args, **kwargs):
            time.sleep(amount / 1000)
            return loss(*args, **kwargs)
        nets.softmax_cross_entropy = slow_loss

train.main(train_args)
