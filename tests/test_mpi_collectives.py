"""The hand-written all-reduce algorithms against MPI's own Allreduce, under mpiexec.

One mpiexec launch per rank count runs tests/mpi_checks/collectives_check.py, which loops
over all algorithms, lengths (0, 1, fewer than the ranks, odd), dtypes and shapes.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from mpirun import ROOT, run_mpi


def _explain(proc):
    return f"exit code {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_every_algorithm_matches_mpi_allreduce(ranks):
    proc = run_mpi(ranks, ["tests/mpi_checks/collectives_check.py"], timeout=60)
    assert proc.returncode == 0, _explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_bench_prints_a_table_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = run_mpi(2, ["-m", "mpi_impl.bench", "--algo", "ring,tree,mpi,1bit", "--sizes", "1K,64K",
                       "--iters", "3", "--warmup", "1", "--json", str(out)], timeout=60)
    assert proc.returncode == 0, _explain(proc)
    lines = [l for l in proc.stdout.splitlines() if l.strip() and not l.startswith("#")]
    assert lines[0].split()[:2] == ["size", "algo"]
    assert len(lines) == 1 + 2 * 4                        # printed once, by rank 0 only
    rows = json.loads(out.read_text())["rows"]
    assert [(r["size_bytes"], r["algo"]) for r in rows][:2] == [(1024, "ring"), (1024, "tree")]
    for r in rows:
        assert r["time_us"] > 0
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"])   # 2 (p-1)/p = 1 for p = 2
    ring64k = next(r for r in rows if r["algo"] == "ring" and r["size_bytes"] == 65536)
    assert ring64k["sent_per_rank_bytes"] == 65536                # 2 (p-1)/p m


def test_bench_rejects_unknown_algorithm_on_every_rank():
    proc = run_mpi(2, ["-m", "mpi_impl.bench", "--algo", "ring,bogus"], timeout=30)
    assert proc.returncode == 2, _explain(proc)
    assert "bogus" in proc.stderr and "sharded-ps" in proc.stderr


def test_bytes_sent_formulas():
    # no MPI job needed: the closed forms of the cost models (m = 4000 bytes)
    import mpi_impl
    m = 1000
    assert mpi_impl.bytes_sent("ring", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("ps", m, 4, 4, rank=0) == 3 * 4000
    assert mpi_impl.bytes_sent("ps", m, 4, 4, rank=2) == 4000
    assert mpi_impl.bytes_sent("sharded-ps", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("tree", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("tree", m, 4, 3, rank=0) == 4000           # folded away
    assert mpi_impl.bytes_sent("ring", m, 4, 1) == 0
    with pytest.raises(ValueError, match="ring"):
        mpi_impl.bytes_sent("bogus", m, 4, 2)


def test_import_does_not_need_cupy():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, mpi_impl; assert 'cupy' not in sys.modules; "
                         "print(mpi_impl.ALGORITHMS)"],
        capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "sharded-ps" in proc.stdout


def test_gpu_arrays_are_staged_unless_mpi_is_cuda_aware(monkeypatch):
    # a stand-in for the cupy module: only its name matters for the choice
    import types
    from mpi4py import MPI
    import mpi_impl
    fake_cupy = types.SimpleNamespace(__name__="cupy")
    monkeypatch.delenv("MPI_IMPL_CUDA_AWARE", raising=False)
    assert mpi_impl.make_wire(MPI.COMM_SELF, fake_cupy).stage is True
    assert mpi_impl.make_wire(MPI.COMM_SELF, fake_cupy, cuda_aware=True).stage is False
    monkeypatch.setenv("MPI_IMPL_CUDA_AWARE", "1")
    assert mpi_impl.make_wire(MPI.COMM_SELF, fake_cupy).stage is False
    assert mpi_impl.make_wire(MPI.COMM_SELF, np).stage is False       # NumPy: never staged
