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


def test_a_communicator_over_several_nodes_is_refused_in_one_line():
    """A stand-in communicator of 4 ranks of which 2 share this node (MPI's split by node)."""
    import types
    from mpi_impl import shm_ring
    node = types.SimpleNamespace(Get_size=lambda: 2, Free=lambda: None)
    comm = types.SimpleNamespace(Get_size=lambda: 4, Split_type=lambda kind: node)
    with pytest.raises(ValueError) as e:
        shm_ring.SharedBuffer(10, comm=comm)
    assert str(e.value) == ("shm_ring needs every rank on one node: the communicator spans 4 ranks, "
                            "2 on this node; use ring")


def test_bench_refuses_ring_shm_on_a_gpu(mpirun):
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--algo", "ring-shm", "--device", "gpu"], timeout=30)
    assert proc.returncode == 2, explain(proc)
    lines = proc.stderr.strip().splitlines()
    assert lines == ["mpi_impl.bench: error: --algo ring-shm reduces host memory only: use it with --device cpu"]
