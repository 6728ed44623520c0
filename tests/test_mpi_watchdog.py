"""mpi_impl/watchdog.py and `mpi_impl.train --stall-timeout`: a rank that stalls ends the job.

A stopped rank raises nothing and does not exit, so without the watchdog every other rank
waits in the gradient all-reduce forever. The end-to-end test SIGSTOPs one rank of a real
`mpiexec -n 2` job and expects the job to end by itself, with one line from the other rank.
The other tests check the watchdog's logic in this process, with a fake clock and a fake
abort, and the option's parsing.
"""
import io
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mpi_impl.errors import usage_errors
from mpi_impl.train_options import PROG, parse_args
from mpi_impl.watchdog import Watchdog
from mpirun import ROOT, mpiexec


# ------------------------------------------------------------------ the watchdog alone

class Clock:
    """A clock the test moves by hand."""
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fake_dog(timeout_s=10, rank=1):
    clock, stalls, out = Clock(), [], io.StringIO()
    dog = Watchdog(timeout_s, rank, on_stall=lambda: stalls.append(clock.now), clock=clock, out=out)
    return dog, clock, stalls, out


def test_petting_keeps_it_quiet_and_silence_fires_it_once():
    dog, clock, stalls, out = fake_dog()
    dog.pet("compute", 3, 17)
    clock.now = 9.5
    assert not dog.check()                       # 9.5 s without progress: not yet
    dog.pet("sync", 3, 17)
    clock.now = 19.25
    assert not dog.check() and stalls == []      # the pet at 9.5 s counts
    clock.now = 19.5
    assert dog.check() and stalls == [19.5]
    assert out.getvalue() == ("mpi_impl.train: rank 1 made no progress for 10 s (epoch 3, step 17, "
                              "waiting in sync); a rank may be stalled or dead; ending the job\n")
    clock.now = 100
    dog.pet("update", 3, 17)
    clock.now = 200
    assert not dog.check() and stalls == [19.5]  # one line, one abort


@pytest.mark.parametrize("pet, where", [((), "(waiting in set-up)"),
                                        (("evaluation", 2), "(epoch 2, waiting in evaluation)")])
def test_the_line_says_where_the_rank_waited(pet, where):
    dog, clock, _, out = fake_dog(timeout_s=0.5, rank=0)
    if pet:
        dog.pet(*pet)
    clock.now = 1
    assert dog.check()
    assert f"rank 0 made no progress for 0.5 s {where};" in out.getvalue()


def test_timeout_zero_never_fires_and_starts_no_thread():
    dog, clock, stalls, _ = fake_dog(timeout_s=0)
    with dog:
        assert dog._thread is None
        clock.now = 1e9
        assert not dog.check() and stalls == []


def test_the_thread_fires_only_when_nobody_pets():
    fired, out = threading.Event(), io.StringIO()
    with Watchdog(0.2, 0, on_stall=fired.set, out=out) as dog:
        for _ in range(25):                      # 0.5 s of progress every 20 ms
            dog.pet("compute", 1, 1)
            last_pet = time.monotonic()
            time.sleep(0.02)
        assert not fired.is_set(), out.getvalue()
        assert fired.wait(5)
        assert time.monotonic() - last_pet >= 0.2
    assert out.getvalue().count("\n") == 1 and "waiting in compute" in out.getvalue()


@pytest.mark.parametrize("value, says", [("-1", "must be >= 0"), ("nan", "finite"),
                                         ("inf", "finite"), ("soon", "expected a number")])
def test_a_bad_stall_timeout_is_one_line(value, says, capsys):
    assert parse_args([], 2).stall_timeout == 120.0
    assert parse_args(["--stall-timeout", "0"], 2).stall_timeout == 0
    with pytest.raises(SystemExit) as stop:
        with usage_errors(PROG):
            parse_args(["--stall-timeout", value], 2)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1, err
    assert "--stall-timeout" in err and says in err, err


# ------------------------------------------------------------------ a real job, one rank stopped

TINY = ["-m", "mpi_impl.train", "--data", "synthetic", "--samples", "1024", "--width", "16",
        "--batch-per-rank", "16", "--epochs", "100000"]
STALL_S = 3


def job_ranks(job_pid):
    """{rank: pid} of an mpiexec job's Python processes: mpiexec's descendants (through
    hydra_pmi_proxy), found by scanning /proc, with the rank from PMI_RANK in their
    environment."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue                          # gone meanwhile
            children.setdefault(ppid, []).append(int(entry.name))
    ranks, todo = {}, [job_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for var in env:
                if var.startswith(b"PMI_RANK="):
                    ranks[int(var[len("PMI_RANK="):])] = child
    return ranks


def running(pid):
    """True while `pid` exists and is not a zombie (a process that ended, not yet reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the ranks in /proc")
def test_a_stopped_rank_ends_the_job(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out, "w") as stdout, open(err, "w") as stderr:     # files: they never fill up
        job = subprocess.Popen([mpiexec(), "-n", "2", sys.executable, *TINY,
                                "--stall-timeout", str(STALL_S)],
                               cwd=ROOT, env=env, stdout=stdout, stderr=stderr)
    ranks = {}
    try:
        deadline = time.monotonic() + 30
        while "Finished Epoch" not in out.read_text():          # training has started
            assert job.poll() is None, f"the job ended early:\n{err.read_text()}"
            assert time.monotonic() < deadline, "no epoch finished within 30 s"
            time.sleep(0.05)
        ranks = job_ranks(job.pid)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            code = job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the job did not end within 60 s of rank 1 stopping:\n{err.read_text()}")
        took = time.monotonic() - stopped
        assert code != 0
        assert STALL_S - 0.5 <= took < STALL_S + 15, took     # it waited for the timeout
        lines = [line for line in err.read_text().splitlines() if "made no progress" in line]
        assert len(lines) == 1, err.read_text()
        assert re.fullmatch(rf"{PROG}: rank 0 made no progress for {STALL_S} s \(epoch \d+(, step \d+)?, "
                            r"waiting in (sync|evaluation)\); a rank may be stalled or dead; "
                            r"ending the job", lines[0]), lines[0]
        assert not running(ranks[1]), "the stopped rank outlived the job"
    finally:
        for pid in ranks.values():              # leftovers (SIGKILL ends a stopped process too)
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        if job.poll() is None:
            job.kill()
            job.wait()
