"""The device half on both devices: tests/mpi_checks/device_check.py (every all-reduce against
MPI's Allreduce on the host, host staging's copies, the 1-bit codec against its definition) on
NumPy arrays here, and on CuPy's where CuPy sees a GPU; then mpi_impl.train on the GPU against
the same training on the CPU. Without a GPU the GPU tests are skipped and say why
(`pytest -rs`)."""
import json
import math

import pytest

from mpi_impl.device import missing_cupy
from mpirun import explain, run_mpi

NO_GPU = missing_cupy("gpu")
GPU = pytest.mark.skipif(NO_GPU is not None, reason=f"CuPy sees no GPU here: {NO_GPU}")
TINY = ["-m", "mpi_impl.train", "--data", "synthetic", "--samples", "1024", "--width", "16", "--batch-per-rank", "16",
        "--epochs", "2"]


@pytest.mark.parametrize("ranks", [1, 2, 4])
def test_device_check_on_numpy_arrays(ranks):
    proc = run_mpi(ranks, ["tests/mpi_checks/device_check.py", "cpu"], timeout=120)
    assert proc.returncode == 0, explain(proc)
    assert f"device_check: {ranks} ranks, 0 failures" in proc.stdout


@GPU
@pytest.mark.parametrize("ranks", [1, 2])
def test_device_check_on_cupy_arrays(ranks):
    proc = run_mpi(ranks, ["tests/mpi_checks/device_check.py", "gpu"], timeout=300)
    assert proc.returncode == 0, explain(proc)
    assert f"device_check: {ranks} ranks, 0 failures" in proc.stdout


def trained(ranks, device, tmp_path, *extra):
    out = tmp_path / f"{device}-{ranks}{''.join(extra)}.json"
    proc = run_mpi(ranks, [*TINY, "--device", device, "--json", str(out), *extra], timeout=300)
    assert proc.returncode == 0, explain(proc)
    return json.loads(out.read_text())


@GPU
@pytest.mark.parametrize("ranks, extra", [(1, ()), (2, ()), (2, ("--compress", "1bit"))])
def test_training_on_the_gpu_follows_the_cpu(ranks, extra, tmp_path):
    """The same seeds on both devices: the losses agree to float32 rounding over two epochs."""
    gpu, cpu = trained(ranks, "gpu", tmp_path, *extra), trained(ranks, "cpu", tmp_path, *extra)
    assert math.isfinite(gpu["final_train_loss"])
    assert gpu["final_train_loss"] == pytest.approx(cpu["final_train_loss"], rel=1e-3)


class StandInCuPy:
    """A module that imports as `cupy` and answers getDeviceCount as told (an int, or an exception)."""
    __version__ = "0.0-test"

    def __init__(self, answer):
        def count():
            if isinstance(answer, Exception):
                raise answer
            return answer
        self.cuda = type("cuda", (), {"runtime": type("runtime", (), {"getDeviceCount": staticmethod(count)})})


@pytest.mark.parametrize("answer, says", [(RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"),
                                           "finds no usable GPU (RuntimeError: cudaErrorNoDevice"),
                                          (0, "sees no GPU"), (1, None)])
def test_the_gpu_marker_asks_cupy_for_a_gpu_not_only_for_cupy(monkeypatch, answer, says):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", StandInCuPy(answer))
    reason = missing_cupy("gpu")
    assert reason is None if says is None else (says in reason and "\n" not in reason)
    assert missing_cupy("cpu") is None
