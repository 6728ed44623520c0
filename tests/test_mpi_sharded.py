"""Reduce-scatter and all-gather (mpi_impl/reduce_scatter.py, all_gather.py) against MPI's
own Reduce_scatter and Allgatherv, on 1-4 ranks (tests/mpi_checks/shard_collectives_check.py)."""
import pytest


def _explain(proc):
    return f"exit code {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_reduce_scatter_and_all_gather_match_mpi(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/shard_collectives_check.py"], timeout=60)
    assert proc.returncode == 0, _explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout
