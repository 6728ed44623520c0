"""mpi_impl.shm_ring and shm_halving_doubling (the all-reduces over MPI-3 shared memory)
against MPI's own Allreduce, under mpiexec: tests/mpi_checks/shm_ring_check.py loops over
lengths (divisible by p and not), float32 and float64, several calls in a row in one window."""
import pytest

from mpirun import explain


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_shm_ring_matches_mpi_allreduce(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/shm_ring_check.py", "shm_ring"], timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_shm_halving_doubling_matches_mpi_allreduce(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/shm_ring_check.py", "shm_halving_doubling"], timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_hand_back_leaves_the_sum_in_both_arrays():
    """shm_window.add_and_hand_back over lengths that are and are not whole pieces."""
    import numpy as np
    from mpi_impl import shm_window
    piece = shm_window.PIECE_BYTES // 4
    for n in (0, 1, piece - 1, piece, 2 * piece + 3):
        a, b = np.arange(n, dtype=np.float32), np.full(n, 0.5, np.float32)
        want = a + b
        shm_window.add_and_hand_back(a, b)
        assert np.array_equal(a, want) and np.array_equal(b, want), n


def test_halving_doubling_shm_refuses_three_ranks_in_one_line(mpirun):
    proc = mpirun(3, ["-m", "mpi_impl.bench", "--algo", "halving-doubling-shm", "--sizes", "1K"], timeout=30)
    assert proc.returncode == 2, explain(proc)
    assert proc.stderr.strip().splitlines() == [
        "mpi_impl.bench: error: --algo halving-doubling-shm needs a power of two ranks, got 3; use ring-shm"]


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
    assert str(e.value) == ("a shared-memory all-reduce needs every rank on one node: the communicator "
                            "spans 4 ranks, 2 on this node; use ring")


@pytest.mark.parametrize("algo", ["ring-shm", "halving-doubling-shm"])
def test_bench_refuses_shared_memory_on_a_gpu(algo, mpirun):
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--algo", algo, "--device", "gpu"], timeout=30)
    assert proc.returncode == 2, explain(proc)
    lines = proc.stderr.strip().splitlines()
    assert lines == [f"mpi_impl.bench: error: --algo {algo} reduces host memory only: use it with --device cpu"]


def test_the_bench_rotates_which_call_goes_first():
    """mpi_impl.bench.time_interleaved: every call is timed every round, before runs right
    before its call, and round i starts with call i mod n (no call always follows the same)."""
    import types
    from mpi_impl.bench import time_interleaved
    log = []
    calls = [lambda j=j: log.append(("call", j)) for j in range(3)]
    before = [lambda: log.append(("before", 0)), None, lambda: log.append(("before", 2))]
    comm = types.SimpleNamespace(Barrier=lambda: None, Allreduce=lambda *a, **k: None)
    times = time_interleaved(calls, comm, iters=3, warmup=1, before=before)
    assert times.shape == (3, 3)
    order = [j for kind, j in log if kind == "call"]
    assert order == [0, 1, 2] + [0, 1, 2, 1, 2, 0, 2, 0, 1]      # warm-up round 0, then rounds 0, 1, 2
    for k, (kind, j) in enumerate(log):
        if kind == "before":
            assert log[k + 1] == ("call", j)
