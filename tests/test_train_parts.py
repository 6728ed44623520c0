"""In-process tests of the training pieces: data, sharding, loader, buckets, checkpoints, trace."""
import json

import numpy as np
import pytest

from mpi_impl import checkpoint, data
from mpi_impl.loader import Loader
from mpi_impl.sgd import MomentumSGD, plan_buckets
from mpi_impl.timeline import Timeline, write_chrome_trace


def write_cifar_file(path, labels, rng):
    """Records in the CIFAR-10 binary layout: 1 label byte, then 3072 pixel bytes."""
    pixels = rng.integers(0, 256, size=(len(labels), 3072), dtype=np.uint8)
    records = np.concatenate([np.array(labels, dtype=np.uint8)[:, None], pixels], axis=1)
    records.tofile(path)
    return pixels


def test_cifar10_binary_reader(tmp_path):
    rng = np.random.default_rng(0)
    pixels1 = write_cifar_file(tmp_path / "data_batch_1.bin", [3, 0, 9], rng)
    pixels2 = write_cifar_file(tmp_path / "data_batch_2.bin", [1, 2], rng)
    write_cifar_file(tmp_path / "test_batch.bin", [7, 7], rng)
    train, test = data.cifar10(tmp_path)
    assert train.x.shape == (5, 3, 32, 32) and train.x.dtype == np.float32
    assert train.y.tolist() == [3, 0, 9, 1, 2] and test.y.tolist() == [7, 7]
    # channel-major planes: byte 1024 is the first green pixel of the first image
    assert train.x[0, 1, 0, 0] == pytest.approx(pixels1[0, 1024] / 255 - 0.5)
    assert train.x[4, 2, 31, 31] == pytest.approx(pixels2[1, 3071] / 255 - 0.5)


def test_cifar10_rejects_truncated_file(tmp_path):
    (tmp_path / "data_batch_1.bin").write_bytes(bytes(3073 * 2 + 5))
    with pytest.raises(data.DataError, match="3073-byte"):
        data.cifar10(tmp_path)


def test_shards_are_disjoint_equal_and_deterministic():
    shards = [data.shard_indices(103, r, 4, seed=5) for r in range(4)]
    assert all(len(s) == 103 // 4 for s in shards)
    together = np.concatenate(shards)
    assert len(set(together.tolist())) == len(together)
    assert np.array_equal(shards[2], data.shard_indices(103, 2, 4, seed=5))
    assert not np.array_equal(shards[2], data.shard_indices(103, 2, 4, seed=6))


def test_synthetic_labels_follow_a_rule():
    train, test = data.synthetic(samples=2000, seed=1)
    assert train.x.shape[1:] == (1, 8, 8) and len(train) + len(test) == 2000
    assert len(np.unique(train.y)) > 5            # not one class only
    again, _ = data.synthetic(samples=2000, seed=1)
    assert np.array_equal(train.y, again.y)


def test_digits_split():
    pytest.importorskip("sklearn")
    train, test = data.digits()
    assert len(train) + len(test) == 1797 and train.shape == (1, 8, 8)
    assert -0.5 <= train.x.min() and train.x.max() <= 0.5
    from sklearn.datasets import load_digits         # the same images as scikit-learn's loader
    bunch = load_digits()
    assert sorted((train.y.tolist() + test.y.tolist())) == sorted(bunch.target.tolist())
    assert np.isclose(train.x.sum() + test.x.sum(), (bunch.data / 16.0 - 0.5).sum(), rtol=1e-5)


@pytest.mark.parametrize("workers", [1, 3])
def test_loader_workers_give_the_same_batches_in_order(workers):
    train, _ = data.synthetic(samples=200, seed=0)
    order = np.random.default_rng(0).permutation(len(train))[:120]
    inline = list(Loader(train, 10, workers=0).epoch(order))
    threaded = list(Loader(train, 10, workers=workers, prefetch=2, decode_ms=0.01).epoch(order))
    assert len(inline) == len(threaded) == 12
    for (xa, ya), (xb, yb) in zip(inline, threaded):
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb)


def test_loader_records_decode_time():
    train, _ = data.synthetic(samples=100, seed=0)
    tl = Timeline(rank=0)
    list(Loader(train, 8, workers=2, decode_ms=0.5, timeline=tl).epoch(np.arange(32)))
    assert tl.take_totals()["load"] >= 32 * 0.5e-3 * 0.9


def test_loader_worker_error_reaches_the_loop():
    train, _ = data.synthetic(samples=100, seed=0)
    bad = np.array([0, 1, 2, 3, 10**6, 5, 6, 7])             # index out of range in batch 2
    with pytest.raises(RuntimeError, match="loader worker failed"):
        list(Loader(train, 2, workers=2).epoch(bad))


def test_buckets_cover_the_gradient_in_backward_order():
    offsets = [(1, 0, 100), (3, 100, 110), (5, 110, 400), (7, 400, 410)]
    buckets = plan_buckets(offsets, itemsize=4, bucket_mib=200 * 4 / 2**20)   # 200 elements
    assert buckets == [(110, 410), (0, 110)]
    assert plan_buckets(offsets, 4, 0) == [(0, 410)]
    assert plan_buckets(offsets, 4, 1e-9) == [(400, 410), (110, 400), (100, 110), (0, 100)]


def test_momentum_sgd_matches_the_formula():
    params, grads = np.array([1.0, 2.0]), np.array([0.5, -1.0])
    opt = MomentumSGD(params, grads, lr=0.1, momentum=0.9)
    opt.step()
    opt.step()
    v2 = 0.9 * grads + grads
    assert np.allclose(params, [1.0, 2.0] - 0.1 * grads - 0.1 * v2)


def test_checkpoint_save_is_atomic_and_round_trips(tmp_path):
    checkpoint.save(tmp_path, 1, 3, {"params": np.arange(5.0)}, {"epoch": 3})
    checkpoint.save(tmp_path, 1, 4, {"params": np.arange(5.0) * 2}, {"epoch": 4})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank1.epoch3.npz", "rank1.epoch4.npz"]
    arrays, meta = checkpoint.read(checkpoint.path_for(tmp_path, 1, 4))
    assert meta == {"epoch": 4, "digest": checkpoint.digest(arrays)}
    assert np.array_equal(arrays["params"], np.arange(5.0) * 2)
    assert checkpoint.generations(tmp_path, 0) == {}


def test_chrome_trace_format(tmp_path):
    tl = Timeline(rank=1)
    with tl.span("forward + backward", phase="compute"):
        pass
    tl.add("load batch", tl.zero, tl.zero + 0.002, phase="load", track=2)
    write_chrome_trace(tmp_path / "t.json", [tl.chrome_events()])
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in spans} == {"forward + backward", "load batch"}
    for e in spans:
        assert e["pid"] == 1 and set(e) >= {"name", "ts", "dur", "tid", "args"}
    # the viewer shows names, not "Process 1": the rank, and each track it used
    names = {(e["name"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and "name" in e["args"]}
    assert names == {("process_name", 0): "rank 1", ("thread_name", 0): "training loop",
                     ("thread_name", 2): "loader 1"}
    assert [e["ph"] for e in events[:len(events) - len(spans)]] == ["M"] * (len(events) - len(spans))
    totals = tl.take_totals()
    assert totals["load"] == pytest.approx(0.002) and set(totals) >= {"compute", "exposed_comm"}


def test_timeline_totals_are_the_vocabulary_s_parts_and_the_work():
    from dpsim.vocabulary import BREAKDOWN
    from mpi_impl.timeline import PHASES, WORK
    assert PHASES == BREAKDOWN + WORK and not set(WORK) & set(BREAKDOWN)
    tl = Timeline(rank=0)
    assert set(tl.take_totals()) == set(PHASES)
    with pytest.raises(ValueError, match="unknown total"):
        tl.count("exposed_communication", 1.0)
    with tl.span("forward + backward", phase="compute") as timed:
        sum(range(10000))
    assert timed.seconds > 0 and tl.take_totals()["compute"] == timed.seconds


def test_a_rank_s_breakdown_adds_up_and_takes_the_straggler_out_of_its_wait():
    from dpsim.vocabulary import BREAKDOWN, OTHER
    from mpi_impl.train_results import rank_breakdowns
    from mpi_impl.timeline import PHASES
    # rank 1 computes 3 ms longer in step 0 and 1 ms longer in step 1; rank 0 waits for it
    totals = [dict.fromkeys(PHASES, 0.0) for _ in range(2)]
    for t, compute, wait in zip(totals, (0.020, 0.024), (0.010, 0.006)):
        t.update(compute=compute, exposed_comm=wait, data_wait=0.001, update=0.002, load=0.5)
    per_rank = [{"totals": totals[0], "time_s": 0.040, "compute_steps_s": [0.010, 0.010]},
                {"totals": totals[1], "time_s": 0.040, "compute_steps_s": [0.013, 0.011]}]
    parts, work = rank_breakdowns(per_rank)
    for p in parts:
        assert list(p) == [*BREAKDOWN, OTHER]
        assert sum(p.values()) == pytest.approx(0.040, abs=1e-15)
    assert parts[0]["straggler_wait"] == pytest.approx(0.004) and parts[1]["straggler_wait"] == 0
    assert parts[0]["exposed_comm"] == pytest.approx(0.006) and parts[1]["exposed_comm"] == 0.006
    # the mean over ranks: the mean over steps of max - mean, summed over the 2 steps
    mean = (parts[0]["straggler_wait"] + parts[1]["straggler_wait"]) / 2
    assert mean == pytest.approx((0.0015 + 0.0005))
    assert work[0] == {"load": 0.5, "communication": 0.0, "codec": 0.0}


def test_a_count_inside_a_span_moves_its_seconds_out_of_the_span_s_phase():
    """ZeRO's all-gather of the parameters runs inside the loop's update span: counted as
    exposed_comm with inside="update", it leaves update, and the parts still add up to the span."""
    tl = Timeline(rank=0)
    with tl.span("sgd step", phase="update") as step:
        tl.count("exposed_comm", 0.004, inside="update")
    totals = tl.take_totals()
    assert totals["exposed_comm"] == 0.004
    assert totals["update"] == pytest.approx(step.seconds - 0.004)
    assert totals["update"] + totals["exposed_comm"] == pytest.approx(step.seconds)


@pytest.mark.parametrize("sync", ["zero1", "zero2", "zero3", "ring"])
def test_no_part_of_a_training_step_is_counted_twice(sync, tmp_path):
    """The parts of mpi_impl.train's iteration are disjoint times of the loop: what is left,
    `other`, cannot be negative (ZeRO-1 and 2 once counted their all-gather twice, in update
    and in exposed_comm). ZeRO-3's gathers and reduce-scatters block forward and backward:
    exposed communication, as dpsim counts them, not compute."""
    from mpirun import explain, run_mpi
    out = tmp_path / "run.json"
    proc = run_mpi(2, ["-m", "mpi_impl.train", "--data", "synthetic", "--samples", "2048", "--width", "512",
                       "--batch-per-rank", "16", "--epochs", "2", "--sync", sync, "--json", str(out)], timeout=120)
    assert proc.returncode == 0, explain(proc)
    parts = json.loads(out.read_text())["breakdown_s"]
    assert parts["other"] >= -1e-6, parts
    assert parts["exposed_comm"] > 0, parts
