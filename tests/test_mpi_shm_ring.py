"""mpi_impl.shm_ring (the ring over MPI-3 shared memory) against MPI's own Allreduce, under
mpiexec: tests/mpi_checks/shm_ring_check.py loops over lengths (divisible by p and not),
float32 and float64, several calls in a row in one window."""
import pytest

from mpirun import explain


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_shm_ring_matches_mpi_allreduce(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/shm_ring_check.py"], timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_a_gpu_array_is_refused_in_one_line():
    import types
    import numpy as np
    from mpi_impl import shm_ring
    gpu = type("ndarray", (), {"__module__": "cupy"})()
    shared = types.SimpleNamespace(array=np.zeros(3))
    assert "GPU" in shm_ring.problem_with(gpu, shared)
    assert "not the shared buffer's array" in shm_ring.problem_with(np.zeros(3), shared)
    assert shm_ring.problem_with(shared.array, shared) is None
