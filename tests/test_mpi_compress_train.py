"""`mpiexec -n 4 python -m mpi_impl.train` with ZeRO (--sync zero1|zero2|zero3) and with
PowerSGD and top-k (--compress powersgd|topk), end to end through the --json output: the same
trajectory as ring SGD where they must be exact, accuracy on digits within 1.5 points of
synchronous SGD where they compress, memory and bytes per rank against closed forms, and
one-line refusals of bad values."""
import json

import numpy as np
import pytest

pytest.importorskip("sklearn")

DIGITS = ["--data", "digits", "--batch-per-rank", "16", "--lr", "0.1", "--momentum", "0.5"]
SHORT = [*DIGITS, "--samples", "640", "--epochs", "2", "--dtype", "float64"]
PARAMS = 64 * 64 + 64 + 64 * 10 + 10          # the digits MLP: 64 inputs, 64 hidden, 10 classes


@pytest.fixture
def train(mpirun, tmp_path):
    def run(n, *args, name="run", timeout=90):
        out = tmp_path / f"{name}.json"
        proc = mpirun(n, ["-m", "mpi_impl.train", *args, "--json", str(out)], timeout=timeout)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(out.read_text())
    return run


def losses(run):
    return np.array([e["train_loss"] for e in run["epochs"]])


def test_zero_and_exact_compression_follow_ring_sgd(train):
    p = 4
    ring = train(p, *SHORT, name="ring")
    runs = {s: train(p, *SHORT, "--sync", s, name=s) for s in ("zero1", "zero2", "zero3")}
    runs["powersgd full rank"] = train(p, *SHORT, "--compress", "powersgd", "--powersgd-rank", "64",
                                       name="powersgd")
    runs["topk ratio 1"] = train(p, *SHORT, "--compress", "topk", "--topk-ratio", "1", name="topk")
    for name, run in runs.items():
        assert np.allclose(losses(run), losses(ring), rtol=1e-9, atol=0), (name, losses(run), losses(ring))
    # memory per rank: the closed form (8-byte values; a sharded part is the rank's chunk,
    # at most ceil(n / p) per unit: one unit for zero1/2, one per layer for zero3)
    whole, shard = PARAMS * 8, -(-PARAMS // p) * 8
    layers = [64 * 64 + 64, 64 * 10 + 10]
    layer_shard = sum(-(-n // p) for n in layers) * 8
    assert ring["memory_per_rank_bytes"] == {"params": whole, "grads": whole, "optimizer_state": whole}
    assert runs["zero1"]["memory_per_rank_bytes"] == {"params": whole, "grads": whole, "optimizer_state": shard}
    assert runs["zero2"]["memory_per_rank_bytes"] == {"params": whole, "grads": shard, "optimizer_state": shard}
    assert runs["zero3"]["memory_per_rank_bytes"] == {"params": layer_shard, "grads": layer_shard,
                                                      "optimizer_state": layer_shard}
    for stage in ("zero1", "zero2", "zero3"):       # every rank's shards add up to the model
        assert sum(m["optimizer_state"] for m in runs[stage]["memory_bytes_by_rank"]) == whole
    # bytes per rank and step (mean over ranks): 2 (p-1)/p m for the ring and zero1/2
    # (reduce-scatter + all-gather), 3 (p-1)/p m for zero3 (two all-gathers per layer)
    assert ring["bytes_sent_per_gpu"] == pytest.approx(2 * (p - 1) / p * whole, rel=1e-12)
    assert runs["zero1"]["bytes_sent_per_gpu"] == pytest.approx(2 * (p - 1) / p * whole, rel=1e-12)
    assert runs["zero3"]["bytes_sent_per_gpu"] == pytest.approx(3 * (p - 1) / p * whole, rel=1e-12)


def test_powersgd_and_topk_reach_sgd_accuracy_on_digits(train):
    """15 epochs of global batch 64: rank-1 PowerSGD and top-1% with error feedback end within
    1.5 points of synchronous SGD's test accuracy, sending 1/17 and 1/25 of its bytes."""
    p = 4
    sync = train(p, *DIGITS, "--epochs", "15", name="sync")
    powersgd = train(p, *DIGITS, "--epochs", "15", "--compress", "powersgd", "--powersgd-rank", "1",
                     name="powersgd")
    topk = train(p, *DIGITS, "--epochs", "15", "--compress", "topk", "--topk-ratio", "0.01", name="topk")
    acc = {name: run["final_test_accuracy"] for name, run in
           [("sync", sync), ("powersgd", powersgd), ("topk", topk)]}
    assert acc["sync"] >= 0.95, acc
    assert abs(acc["powersgd"] - acc["sync"]) <= 0.015, acc
    assert abs(acc["topk"] - acc["sync"]) <= 0.015, acc
    # bytes per rank and step, the closed forms (float32): PowerSGD rank 1 sends (rows + cols)
    # per matrix and the biases, in two ring all-reduces; top-k k = ceil(0.01 n) values and
    # int32 indices from each rank, in two ring all-gathers
    assert powersgd["bytes_sent_per_gpu"] == pytest.approx(
        2 * (p - 1) / p * 4 * ((64 + 64) + 64 + (64 + 10) + 10), rel=1e-12)
    k = -(-PARAMS // 100)
    assert topk["bytes_sent_per_gpu"] == pytest.approx((p - 1) * k * (4 + 4), rel=1e-12)
    assert sync["bytes_sent_per_gpu"] > 15 * powersgd["bytes_sent_per_gpu"]
    assert topk["breakdown_s"]["compression"] > 0 and topk["work_s"]["codec"] > 0


@pytest.mark.parametrize("args, words", [
    (["--compress", "powersgd", "--powersgd-rank", "0"], "--powersgd-rank: must be > 0"),
    (["--compress", "powersgd", "--powersgd-rank", "65"], "largest min(rows, cols) is 64"),
    (["--compress", "topk", "--topk-ratio", "0"], "--topk-ratio: must be > 0"),
    (["--compress", "topk", "--topk-ratio", "1.5"], "--topk-ratio: must be in (0, 1]"),
    (["--compress", "topk", "--topk-ratio", "nan"], "--topk-ratio: must be a finite number"),
    (["--sync", "zero1", "--compress", "topk"], "--sync zero1 reduce-scatters full-precision"),
    (["--sync", "zero3", "--overlap"], "--sync zero3 reduce-scatters each layer"),
    (["--sync", "zero2", "--checkpoint", "ckpt"], "--checkpoint does not save the state of --sync zero2"),
    (["--sync", "zero4"], "zero4"),
])
def test_bad_values_are_one_line_and_exit_2(args, words, mpirun, tmp_path):
    proc = mpirun(2, ["-m", "mpi_impl.train", *DIGITS, *args], timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], proc.stderr


@pytest.mark.parametrize("sync", ["zero1", "zero3"])
def test_zero_on_one_rank_is_one_line_and_exit_2(sync, mpirun):
    """One rank has nothing to shard over: refused as dpsim refuses ZeRO on one GPU."""
    proc = mpirun(1, ["-m", "mpi_impl.train", *DIGITS, "--sync", sync], timeout=60)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"--sync {sync} shards the model over the ranks, and this job has one" in lines[0]
