"""Bad input raises on every rank (never a hang), and a rank that dies ends the whole job."""
import time

import pytest



@pytest.mark.parametrize("ranks", [2, 3])
def test_bad_arguments_raise_on_every_rank(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/errors_check.py"], timeout=60)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert f"{ranks} ranks, 0 failures" in proc.stdout


@pytest.mark.parametrize("mode", ["kill", "exit", "raise", "excepthook"])
def test_one_rank_failing_ends_the_whole_job(mode, mpirun):
    start = time.monotonic()
    proc = mpirun(3, ["tests/mpi_checks/fault_check.py", mode], timeout=60)
    took = time.monotonic() - start
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "should not have" not in proc.stdout
    assert took < 30, f"the job took {took:.0f} s to end after a rank failed"
    if mode in ("raise", "excepthook"):
        assert "failed on purpose" in proc.stderr       # the message is printed before Abort
