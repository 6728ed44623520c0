"""The hand-written all-reduce algorithms against MPI's own Allreduce, under mpiexec.

One mpiexec launch per rank count runs tests/mpi_checks/collectives_check.py, which loops
over all algorithms, lengths (0, 1, fewer than the ranks, odd), dtypes and shapes.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from mpirun import ROOT, explain


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_every_algorithm_matches_mpi_allreduce(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/collectives_check.py"], timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_bench_prints_a_table_and_writes_json(tmp_path, mpirun):
    out = tmp_path / "bench.json"
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--algo", "ring,halving-doubling,mpi,1bit", "--sizes", "1K,64K",
                       "--iters", "3", "--warmup", "1", "--json", str(out)], timeout=60)
    assert proc.returncode == 0, explain(proc)
    lines = [l for l in proc.stdout.splitlines() if l.strip() and not l.startswith("#")]
    assert lines[0].split()[:2] == ["size", "algo"]
    assert len(lines) == 1 + 2 * 4                        # printed once, by rank 0 only
    rows = json.loads(out.read_text())["rows"]
    assert [(r["size_bytes"], r["algo"]) for r in rows][:2] == [(1024, "ring"), (1024, "halving-doubling")]
    for r in rows:
        assert r["time_us"] > 0
        assert r["busbw_gbs"] == pytest.approx(r["algbw_gbs"])   # 2 (p-1)/p = 1 for p = 2
    ring64k = next(r for r in rows if r["algo"] == "ring" and r["size_bytes"] == 65536)
    assert ring64k["sent_per_rank_bytes"] == 65536                # 2 (p-1)/p m
    # the textbook model: the ring's alpha-beta-gamma time with the figures the bench measured
    # (not a bound: tests/test_bench_bound.py holds the bound)
    machine = json.loads(out.read_text())["machine"]
    alpha, beta, gamma = machine["alpha_us"] * 1e-6, 1e-9 / machine["beta_gbs"], 1e-9 / machine["gamma_gbs"]
    assert alpha > 0 and beta > 0 and gamma > 0 and machine["one_way_gbs"] > 0
    m = 65536
    expected = 2 * alpha + m * beta + m / 2 * gamma              # p = 2: 2(p-1) alpha + ...
    assert ring64k["textbook_us"] * 1e-6 == pytest.approx(expected, rel=1e-9)
    assert ring64k["of_bound"] == pytest.approx(ring64k["bound_us"] / ring64k["time_us"])
    assert "bound(us)" in lines[0] and "of bound" in proc.stdout and "textbook(us)" in lines[0]
    onebit = next(r for r in rows if r["algo"] == "1bit" and r["size_bytes"] == 65536)
    assert onebit["bound_us"] > 0 and onebit["segment_bytes"] is None


def test_bench_times_every_segment_size(tmp_path, mpirun):
    out = tmp_path / "bench.json"
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--algo", "ring,mpi", "--sizes", "64K",
                      "--segment", "4K,1000,none", "--iters", "2", "--warmup", "1",
                      "--json", str(out)], timeout=60)
    assert proc.returncode == 0, explain(proc)
    rows = json.loads(out.read_text())["rows"]
    assert [(r["algo"], r["segment_bytes"]) for r in rows] == \
        [("ring", 4096), ("ring", 1000), ("ring", None), ("mpi", None)]
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--segment", "0"], timeout=30)
    assert proc.returncode == 2 and "none for whole messages" in proc.stderr, explain(proc)


def test_bench_on_one_rank_writes_valid_json(tmp_path, mpirun):
    out = tmp_path / "one.json"
    proc = mpirun(1, ["-m", "mpi_impl.bench", "--algo", "ring", "--sizes", "1K", "--iters", "1",
                      "--warmup", "0", "--json", str(out)], timeout=60)
    assert proc.returncode == 0, explain(proc)
    def refuse(constant):
        raise ValueError(f"{constant} in the JSON")
    result = json.loads(out.read_text(), parse_constant=refuse)
    assert result["machine"]["beta_gbs"] is None and result["rows"][0]["of_bound"] is None


@pytest.mark.parametrize("n", range(2, 10))
@pytest.mark.parametrize("algo", ["ring", "recursive-doubling", "halving-doubling", "sharded-ps"])
def test_seconds_match_dpsim_closed_forms(algo, n):
    """mpi_impl's cost formulas against dpsim.analytic's, written separately."""
    import mpi_impl
    from dpsim import analytic
    formula = {"ring": analytic.ring, "recursive-doubling": analytic.recursive_doubling,
               "halving-doubling": analytic.halving_doubling, "sharded-ps": analytic.sharded_ps}[algo]
    alpha, beta, gamma = 3e-6, 1e-10, 2.5e-10
    m = 1 << 20
    assert mpi_impl.seconds(algo, m // 4, 4, n, alpha, beta, gamma) == \
        pytest.approx(formula(n, m, alpha, beta, gamma), rel=1e-12)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("algo", ["ring", "halving-doubling", "sharded-ps", "mpi"])
def test_seconds_beta_term_is_the_bytes_each_rank_sends(algo, n):
    """With alpha = gamma = 0 and beta = 1 s/byte, the time is the bytes a rank sends,
    counted by replaying the schedule (bytes_sent), for a power of two and m divisible by n."""
    import mpi_impl
    count = 4096
    assert mpi_impl.seconds(algo, count, 4, n, 0.0, 1.0, 0.0) == \
        pytest.approx(mpi_impl.bytes_sent(algo, count, 4, n))
    assert mpi_impl.seconds(algo, count, 4, 1, 1.0, 1.0, 1.0) == 0.0


@pytest.mark.parametrize("algo, words", [
    ("ring,bogus", ["'bogus'", "sharded-ps", "halving-doubling"]),
    ("ring,tree", ["'tree' is gone", "recursive-doubling", "halving-doubling"]),
])
def test_bench_rejects_unknown_algorithm_on_every_rank(algo, words, mpirun):
    proc = mpirun(2, ["-m", "mpi_impl.bench", "--algo", algo], timeout=30)
    assert proc.returncode == 2, explain(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpi_impl.bench: error: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_algorithm_names_are_the_vocabulary_s():
    import mpi_impl
    from dpsim import vocabulary
    assert set(mpi_impl.ALGORITHMS) <= set(vocabulary.ALGORITHMS)
    assert {"recursive-doubling", "halving-doubling"} <= set(mpi_impl.ALGORITHMS)
    assert "tree" not in mpi_impl.ALGORITHMS


def test_the_old_name_tree_is_refused_with_the_vocabulary_s_hint():
    import mpi_impl
    from dpsim import vocabulary
    for call in (lambda: mpi_impl.bytes_sent("tree", 10, 4, 2),
                 lambda: mpi_impl.allreduce(np.ones(3), "tree", check=False)):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == vocabulary.unknown_algorithm("tree", mpi_impl.ALGORITHMS)
        assert "recursive-doubling" in str(e.value) and "halving-doubling" in str(e.value)


def test_bytes_sent_formulas():
    # no MPI job needed: the closed forms of the cost models (m = 4000 bytes)
    import mpi_impl
    m = 1000
    assert mpi_impl.bytes_sent("ring", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("ps", m, 4, 4, rank=0) == 3 * 4000
    assert mpi_impl.bytes_sent("ps", m, 4, 4, rank=2) == 4000
    assert mpi_impl.bytes_sent("sharded-ps", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("halving-doubling", m, 4, 4) == 2 * 3 * 4000 // 4
    assert mpi_impl.bytes_sent("halving-doubling", m, 4, 3, rank=2) == 4000   # folded away
    assert mpi_impl.bytes_sent("halving-doubling", m, 4, 3, rank=0) == 4000 + 4000  # halves + unfold
    assert mpi_impl.bytes_sent("ring", m, 4, 1) == 0
    with pytest.raises(ValueError, match="ring"):
        mpi_impl.bytes_sent("bogus", m, 4, 2)


def log2(p):
    return p.bit_length() - 1


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("count", [0, 1, 7, 1000])
def test_recursive_doubling_bytes_against_its_closed_form(n, count):
    """log2(p) whole vectors per rank; ranks p..n-1 send one (the fold) and ranks 0..r-1
    one more (the unfold), p the largest power of two <= n, r = n - p."""
    import mpi_impl
    m = 8 * count
    p = 1 << log2(n)
    r = n - p
    for rank in range(n):
        expected = m if rank >= p else log2(p) * m + (m if rank < r else 0)
        assert mpi_impl.bytes_sent("recursive-doubling", count, 8, n, rank) == expected, rank
    total = sum(mpi_impl.bytes_sent("recursive-doubling", count, 8, n, rank) for rank in range(n))
    assert total == (p * log2(p) + 2 * r) * m


@pytest.mark.parametrize("n", range(1, 10))
@pytest.mark.parametrize("count", [0, 1, 7, 1000, 1024])
def test_halving_doubling_bytes_against_its_closed_form(n, count):
    """In all, the p ranks send 2 (p - 1) m (the ring's 2 (p - 1)/p m each), plus 2 r m for
    the fold and unfold; with count divisible by p, each of the p sends exactly its share."""
    import mpi_impl
    m = 4 * count
    p = 1 << log2(n)
    r = n - p
    sent = [mpi_impl.bytes_sent("halving-doubling", count, 4, n, rank) for rank in range(n)]
    assert sum(sent) == (2 * (p - 1) + 2 * r) * m
    assert all(sent[rank] == m for rank in range(p, n))
    if count % p == 0:
        assert all(sent[rank] == 2 * (p - 1) * m // p + (m if rank < r else 0) for rank in range(p))


def mpich_allreduce_selection():
    """The default selection rules for MPI_Allreduce compiled into the mpich wheel's libmpi
    (the third JSON document in it that mentions allreduce: the MPIR level)."""
    import pathlib
    libs = sorted(pathlib.Path(sys.prefix, "lib").glob("libmpi.so*")) + \
        sorted(pathlib.Path(sys.prefix, "lib").glob("libmpi.*.dylib"))
    if not libs:
        pytest.skip(f"no libmpi under {sys.prefix}/lib (MPI not from the mpich wheel)")
    blob = max(libs, key=lambda p: p.stat().st_size).read_bytes()
    key = b'"collective=allreduce":{"comm_type=intra":{"avg_msg_size<=0"'
    at = blob.index(key)
    start, end = blob.rindex(b"\0", 0, at) + 1, blob.index(b"\0", at)
    return json.loads(blob[start:end])["collective=allreduce"]["comm_type=intra"]


def test_mpi_is_what_mpich_picks():
    """mpi_builtin.choice against MPICH's own selection rules: recursive doubling for at most
    8 bytes or fewer elements than the largest power of two <= p, else reduce-scatter +
    all-gather (halving-doubling); and the mean bytes of that algorithm."""
    from mpi_impl import bytes_sent, mpi_builtin
    intra = mpich_allreduce_selection()
    rd, hd = "algorithm=MPIR_Allreduce_intra_recursive_doubling", \
        "algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather"
    assert list(intra["avg_msg_size<=8"]) == [rd]
    built_in = intra["avg_msg_size=any"]["is_op_built_in=yes"]
    assert list(built_in["count<pow2"]) == [rd] and list(built_in["count=any"]) == [hd]
    assert mpi_builtin.choice(2, 4, 4) == "recursive-doubling"          # 8 bytes
    assert mpi_builtin.choice(3, 4, 4) == "recursive-doubling"          # 12 bytes, but 3 < p = 4
    assert mpi_builtin.choice(4, 4, 4) == "halving-doubling"            # 4 >= p
    assert mpi_builtin.choice(7, 8, 11) == "recursive-doubling"         # 7 < p = 8
    assert mpi_builtin.choice(8, 8, 11) == "halving-doubling"
    for n, count in ((4, 7), (4, 1000), (6, 1000), (8, 5)):
        algo = mpi_builtin.choice(count, 4, n)
        mean = sum(bytes_sent(algo, count, 4, n, r) for r in range(n)) // n
        assert bytes_sent("mpi", count, 4, n) == mean


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


def test_pick_device_on_the_cpu():
    from mpi4py import MPI
    import mpi_impl
    from mpi_impl.device import usable_cores
    device = mpi_impl.pick_device("cpu", MPI.COMM_SELF)
    assert device.xp is np and device.parallel == usable_cores() >= 1
    device.wait()                                        # nothing to wait for
    first = device.clock()
    assert device.clock() >= first
    with pytest.raises(ValueError, match="cpu or gpu"):
        mpi_impl.pick_device("tpu", MPI.COMM_SELF)
