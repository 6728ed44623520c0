"""Hostile input to mpi_impl (issue 34): one rank's mistake never hangs the others, planted
and forged files are refused, sizes are limited before anything is allocated, and Ctrl-C
ends a run in one line.  Every MPI job here is small and has a hard time limit."""
import pytest


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_algorithm_sums_strided_inputs_and_outputs(ranks, mpirun):
    """A strided x or out, on every rank or on one only, is summed as MPI's own Allreduce
    sums contiguous copies (it used to raise BufferError on that rank and hang the rest)."""
    proc = mpirun(ranks, ["tests/mpi_checks/layout_check.py"], timeout=60)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert f"{ranks} ranks, 0 failures" in proc.stdout
