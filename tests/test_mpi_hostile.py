"""Hostile input to mpi_impl (issue 34): one rank's mistake never hangs the others, planted
and forged files are refused, sizes are limited before anything is allocated, and Ctrl-C
ends a run in one line.  Every MPI job here is small and has a hard time limit."""
import json
import os
import shutil
import tracemalloc

import numpy as np
import pytest

from mpi_impl import checkpoint, files

TINY = ["--data", "digits", "--samples", "256", "--width", "8", "--batch-per-rank", "16",
        "--epochs", "1"]


@pytest.mark.parametrize("ranks", [2, 3])
def test_every_algorithm_sums_strided_inputs_and_outputs(ranks, mpirun):
    """A strided x or out, on every rank or on one only, is summed as MPI's own Allreduce
    sums contiguous copies (it used to raise BufferError on that rank and hang the rest)."""
    proc = mpirun(ranks, ["tests/mpi_checks/layout_check.py"], timeout=60)
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert f"{ranks} ranks, 0 failures" in proc.stdout


# --------------------------------------------------------------- files written: planted links

def _arrays():
    return {"params": np.arange(4, dtype=np.float32), "velocity": np.zeros(4, np.float32)}


SHAPES = {"params": ((4,), "float32"), "velocity": ((4,), "float32")}


def test_a_link_planted_at_a_checkpoints_names_is_never_followed(tmp_path):
    """A symlink at the old fixed temporary name, or at the final name, pointing at a file
    the run did not create: saving replaces names in the folder, never the link's target."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "rank0.epoch1.npz.tmp").symlink_to(victim)
    (ckpt / "rank0.epoch2.npz").symlink_to(victim)
    for epoch in (1, 2):
        saved = checkpoint.save(ckpt, 0, epoch, _arrays(), {"epoch": epoch})
        assert saved.is_file() and not saved.is_symlink()
        np.testing.assert_array_equal(checkpoint.read(saved, SHAPES)[0]["params"], _arrays()["params"])
    assert victim.read_text() == "precious"


def test_write_new_refuses_a_planted_temporary_name_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    victim, target = tmp_path / "victim.txt", tmp_path / "out.json"
    victim.write_text("precious")
    planted = tmp_path / "out.json.planted.tmp"
    planted.symlink_to(victim)
    monkeypatch.setattr(files, "temporary_name", lambda final: planted)
    with pytest.raises(FileExistsError):
        files.write_new(target, lambda f: f.write("x"))
    assert victim.read_text() == "precious" and not target.exists()
    monkeypatch.undo()

    def interrupted(f):
        f.write("half")
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        files.write_new(target, interrupted)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json.planted.tmp", "victim.txt"]


def test_json_and_trace_replace_a_planted_link_not_its_target(tmp_path, mpirun):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in ("run.json", "trace.json"):
        (tmp_path / name).symlink_to(victim)
    proc = mpirun(2, ["-m", "mpi_impl.train", *TINY, "--json", str(tmp_path / "run.json"),
                      "--trace", str(tmp_path / "trace.json")], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert victim.read_text() == "precious"
    assert not (tmp_path / "run.json").is_symlink() and json.loads((tmp_path / "run.json").read_text())
    assert "traceEvents" in json.loads((tmp_path / "trace.json").read_text())


# --------------------------------------------------------------- files read: forged, bombs, FIFOs

def test_an_edited_checkpoint_fails_its_digest(tmp_path):
    path = checkpoint.save(tmp_path, 0, 1, _arrays(), {"epoch": 1})
    arrays, meta = checkpoint.read(path, SHAPES)
    assert meta["digest"] == checkpoint.digest(_arrays())
    arrays["params"][0] = 99                               # edited, the digest kept
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
    with pytest.raises(checkpoint.CheckpointError, match="do not match the digest"):
        checkpoint.read(path, SHAPES)
    del meta["digest"]
    np.savez(path, meta=np.array(json.dumps(meta)), **arrays)
    with pytest.raises(checkpoint.CheckpointError, match="no digest"):
        checkpoint.read(path, SHAPES)


def test_a_decompression_bomb_is_refused_before_it_is_inflated(tmp_path):
    """params inflating to 160 MB (160 KB on disk) where the model needs 16 bytes: refused
    from the archive's directory and the .npy header, with under 8 MB allocated meanwhile."""
    path = tmp_path / "rank0.epoch1.npz"
    bomb = {"params": np.zeros(40_000_000, np.float32), "velocity": np.zeros(4, np.float32)}
    meta = {"epoch": 1, "digest": checkpoint.digest(bomb)}
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **bomb)
    del bomb
    assert path.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(checkpoint.CheckpointError, match="params"):
            checkpoint.read(path, SHAPES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, f"{peak:,} bytes allocated while refusing a bomb"


def test_a_fifo_or_a_folder_in_place_of_a_checkpoint_is_refused_without_blocking(tmp_path):
    fifo, folder = tmp_path / "rank0.epoch1.npz", tmp_path / "rank0.epoch2.npz"
    os.mkfifo(fifo)
    folder.mkdir()
    for path, kind in ((fifo, "a FIFO"), (folder, "a folder")):
        with pytest.raises(checkpoint.CheckpointError, match=f"{kind}, not a regular file"):
            checkpoint.read(path, SHAPES)
