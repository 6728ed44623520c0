"""Checkpoints lose nothing (issue 16): a rank killed while the ranks save costs one epoch,
--resume goes on from the newest epoch that every rank has and ends bit-identical to an
uninterrupted run; weights that became NaN or inf are never saved; a damaged or crafted
checkpoint file is refused in one line naming it; the 1-bit residuals recover from a NaN.

Faults are injected from outside by tests/mpi_checks/train_with_fault.py. The jobs are
small (digits, a 16-unit MLP, 512 samples: 16 steps per epoch on 2 ranks).
"""
import json
import pickle
import shutil

import numpy as np
import pytest
from mpi4py import MPI

from mpi_impl import checkpoint
from mpirun import run_mpi

pytest.importorskip("sklearn")

SMALL = ["--data", "digits", "--samples", "512", "--width", "16", "--batch-per-rank", "16",
         "--lr", "0.1", "--momentum", "0.5"]
STEPS = 512 // 2 // 16                           # steps per epoch on 2 ranks
ONEBIT = [*SMALL, "--compress", "1bit"]          # residuals in the checkpoint too
FAULT = "tests/mpi_checks/train_with_fault.py"


def train(args, out=None, script=("-m", "mpi_impl.train"), ok=True):
    """Run the trainer on 2 ranks (with --json out when given); returns the CompletedProcess,
    and the JSON result when out is given. ok: the run must succeed."""
    proc = run_mpi(2, [*script, *args, *(["--json", str(out)] if out else [])], timeout=60)
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return (json.loads(out.read_text()), proc) if out else proc


def names(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """3 epochs of 1-bit SGD in one go: the result every resumed run must equal."""
    return train([*ONEBIT, "--epochs", "3"], tmp_path_factory.mktemp("ref") / "run.json")[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A folder with the checkpoints of a 1-epoch 1-bit run (epoch 1 on both ranks)."""
    folder = tmp_path_factory.mktemp("saved") / "ckpt"
    train([*ONEBIT, "--epochs", "1", "--checkpoint", str(folder)])
    assert names(folder) == ["rank0.epoch1.npz", "rank1.epoch1.npz"]
    return folder


# --------------------------------------------------------------- a rank dies while saving

@pytest.mark.parametrize("victim", [0, 1])
def test_a_rank_killed_while_saving_costs_one_epoch_and_nothing_else(victim, tmp_path, uninterrupted):
    """The worst moment: the other rank has saved epoch 2, the victim (rank 0 evaluates the
    test set, so it used to save last) is SIGKILLed before it has, leaving half a temporary
    file. --resume goes on from epoch 1, the newest both have, and ends where an
    uninterrupted run ends, bit for bit."""
    ckpt = tmp_path / "ckpt"
    killed = train([FAULT, "kill-at-save", str(victim), "2", *ONEBIT, "--epochs", "3",
                    "--checkpoint", str(ckpt)], script=(), ok=False)
    assert killed.returncode != 0 and "Finished Epoch [3 of 3]" not in killed.stdout
    other = 1 - victim
    assert names(ckpt) == sorted([f"rank{victim}.epoch1.npz", f"rank{victim}.epoch2.npz.tmp",
                                  f"rank{other}.epoch1.npz", f"rank{other}.epoch2.npz"])

    resumed, proc = train([*ONEBIT, "--epochs", "3", "--checkpoint", str(ckpt), "--resume"],
                          tmp_path / "resumed.json")
    assert "resuming from epoch 1, the newest that every rank has" in proc.stdout
    assert "Finished Epoch [2 of 3]" in proc.stdout
    assert resumed["final_weights_sha256"] == uninterrupted["final_weights_sha256"]
    assert [e["train_loss"] for e in resumed["epochs"]] == [e["train_loss"] for e in uninterrupted["epochs"]]
    # two generations again, the leftover temporary file gone
    assert names(ckpt) == ["rank0.epoch2.npz", "rank0.epoch3.npz", "rank1.epoch2.npz", "rank1.epoch3.npz"]


def test_the_old_one_file_layout_is_still_read(tmp_path, saved, uninterrupted):
    """rank{R}.npz (before generations) resumes as its epoch, and is replaced afterwards."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for rank in (0, 1):
        shutil.copy(saved / f"rank{rank}.epoch1.npz", ckpt / f"rank{rank}.npz")
    resumed, _ = train([*ONEBIT, "--epochs", "3", "--checkpoint", str(ckpt), "--resume"],
                       tmp_path / "resumed.json")
    assert resumed["final_weights_sha256"] == uninterrupted["final_weights_sha256"]
    assert names(ckpt) == ["rank0.epoch2.npz", "rank0.epoch3.npz", "rank1.epoch2.npz", "rank1.epoch3.npz"]


def test_a_fresh_run_does_not_overwrite_checkpoints(tmp_path, saved):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(saved, ckpt)
    proc = train([*ONEBIT, "--epochs", "2", "--checkpoint", str(ckpt)], ok=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "already holds checkpoints" in lines[0] and "--resume" in lines[0]
    assert names(ckpt) == ["rank0.epoch1.npz", "rank1.epoch1.npz"]


def test_ranks_without_a_common_epoch_are_refused_in_one_line(tmp_path, saved):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(saved, ckpt)
    (ckpt / "rank1.epoch1.npz").rename(ckpt / "rank1.epoch2.npz")
    proc = train([*ONEBIT, "--epochs", "3", "--checkpoint", str(ckpt), "--resume"], ok=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "no epoch is checkpointed by every rank" in lines[0] and "[[1], [2]]" in lines[0]


# --------------------------------------------------------------- divergence

DIVERGED = ("mpi_impl.train: error: weights are not finite after epoch 2 (diverged: try a "
            "smaller --lr); the checkpoint of epoch 1 is kept")


def test_a_nan_on_one_rank_saves_nothing_and_keeps_the_last_good_checkpoint(tmp_path):
    """Rank 1's weights get a NaN after the last step of epoch 2, so rank 0's are still
    finite when the ranks come to save: no rank may save epoch 2."""
    ckpt = tmp_path / "ckpt"
    proc = train([FAULT, "nan", "1", str(2 * STEPS), *SMALL, "--epochs", "3",
                  "--checkpoint", str(ckpt)], script=(), ok=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [DIVERGED]
    assert "Finished Epoch [2 of 3]" in proc.stdout and "Finished Epoch [3 of 3]" not in proc.stdout
    assert names(ckpt) == ["rank0.epoch1.npz", "rank1.epoch1.npz"]
    resumed = train([*SMALL, "--epochs", "2", "--checkpoint", str(ckpt), "--resume"])
    assert "Finished Epoch [2 of 2]" in resumed.stdout


def test_a_huge_learning_rate_stops_with_one_line_and_saves_nothing(tmp_path):
    ckpt = tmp_path / "ckpt"
    proc = train([*SMALL, "--lr", "1e20", "--epochs", "2", "--checkpoint", str(ckpt)], ok=False)
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert errors == ["mpi_impl.train: error: weights are not finite after epoch 1 (diverged: "
                      "try a smaller --lr); no checkpoint was saved"]
    assert "Traceback" not in proc.stderr
    assert not ckpt.exists() or names(ckpt) == []


# --------------------------------------------------------------- damaged or crafted files

def _rewrite(path, change):
    """Rewrite checkpoint `path` after change(arrays, meta) edits them in place."""
    arrays, meta = checkpoint.read(path)
    change(arrays, meta)
    meta["digest"] = checkpoint.digest(arrays)   # a careful forger: the digest fits the arrays
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)


CRAFTED = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:300]),
    "random bytes": lambda p: p.write_bytes(np.random.default_rng(0).bytes(2000)),
    "a pickle": lambda p: p.write_bytes(pickle.dumps({"params": [1.0, 2.0]})),
    "an object array": lambda p: np.savez(p, meta=np.array("{}"), params=np.array([None, 1])),
    "epoch beyond --epochs": lambda p: (p.rename(p.with_name("rank0.epoch9.npz")),
                                        _rewrite(p.with_name("rank0.epoch9.npz"),
                                                 lambda a, m: m.update(epoch=9))),
    "meta epoch not the name's": lambda p: _rewrite(p, lambda a, m: m.update(epoch=-1)),
    "params of another dtype": lambda p: _rewrite(
        p, lambda a, m: a.update(params=a["params"].astype(np.float64))),
    "params of another shape": lambda p: _rewrite(p, lambda a, m: a.update(params=a["params"][:-1])),
    "a NaN in velocity": lambda p: _rewrite(p, lambda a, m: a["velocity"].__setitem__(0, np.nan)),
    "a residual without its pair": lambda p: _rewrite(p, lambda a, m: a.pop("server_residual_0")),
    "samples_trained": lambda p: _rewrite(p, lambda a, m: m.update(samples_trained=1)),
    "rng state": lambda p: _rewrite(p, lambda a, m: m.update(rng={"bit_generator": "MT19937"})),
    "no history": lambda p: _rewrite(p, lambda a, m: m.update(history=None)),
}


def test_a_damaged_or_crafted_checkpoint_is_one_line_naming_the_file(tmp_path, saved):
    for i, (what, craft) in enumerate(CRAFTED.items()):
        ckpt = tmp_path / f"ckpt{i}"
        shutil.copytree(saved, ckpt)
        craft(ckpt / "rank0.epoch1.npz")
        # both ranks must still find a common epoch for the file to be read
        if what == "epoch beyond --epochs":
            shutil.copy(ckpt / "rank1.epoch1.npz", ckpt / "rank1.epoch9.npz")
        proc = train([*ONEBIT, "--epochs", "3", "--checkpoint", str(ckpt), "--resume"], ok=False)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, (what, proc.stderr)
        assert lines[0].startswith("mpi_impl.train: error: "), (what, lines[0])
        assert "rank0.epoch" in lines[0] and str(ckpt) in lines[0], (what, lines[0])
        assert "allow_pickle" not in lines[0] and "Traceback" not in proc.stderr, (what, lines[0])


def test_read_and_check_refuse_bad_files_in_one_line(tmp_path):
    path = tmp_path / "rank0.epoch1.npz"
    for content in (b"", b"PK\x03\x04", pickle.dumps([1, 2]), b"\x93NUMPY garbage"):
        path.write_bytes(content)
        with pytest.raises(checkpoint.CheckpointError) as caught:
            checkpoint.read(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
        assert "allow_pickle" not in str(caught.value)
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(checkpoint.CheckpointError, match="not an .npz archive"):
        checkpoint.read(tmp_path / "one.npy")

    good = {"params": ((3,), "float32")}
    arrays = {"params": np.zeros(3, np.float32)}
    checkpoint.check(path, arrays, {"epoch": 1}, epoch=1, max_epoch=1, shapes=good)
    for meta, epoch, max_epoch, a, message in [
        ({"epoch": 2}, 2, 1, arrays, "beyond --epochs 1"),
        ({"epoch": True}, 1, 1, arrays, "meta says epoch True"),
        ({"epoch": "1"}, 1, 1, arrays, "meta says epoch '1'"),
        ({"epoch": 1}, 1, 1, {"params": np.zeros(4, np.float32)}, r"float32 \(4,\)"),
        ({"epoch": 1}, 1, 1, {**arrays, "extra": np.zeros(1)}, "unexpected arrays extra"),
        ({"epoch": 1}, 1, 1, {}, "no params"),
        ({"epoch": 1}, 1, 1, {"params": np.array([0, np.inf, 0], np.float32)}, "NaN or inf"),
    ]:
        with pytest.raises(checkpoint.CheckpointError, match=message):
            checkpoint.check(path, a, meta, epoch=epoch, max_epoch=max_epoch, shapes=good)


def test_generations_prune_and_the_newest_common_epoch(tmp_path):
    for epoch in (1, 2, 3):
        checkpoint.save(tmp_path, 0, epoch, {"params": np.zeros(2)}, {"epoch": epoch})
    (tmp_path / "rank0.epoch4.npz.tmp").write_bytes(b"half")      # a crash's leftover
    (tmp_path / "rank0.epoch05.npz").write_bytes(b"not our name")
    assert sorted(checkpoint.generations(tmp_path, 0)) == [1, 2, 3]
    checkpoint.prune(tmp_path, 0, keep={3, 2})
    assert names(tmp_path) == ["rank0.epoch05.npz", "rank0.epoch2.npz", "rank0.epoch3.npz"]
    assert checkpoint.newest_common([[2, 3], [1, 2], [2, 3]]) == 2
    # the old layout: one rank{R}.npz whose epoch is in its meta
    np.savez(tmp_path / "rank1.npz", meta=np.array(json.dumps({"epoch": 5})), params=np.zeros(2))
    assert checkpoint.generations(tmp_path, 1) == {5: tmp_path / "rank1.npz"}
    np.savez(tmp_path / "rank1.npz", meta=np.array(json.dumps({"epoch": -1})), params=np.zeros(2))
    with pytest.raises(checkpoint.CheckpointError, match="rank1.npz: its meta has no valid epoch"):
        checkpoint.generations(tmp_path, 1)
    assert checkpoint.newest_common([[1], [2]]) is None
    assert checkpoint.newest_common([[], []]) is None


# --------------------------------------------------------------- 1-bit residuals

def test_a_nan_in_the_onebit_residuals_is_reset_once_with_one_warning(capfd):
    from mpi_impl.onebit import OneBitAllreduce
    rng = np.random.default_rng(0)
    g = rng.standard_normal(1000).astype(np.float32)
    onebit = OneBitAllreduce(MPI.COMM_SELF)
    bad = g.copy()
    bad[10] = np.nan
    onebit(bad)
    worker, server = onebit.residuals(g)
    assert onebit.residual_resets == 1
    assert not worker.any() and not server.any()
    # the next call starts from zero residuals, as a fresh instance does
    after = onebit(g)
    assert np.isfinite(after).all()
    np.testing.assert_array_equal(after, OneBitAllreduce(MPI.COMM_SELF)(g))
    bad[20] = np.inf
    onebit(bad)
    assert onebit.residual_resets == 2
    assert np.isfinite(onebit.residuals(g)[0]).all()
    lines = capfd.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "reset to zero" in lines[0], lines
