"""Hostile input to mpi_impl (issue 34): one rank's mistake never hangs the others, planted
and forged files are refused, sizes are limited before anything is allocated, and Ctrl-C
ends a run in one line.  Every MPI job here is small and has a hard time limit."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from mpi_impl import checkpoint, files
from mpirun import ROOT, mpiexec, run_mpi

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


# --------------------------------------------------------------- resume: only this rank's own file

def one_line_refusal(proc, *words):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("mpi_impl.train: error: ") and "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The checkpoints of two 1-epoch runs with the same settings (only their run ids differ)."""
    folders = []
    for name in ("first", "second"):
        folder = tmp_path_factory.mktemp(name) / "ckpt"
        proc = run_mpi(2, ["-m", "mpi_impl.train", *TINY, "--checkpoint", str(folder)], timeout=60)
        assert proc.returncode == 0, proc.stderr[-3000:]
        folders.append(folder)
    return folders


def resume(ckpt):
    return run_mpi(2, ["-m", "mpi_impl.train", *TINY[:-1], "2", "--checkpoint", str(ckpt),
                       "--resume"], timeout=30)


def test_a_checkpoint_copied_from_another_rank_is_refused(tmp_path, two_runs):
    """Rank 0's file in rank 1's place (rank 1 keeps no history, so nothing else in the
    file gives the copy away)."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(two_runs[0], ckpt)
    shutil.copy(ckpt / "rank0.epoch1.npz", ckpt / "rank1.epoch1.npz")
    one_line_refusal(resume(ckpt), "rank1.epoch1.npz", "not rank 1's own")


def test_a_checkpoint_copied_from_another_run_is_refused(tmp_path, two_runs):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(two_runs[0], ckpt)
    shutil.copy(two_runs[1] / "rank1.epoch1.npz", ckpt / "rank1.epoch1.npz")
    one_line_refusal(resume(ckpt), "rank1.epoch1.npz", "written by run", "rank 0's checkpoint by run")


def test_a_resumed_run_keeps_its_run_id(tmp_path, two_runs):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(two_runs[0], ckpt)
    first_id = checkpoint.read(ckpt / "rank0.epoch1.npz")[1]["run_id"]
    assert resume(ckpt).returncode == 0
    metas = [checkpoint.read(ckpt / f"rank{r}.epoch2.npz")[1] for r in (0, 1)]
    assert [(m["rank"], m["ranks"], m["run_id"]) for m in metas] == [(0, 2, first_id), (1, 2, first_id)]


def test_a_fifo_named_as_a_checkpoint_is_refused_on_every_rank(tmp_path, two_runs):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(two_runs[0], ckpt)
    (ckpt / "rank1.epoch1.npz").unlink()
    os.mkfifo(ckpt / "rank1.epoch1.npz")
    one_line_refusal(resume(ckpt), "rank1.epoch1.npz", "a FIFO, not a regular file")


# --------------------------------------------------------------- before any work: outputs and limits

TRAIN_REFUSALS = [
    ("--json under /proc", ["--json", "/proc/x.json"], ["--json", "/proc", "cannot create"]),
    ("--checkpoint under /proc", ["--checkpoint", "/proc/ckpt"], ["--checkpoint", "cannot create"]),
    ("--trace and --json the same file", ["--json", "{tmp}/x.json", "--trace", "{tmp}/./x.json"],
     ["same file"]),
    ("control characters in a name", ["--json", "{tmp}/a\x1b[31m\u202eb\n/x.json"],
     ["\\x1b[31m\\u202eb\\n"]),
    ("--samples 1e9", ["--samples", "1000000000"], ["--samples", "1,000,000"]),
    ("--width 1e9", ["--width", "1000000000"], ["--width", "16,384"]),
    ("a wide and deep mlp", ["--width", "16000", "--depth", "4"], ["268,435,456", "--width"]),
    ("a huge batch of a wide cnn", ["--model", "cnn", "--width", "4096", "--batch-per-rank", "64"],
     ["268,435,456"]),
]


@pytest.mark.parametrize("what, argv, words", TRAIN_REFUSALS, ids=[c[0] for c in TRAIN_REFUSALS])
def test_train_refuses_before_epoch_1_in_one_line(what, argv, words, tmp_path, mpirun):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = mpirun(2, ["-m", "mpi_impl.train", *TINY, *argv], timeout=30)
    line = one_line_refusal(proc, *words)
    assert "\x1b" not in line and "\u202e" not in line
    assert "Finished Epoch" not in proc.stdout and list(tmp_path.iterdir()) == []


BENCH_REFUSALS = [
    ("--sizes 1000G", ["--sizes", "1000G"], ["--sizes", "1G"]),
    ("--json into a missing folder", ["--json", "{tmp}/missing/b.json"], ["--json", "no directory"]),
    ("--json under /proc", ["--json", "/proc/b.json"], ["--json", "cannot create"]),
    ("65 sizes", ["--sizes", ",".join(["1K"] * 65)], ["--sizes", "64"]),
]


@pytest.mark.parametrize("what, argv, words", BENCH_REFUSALS, ids=[c[0] for c in BENCH_REFUSALS])
def test_bench_refuses_before_any_mpi_work_in_one_line(what, argv, words, tmp_path, mpirun):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    proc = mpirun(2, ["-m", "mpi_impl.bench", *argv], timeout=30)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("mpi_impl.bench: error: ") and all(w in lines[0] for w in words), lines
    assert "measured for the bound" not in proc.stdout


# --------------------------------------------------------------- Ctrl-C

def test_ctrl_c_on_one_rank_ends_the_job_in_one_line_with_130(tmp_path, mpirun):
    out = tmp_path / "run.json"
    start = time.monotonic()
    proc = mpirun(2, ["tests/mpi_checks/train_with_fault.py", "interrupt", "1", "3", *TINY[:-1], "3",
                      "--json", str(out), "--trace", str(tmp_path / "trace.json")], timeout=30)
    assert time.monotonic() - start < 20
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines() == ["mpi_impl.train: interrupted"]
    assert list(tmp_path.iterdir()) == []


def end_all(job):
    """Kill mpiexec and every process it started (its own session): a failed run must not leave
    ranks spinning in MPI behind it."""
    try:
        os.killpg(job.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.mark.parametrize("module, ready", [("mpi_impl.train", "Finished Epoch [1"),
                                           ("mpi_impl.bench", "measured for the bound")])
def test_ctrl_c_at_mpiexec_ends_the_job_in_one_line_with_130(module, ready, tmp_path):
    """Ctrl-C on a terminal: SIGINT to mpiexec, which passes it to every rank (in the middle
    of the work: 1000 epochs, or a million 1 MiB all-reduces)."""
    argv = {"mpi_impl.train": [*TINY[:-1], "1000", "--json", str(tmp_path / "run.json")],
            "mpi_impl.bench": ["--sizes", "1M", "--iters", "1000000", "--algo", "ring",
                               "--json", str(tmp_path / "b.json")]}[module]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, "-m", module, *argv], cwd=ROOT,
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        for line in job.stdout:
            if ready in line:
                break
        job.send_signal(signal.SIGINT)
        _, err = job.communicate(timeout=20)
    finally:
        end_all(job)
    assert job.returncode == 130, err[-3000:]
    assert err.strip().splitlines() == [f"{module}: interrupted"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("ranks", [2, 3])
def test_ctrl_c_ends_a_job_whose_ranks_are_all_blocked_inside_mpi(ranks):
    """The hang Ctrl-C could leave: every rank inside an MPI call that never completes, where
    Python's own handler never runs (tests/mpi_checks/stuck_in_mpi.py; with --no-watch this
    test times out)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    job = subprocess.Popen([mpiexec(), "-n", str(ranks), sys.executable,
                            "tests/mpi_checks/stuck_in_mpi.py"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        ready = 0
        while ready < ranks:                    # two ranks' lines can arrive glued together
            line = job.stdout.readline()
            assert line, "the job ended before every rank was ready"
            ready += line.count("ready")
        time.sleep(0.5)                         # every rank is inside its receive by now
        job.send_signal(signal.SIGINT)
        _, err = job.communicate(timeout=20)
    finally:
        end_all(job)
    assert job.returncode == 130, err[-3000:]
    assert err.strip().splitlines() == ["stuck_in_mpi: interrupted"]


def test_an_error_inside_an_exchange_leaves_no_receive_posted():
    proc = subprocess.run([sys.executable, "tests/mpi_checks/withdraw_check.py"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0 and "withdraw_check: ok" in proc.stdout, proc.stdout + proc.stderr
