"""The new collectives and what is built on them, under mpiexec on 1-4 ranks, each against an
oracle outside the code under test: reduce-scatter and all-gather (reduce_scatter.py,
all_gather.py) against MPI's own Reduce_scatter and Allgatherv; ZeRO-1/2/3 (zero.py) against
plain ring SGD's weights and the closed-form memory; PowerSGD and top-k (powersgd.py,
topk.py) against MPI's Allreduce and their closed-form bytes."""
import pytest

from mpirun import explain


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_reduce_scatter_and_all_gather_match_mpi(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/shard_collectives_check.py"], timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_zero_stages_equal_plain_sgd_and_hold_their_shards(ranks, mpirun):
    """ZeRO-1/2/3 weights equal ring SGD's after 4 steps (float64, MLP and CNN, with and
    without overlap buckets), and each rank holds the closed form's bytes."""
    proc = mpirun(ranks, ["tests/mpi_checks/zero_check.py"], timeout=90)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_powersgd_and_topk_against_mpi_and_closed_forms(ranks, mpirun):
    """PowerSGD at full rank and top-k at ratio 1 give MPI's Allreduce; their error feedback
    loses nothing; bytes sent equal the closed forms (tests/mpi_checks/compress_check.py)."""
    proc = mpirun(ranks, ["tests/mpi_checks/compress_check.py"], timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout
