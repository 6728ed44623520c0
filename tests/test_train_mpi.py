"""`mpiexec -n N python -m mpi_impl.train` end to end: accuracy, equal trajectories,
bitwise reproducibility, checkpoint/resume, failures and bad input.

Each job is small (the digits data, a 64-unit MLP): these tests run on a 2-core laptop
with 4 ranks oversubscribed. Results are compared through the --json output.
"""
import json
import re
import time

import numpy as np
import pytest


pytest.importorskip("sklearn")

# Synchronous SGD on the digits: 15 epochs of global batch 64 reach about 97% test accuracy.
DIGITS = ["--data", "digits", "--batch-per-rank", "16", "--lr", "0.1", "--momentum", "0.5"]


@pytest.fixture
def train(mpirun, tmp_path):
    """train(n, *args, name="run") runs the trainer on n ranks with --json tmp_path/name.json
    and returns (its JSON result, the CompletedProcess); fails with its stderr if it fails."""
    def run(n, *args, name="run", timeout=90, env=None):
        out = tmp_path / f"{name}.json"
        proc = mpirun(n, ["-m", "mpi_impl.train", *args, "--json", str(out)], timeout=timeout, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(out.read_text()), proc
    return run


def test_sgd_and_1bit_sgd_on_digits(train):
    sync, proc = train(4, *DIGITS, "--epochs", "15", name="sync")
    onebit, _ = train(4, *DIGITS, "--epochs", "15", "--compress", "1bit", name="onebit")
    plain, _ = train(4, *DIGITS, "--epochs", "15", "--compress", "1bit",
                     "--no-error-feedback", name="noef")
    acc = {k: r["final_test_accuracy"] for k, r in
           [("sync", sync), ("1bit", onebit), ("1bit, no error feedback", plain)]}
    assert acc["sync"] >= 0.95, acc
    assert acc["1bit"] >= acc["sync"] - 0.01, acc
    assert acc["1bit, no error feedback"] <= acc["sync"] - 0.02, acc
    # 1-bit sends about 1/32 of the bytes (plus one scale per 256 elements)
    assert onebit["bytes_sent_per_gpu"] < sync["bytes_sent_per_gpu"] / 20
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Finished Epoch")]
    assert len(lines) == 15 and lines[0].startswith("Finished Epoch [1 of 15]: loss = ")
    assert "samples per second" in lines[-1]
    # the printed words say what the figures are: the error rate, 1 - the JSON's accuracy
    test_error = float(re.search(r"test error = ([\d.]+)% \*", lines[-1]).group(1))
    assert test_error == pytest.approx(100 * (1 - sync["final_test_accuracy"]), abs=0.006)


TRAJECTORY = [*DIGITS, "--samples", "640", "--epochs", "2", "--dtype", "float64"]


def test_algorithms_follow_the_same_trajectory(train):
    runs = {}
    for sync in ("ring", "recursive-doubling", "halving-doubling", "ps", "sharded-ps", "mpi"):
        runs[sync] = train(4, *TRAJECTORY, "--sync", sync, name=sync)[0]
    # overlap: ring buckets in the communication thread, mpi buckets with Iallreduce
    # (0.004 MiB = 524 float64 values: the last layer's 650 gradients are a bucket of their own)
    for sync, mode in (("ring", "thread"), ("mpi", "iallreduce")):
        runs[f"{sync}+overlap"], proc = train(4, *TRAJECTORY, "--sync", sync, "--overlap",
                                              "--bucket-mib", "0.004", name=f"{sync}-overlap")
        assert f"overlap in 2 buckets ({mode})" in proc.stdout
    assert runs["ring+overlap"]["config"]["overlap"]
    reference = np.array([e["train_loss"] for e in runs["mpi"]["epochs"]])
    for name, run in runs.items():
        losses = np.array([e["train_loss"] for e in run["epochs"]])
        assert np.allclose(losses, reference, rtol=1e-9, atol=0), (name, losses, reference)
    # the tolerance is tight enough to notice a different run
    other = train(4, *TRAJECTORY, "--sync", "mpi", "--seed", "1", name="seed1")[0]
    assert not np.allclose([e["train_loss"] for e in other["epochs"]], reference, rtol=1e-9, atol=0)


RESUMABLE = [*DIGITS, "--compress", "1bit", "--loader-workers", "2", "--overlap",
             "--bucket-mib", "0.002"]          # 524 float32 values: 2 buckets


def test_same_seed_is_bitwise_reproducible_and_resume_equals_uninterrupted(tmp_path, train):
    first, proc = train(2, *RESUMABLE, "--epochs", "4", name="first")
    assert "overlap in 2 buckets (thread)" in proc.stdout
    second, _ = train(2, *RESUMABLE, "--epochs", "4", name="second")
    assert first["final_weights_sha256"] == second["final_weights_sha256"]

    ckpt = str(tmp_path / "ckpt")
    train(2, *RESUMABLE, "--epochs", "2", "--checkpoint", ckpt, name="part1")
    resumed, _ = train(2, *RESUMABLE, "--epochs", "4", "--checkpoint", ckpt, "--resume",
                       name="part2")
    assert resumed["final_weights_sha256"] == first["final_weights_sha256"]
    assert [e["train_loss"] for e in resumed["epochs"]] == [e["train_loss"] for e in first["epochs"]]
    # two generations per rank are kept: epochs 3 and 4
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == [
        "rank0.epoch3.npz", "rank0.epoch4.npz", "rank1.epoch3.npz", "rank1.epoch4.npz"]
    with np.load(tmp_path / "ckpt" / "rank1.epoch4.npz") as saved:
        assert {"worker_residual_0", "worker_residual_1", "velocity"} <= set(saved.files)
        assert json.loads(str(saved["meta"]))["epoch"] == 4


def test_resume_refuses_changed_settings(tmp_path, mpirun, train):
    ckpt = str(tmp_path / "ckpt")
    train(2, *DIGITS, "--epochs", "1", "--checkpoint", ckpt, name="a")
    proc = mpirun(2, ["-m", "mpi_impl.train", *DIGITS, "--epochs", "2", "--width", "32",
                       "--checkpoint", ckpt, "--resume"], timeout=60)
    assert proc.returncode == 2 and "--width" in proc.stderr and "Traceback" not in proc.stderr


def test_resume_refuses_a_checkpoint_with_buckets_in_mb(tmp_path, mpirun, train):
    """Checkpoints written before buckets were in MiB carry bucket_mb (in 10**6 bytes): a
    different bucket layout, so they are refused with one line rather than read."""
    ckpt = tmp_path / "ckpt"
    train(2, *DIGITS, "--epochs", "1", "--checkpoint", str(ckpt), name="a")
    for rank in (0, 1):                       # make it look like an old one
        path = ckpt / f"rank{rank}.epoch1.npz"
        with np.load(path) as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(str(arrays.pop("meta")))
        meta["config"]["bucket_mb"] = meta["config"].pop("bucket_mib")
        np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
    proc = mpirun(2, ["-m", "mpi_impl.train", *DIGITS, "--epochs", "2", "--checkpoint", str(ckpt),
                       "--resume"], timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "bucket_mb" in lines[0] and "--bucket-mib" in lines[0] and "rank0.epoch1.npz" in lines[0]


def test_json_and_trace(tmp_path, train):
    from dpsim.vocabulary import BREAKDOWN, OTHER
    trace = tmp_path / "trace.json"
    result, _ = train(2, "--model", "cnn", "--width", "4", "--data", "digits",
                      "--samples", "256", "--batch-per-rank", "16", "--epochs", "2",
                      "--loader-workers", "0", "--decode-ms", "0.2", "--trace", str(trace))
    assert list(result["breakdown_s"]) == [*BREAKDOWN, OTHER]
    assert list(result["work_s"]) == ["load", "communication", "codec"]
    assert result["model"]["params"] > 0 and result["model"]["flops_per_sample"] > 0
    epoch = result["epochs"][-1]
    assert set(epoch) >= {"train_loss", "train_accuracy", "test_loss", "test_accuracy",
                          "samples_per_s", "iteration_time_s", "breakdown_s", "work_s"}
    # 128 samples per rank per epoch, each decoded for at least 0.2 ms, inside the loop
    assert epoch["work_s"]["load"] >= 128 * 0.2e-3 * 0.9
    assert epoch["breakdown_s"]["data_wait"] >= epoch["work_s"]["load"]
    for part, work in zip(epoch["breakdown_s_per_rank"], epoch["work_s_per_rank"]):
        # without overlap the all-reduce runs after backward: all of it is waited for
        waited = part["exposed_comm"] + part["compression"] + part["straggler_wait"]
        assert waited >= work["communication"] > 0
        assert part["compression"] == 0 == work["codec"]             # nothing compressed
        assert all(seconds >= 0 for seconds in part.values()), part
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {0, 1}
    assert all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    assert {e["args"]["name"] for e in events if e["name"] == "process_name"} == {"rank 0", "rank 1"}
    assert {"forward + backward", "sgd step", "load batch"} <= {e["name"] for e in events}


def adds_up(parts, total):
    """The parts sum to the total, up to the rounding of the measured values (about 1e-16 s
    each for times of a fraction of a second; 1e-12 leaves room)."""
    return abs(sum(parts.values()) - total) <= 1e-12


@pytest.mark.parametrize("extra", [[], ["--compress", "1bit", "--overlap", "--bucket-mib", "0.002"]])
def test_the_breakdown_adds_up_to_the_iteration_time(extra, train):
    from dpsim.vocabulary import BREAKDOWN, OTHER
    result, _ = train(2, *DIGITS, "--epochs", "2", *extra)
    assert list(result["breakdown_s"]) == [*BREAKDOWN, OTHER]
    assert adds_up(result["breakdown_s"], result["iteration_time_s"])
    for epoch in result["epochs"]:
        assert adds_up(epoch["breakdown_s"], epoch["time_s"])
        assert epoch["iteration_time_s"] * epoch["steps"] == pytest.approx(epoch["time_s"], rel=1e-12)
        for part in epoch["breakdown_s_per_rank"]:
            assert list(part) == [*BREAKDOWN, OTHER] and min(part.values()) >= 0, part
    if extra:                                  # 1-bit: the codec ran, and some of it was waited for
        assert result["work_s"]["codec"] > 0 and result["breakdown_s"]["compression"] > 0
        assert result["breakdown_s"]["compression"] <= result["work_s"]["codec"] + 1e-12


def test_a_slower_rank_shows_as_straggler_wait(tmp_path, mpirun, train):
    """Rank 1 computes 5 ms longer every step (injected by tests/mpi_checks/train_with_fault.py):
    the mean rank waits about half of that for it, taken out of its exposed_comm."""
    from dpsim.vocabulary import BREAKDOWN, OTHER
    args = [*DIGITS, "--samples", "640", "--epochs", "2"]
    even, _ = train(2, *args, name="even")
    out = tmp_path / "slow.json"
    proc = mpirun(2, ["tests/mpi_checks/train_with_fault.py", "slow", "1", "5", *args,
                       "--json", str(out)], timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    slow = json.loads(out.read_text())
    assert list(slow["breakdown_s"]) == [*BREAKDOWN, OTHER]
    assert adds_up(slow["breakdown_s"], slow["iteration_time_s"])
    straggler = slow["breakdown_s"]["straggler_wait"]
    assert 0.4 * 2.5e-3 <= straggler <= 2 * 2.5e-3, slow["breakdown_s"]   # loose: a shared machine
    assert straggler > 2 * even["breakdown_s"]["straggler_wait"]
    fast, slowest = slow["epochs"][-1]["breakdown_s_per_rank"]
    assert fast["straggler_wait"] > 10 * slowest["straggler_wait"]


def test_cifar10_binary_data_with_cnn(tmp_path, train):
    rng = np.random.default_rng(0)
    records = np.concatenate([rng.integers(0, 10, (64, 1)), rng.integers(0, 256, (64, 3072))],
                             axis=1).astype(np.uint8)
    records.tofile(tmp_path / "data_batch_1.bin")
    result, _ = train(2, "--data", "cifar10", "--data-dir", str(tmp_path),
                      "--model", "cnn", "--width", "4", "--batch-per-rank", "8", "--epochs", "1")
    assert result["steps_per_epoch"] == 3 and result["epochs"][0]["samples"] == 48


def test_a_failing_rank_ends_the_job(mpirun):
    """Rank 2 raises at its 3rd step (injected by tests/mpi_checks/train_with_fault.py) while
    the others go on into the all-reduce: the whole job must end, not hang."""
    start = time.monotonic()
    proc = mpirun(4, ["tests/mpi_checks/train_with_fault.py", "fail", "2", "3", *DIGITS,
                       "--epochs", "5"], timeout=60)
    assert proc.returncode != 0
    assert "rank 2: RuntimeError: injected failure at step 3" in proc.stderr
    assert "Finished Epoch" not in proc.stdout
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("args, names", [
    (["--sync", "butterfly"], ["--sync", "'butterfly'", "ring", "recursive-doubling",
                               "halving-doubling", "sharded-ps", "mpi", "nccl"]),
    (["--sync", "tree"], ["--sync", "'tree' is gone", "recursive-doubling", "halving-doubling"]),
    (["--bucket-mb", "1"], ["--bucket-mb is now --bucket-mib", "MiB"]),
    (["--overlap", "--bucket-mb"], ["--bucket-mb is now --bucket-mib"]),
    (["--batch-per-rank", "0"], ["--batch-per-rank", "must be > 0"]),
    (["--compress", "2bit"], ["--compress", "none", "1bit"]),
    (["--data", "synthetic", "--samples", "3"], ["4 ranks", "3 training samples"]),
    (["--data", "digits", "--batch-per-rank", "500"], ["--batch-per-rank 500", "359"]),
    (["--sync", "nccl"], ["--sync nccl", "--device gpu"]),
    (["--lr", "nan"], ["--lr", "finite", "nan"]),
    (["--momentum", "inf"], ["--momentum", "finite", "inf"]),
    (["--bucket-mib=-inf"], ["--bucket-mib", "finite", "-inf"]),
    (["--decode-ms", "NaN"], ["--decode-ms", "finite", "NaN"]),
    (["--json", "no/such/folder/run.json"], ["--json", "no/such/folder/run.json", "no directory"]),
    (["--trace", "tests"], ["--trace", "'tests' is a directory"]),
    (["--checkpoint", "README.md"], ["--checkpoint README.md", "is a file"]),
])
def test_bad_input_is_one_clear_line(args, names, mpirun):
    proc = mpirun(4, ["-m", "mpi_impl.train", *args], timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpi_impl.train: error: "), proc.stderr
    for name in names:
        assert name in lines[0], lines[0]


def test_synthetic_data_is_learnable_on_one_rank(train):
    result, _ = train(1, "--data", "synthetic", "--samples", "4096", "--epochs", "3",
                      "--lr", "0.1", "--batch-per-rank", "64")
    assert result["final_test_accuracy"] > 0.6                   # chance is 0.1
