"""The dpsim and course command lines against a hostile user (issue 34): Ctrl-C, output paths
that cannot or must not be written, files that are not files, numbers and lists that would
allocate or run for ever, control characters in names, and a planted `course/` folder.
Every outcome is a result, or one line on stderr and exit code 2 (130 for Ctrl-C), quickly,
with no file left behind that the command did not finish."""
import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def one_line(text, prefix="dpsim: error: "):
    lines = text.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith(prefix) and "Traceback" not in text, text
    return lines[0]


class TooLong(Exception):
    pass


@contextlib.contextmanager
def within(seconds):
    """Fail (raise TooLong) where the block is still running after `seconds`: a hang is a failure."""
    def late(signum, frame):
        raise TooLong(f"still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def course_main(*args, seconds=20):
    """python -m course in this process, failing past `seconds`: (exit code, stderr)."""
    from course.__main__ import main
    err = io.StringIO()
    with within(seconds), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([str(a) for a in args])
        except SystemExit as stop:
            code = stop.code
        except KeyboardInterrupt:
            pytest.fail("Ctrl-C escaped course's main: a traceback")
    return code, err.getvalue()


# ------------------------------------------------------------------ Ctrl-C

def interrupt_when_running(argv, cwd, after_s=1.0):
    """Start `python -m dpsim ARGV` in its own process group, wait for its progress bar, then
    send SIGINT to the whole group as Ctrl-C in a terminal does: (exit code, stderr, group)."""
    p = subprocess.Popen([sys.executable, "-m", "dpsim", *argv, "--progress"], cwd=cwd, text=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    seen = ""
    while "/" not in seen:                         # the bar's "done/total"
        ch = p.stderr.read(1)
        assert ch, "the command ended before it started simulating"
        seen += ch
    time.sleep(after_s)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    return p.returncode, (seen + err).replace("\r", "\n"), p.pid


def gone(group):
    """True once no process of the group is left (the sweep's workers included)."""
    for _ in range(50):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("argv", [
    ["run", "cntk-1bit-k80", "--set", "training.iterations=5000", "--trace", "t.json", "--plot", "p.png"],
    ["sweep", "d2l-ps-vs-ring", "--gpus", "1,2,4,8", "--vary", "training.iterations=3000,3001,3002",
     "--jobs", "2", "--plot", "s.png"],
], ids=["run --trace --plot", "sweep --jobs 2 --plot"])
def test_ctrl_c_is_one_line_exit_130_and_leaves_no_file(tmp_path, argv):
    code, err, group = interrupt_when_running(argv, tmp_path)
    assert code == 130, err
    assert err.rstrip("\n").split("\n")[-1] == "dpsim: interrupted" and "Traceback" not in err, err
    assert sorted(os.listdir(tmp_path)) == []
    assert gone(group), "a worker process outlived the interrupted sweep"


def test_ctrl_c_while_the_trace_is_written_leaves_no_partial_file(tmp_path, monkeypatch, dpsim_cli):
    from dpsim import trace

    def half_then_ctrl_c(obj, f):
        f.write('{"traceEvents": [')
        raise KeyboardInterrupt
    monkeypatch.setattr(trace.json, "dump", half_then_ctrl_c)
    (tmp_path / "t.json").write_text("the user's old trace")
    try:
        with within(120):
            code, _, err = dpsim_cli("run", "d2l-ps-vs-ring", "--trace", tmp_path / "t.json")
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C escaped dpsim's main: a traceback")
    assert (code, err) == (130, "dpsim: interrupted\n")
    assert os.listdir(tmp_path) == ["t.json"] and (tmp_path / "t.json").read_text() == "the user's old trace"


def test_ctrl_c_in_course_grade_is_one_line_and_writes_no_csv(tmp_path, monkeypatch):
    from course import grade
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in "ab":
        (subs / f"{name}.ipynb").write_text('{"cells": []}')
    real, calls = grade.rows_of, []

    def second_is_interrupted(nb):
        calls.append(nb)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(nb)
    monkeypatch.setattr(grade, "rows_of", second_is_interrupted)
    assert course_main("grade", subs, "-o", tmp_path / "g.csv") == (130, "python -m course: interrupted\n")
    assert sorted(os.listdir(tmp_path)) == ["subs"]


def test_a_file_is_renamed_into_place_only_when_complete(tmp_path):
    from dpsim import files
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(KeyboardInterrupt):
        with files.writing(target) as f:
            f.write("new, half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == ["out.json"] and target.read_text() == "old"
    with files.writing(target) as f:
        f.write("new")
    assert os.listdir(tmp_path) == ["out.json"] and target.read_text() == "new"


def test_a_planted_link_at_the_temporary_name_is_never_followed(tmp_path):
    from dpsim import files
    victim = tmp_path / "victim"
    victim.write_text("keep")
    planted = tmp_path / ".out.json.planted.tmp"
    planted.symlink_to(victim)
    with pytest.raises(OSError):
        os.close(files.create_new(planted))
    assert victim.read_text() == "keep"


# ------------------------------------------------------------------ output paths, before any work

LONG = "n" * 300 + ".json"

DPSIM_OUTPUTS = [
    (["run", "cntk-1bit-k80", "--trace", "/proc/x.json"], "cannot create"),
    (["run", "cntk-1bit-k80", "--trace", "/sys/x.json"], "cannot create"),
    (["run", "cntk-1bit-k80", "--trace", LONG], "limit of 255"),
    (["run", "cntk-1bit-k80", "--plot", "n" * 300 + ".png"], "limit of 255"),
    (["run", "cntk-1bit-k80", "--trace", "/dev/null"], "not a regular file"),
    (["run", "cntk-1bit-k80", "--trace", "link.json"], "symbolic link"),
    (["run", "cntk-1bit-k80", "--trace", "x.png", "--plot", "x.png"], "also --trace's file"),
    (["run", "cntk-1bit-k80", "--trace", "./x.png", "--plot", "x.png"], "also --trace's file"),
    (["run", "cntk-1bit-k80", "--trace", "b-timeline.png", "--plot", "b.png"], "also --trace's file"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--plot", "/proc/x.png"], "cannot create"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--plot", "n" * 300 + ".png"], "limit of 255"),
]


@pytest.mark.parametrize("argv, says", DPSIM_OUTPUTS, ids=[" ".join(a)[:70] for a, _ in DPSIM_OUTPUTS])
def test_dpsim_refuses_an_output_before_simulating(tmp_path, argv, says, dpsim_command):
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    start = time.monotonic()
    p = dpsim_command(*argv, "--set", "training.iterations=100000", "--set", "training.warmup_iterations=0",
                      cwd=tmp_path)
    assert p.returncode == 2 and says in one_line(p.stderr), p.stderr
    assert time.monotonic() - start < 20           # 100,000 iterations would take minutes
    assert sorted(os.listdir(tmp_path)) == ["link.json"]


COURSE_OUTPUTS = [
    (["calibrate", "-o", "/proc/p.toml"], "cannot create"),
    (["calibrate", "-o", "n" * 300 + ".toml"], "limit of 255"),
    (["calibrate", "-o", "n" * 245 + ".toml"], "sidecar"),        # the sidecar's name is the one too long
    (["calibrate", "-o", "{d}/link.json"], "symbolic link"),
    (["compare", "--json", "/proc/c.json"], "cannot create"),
    (["compare", "--json", "{d}/x.png", "--plot", "{d}/x.png"], "also --json's file"),
    (["compare", "--json", "{d}/p.toml", "--profile", "{d}/p.toml"], "also --json's file"),
    (["compare", "--plot", "/proc/c.png"], "cannot create"),
    (["grade", "{d}", "-o", "/proc/g.csv"], "cannot create"),
    (["grade", "{d}", "-o", "{d}/" + "n" * 300 + ".csv"], "limit of 255"),
]


@pytest.mark.parametrize("argv, says", COURSE_OUTPUTS, ids=[" ".join(a)[:70] for a, _ in COURSE_OUTPUTS])
def test_course_refuses_an_output_before_measuring(tmp_path, argv, says):
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    (tmp_path / "p.toml").write_text("")
    code, err = course_main(*[a.replace("{d}", str(tmp_path)) for a in argv])
    assert code == 2 and says in one_line(err, "python -m course: error: "), err
    assert sorted(os.listdir(tmp_path)) == ["link.json", "p.toml"]


@pytest.mark.parametrize("argv", [
    ["run", "cntk-1bit-k80", "--set", "sync.str\u202eategy\n=ps"],
    ["run", "cntk-1bit-k80", "--set", "sync.strategy\u2066=\u2069ps"],
    ["run", "no\nsuch\u202e.toml"],
    ["run", "cntk-1bit-k80", "--trace", "no\u2067dir/\x1b[2Jx.json"],
    ["sweep", "d2l-ps-vs-ring", "--gpus", "1,\n2\u202a"],
    ["run", "cntk-1bit-k80", "--unknown\n\u202d"],
], ids=["key", "value", "scenario file", "trace", "gpus", "flag"])
def test_control_characters_are_escaped_in_every_error(argv, dpsim_cli):
    with within(20):
        code, _, err = dpsim_cli(*argv)
    line = one_line(err)
    assert code == 2
    assert not any(c in line for c in "\x1b\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"), line
    assert "\\n" in line or "\\u20" in line, line


def test_course_grade_escapes_the_names_it_prints(tmp_path):
    subs = tmp_path / "a\u202eb\nc"
    subs.mkdir()
    (subs / "x\u2066\n.ipynb").write_text('{"cells": []}')
    p = subprocess.run([sys.executable, "-m", "course", "grade", str(subs), "-o", str(tmp_path / "g.csv")],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.strip().split("\n")) == 2, p.stdout            # one notebook line, one summary
    assert not any(c in p.stdout for c in "\u202e\u2066"), p.stdout


# ------------------------------------------------------------------ files read, sizes bounded

def test_special_files_are_refused_without_blocking(tmp_path, dpsim_command):
    os.mkfifo(tmp_path / "fifo.toml")
    for source, says in [("fifo.toml", "not a regular file"), ("/dev/zero", "not a regular file"),
                         ("/proc/self", "not a regular file")]:
        p = dpsim_command("run", source, cwd=tmp_path)
        assert p.returncode == 2 and says in one_line(p.stderr), p.stderr


def test_a_fifo_as_profile_or_sidecar_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")
    code, err = course_main("compare", "--profile", tmp_path / "fifo.toml")
    assert code == 2 and "not a regular file" in one_line(err, "python -m course: error: ")
    (tmp_path / "p.toml").write_text("[cluster]\nnodes = 1\n")
    os.mkfifo(tmp_path / "p.measured.json")
    code, err = course_main("compare", "--profile", tmp_path / "p.toml")
    assert code == 2 and "sidecar" in one_line(err, "python -m course: error: ")


HUGE = "9" * 5000
HEX = "0x" + "f" * 5000

SIZES = [
    (["run", "d2l-ps-vs-ring", "--set", f"training.iterations={HUGE}"], "4,300 digits"),
    (["run", "d2l-ps-vs-ring", "--set", f"training.seed={HEX}"], "training.seed: an integer of about 6,021 digits"),
    (["run", "d2l-ps-vs-ring", "--set", f"sync.bucket_mib={HEX}"], "1.8e+308"),
    (["run", "d2l-ps-vs-ring", "--set", f"cluster.gpu_speed=[1, {HEX}]"], "cluster.gpu_speed[1]"),
    (["run", "{d}/huge.toml"], "4,300 digits"),
    (["run", "{d}/hex.toml"], "training.iterations"),
    (["run", "{d}/big.toml"], "limit of 1,048,576"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", ",".join(map(str, range(1, 10_001)))], "1,000 rows"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", ",".join(["1"] * 2000)], "1,000"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--vary", "sync.strategy=ps,ring",
      "--vary", "training.batch_per_gpu=" + ",".join(map(str, range(1, 400)))], "1,000"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--vary", f"training.iterations=1,{HUGE}"], "4,300 digits"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--jobs", "100000"], "to 1,024"),
    (["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--jobs", HUGE], "--jobs"),
]


@pytest.mark.parametrize("argv, says", SIZES, ids=[" ".join(a)[:60] for a, _ in SIZES])
def test_sizes_are_refused_before_allocation(tmp_path, argv, says, dpsim_cli):
    (tmp_path / "huge.toml").write_text(f"[training]\niterations = {HUGE}\n")
    (tmp_path / "hex.toml").write_text(f"[training]\niterations = {HEX}\n")
    (tmp_path / "big.toml").write_text("# padding\n" * 200_000)
    start = time.monotonic()
    with within(20):
        code, out, err = dpsim_cli(*[a.replace("{d}", str(tmp_path)) for a in argv])
    assert code == 2 and says in one_line(err), err
    assert out == "" and time.monotonic() - start < 10


def test_jobs_beyond_the_cores_start_one_process_per_core_and_say_so(monkeypatch, dpsim_cli):
    from concurrent.futures import ThreadPoolExecutor

    from dpsim import sweeps
    started = []
    monkeypatch.setattr(sweeps, "ProcessPoolExecutor",
                        lambda workers, **kw: started.append(workers) or ThreadPoolExecutor(workers))
    with within(120):
        code, out, err = dpsim_cli("sweep", "d2l-ps-vs-ring", "--gpus", "1,2,4,8", "--jobs", "1024",
                                   "--vary", "sync.strategy=ps,ring")
    assert code == 0, err
    assert all(1 < n <= sweeps.cores() for n in started), started
    assert f"more than this machine's {sweeps.cores()} cores" in err


@pytest.mark.parametrize("argv, says", [(["compare", "--samples", "1e12"], "--samples"),
                                        (["compare", "--samples", "100000000"], "at most 10,000,000"),
                                        (["calibrate", "--width", "1e9"], "--width"),
                                        (["calibrate", "--width", HUGE], "--width")])
def test_course_sizes_are_refused_before_allocation(argv, says):
    start = time.monotonic()
    code, err = course_main(*argv)
    assert code == 2 and says in one_line(err, "python -m course: error: ")
    assert time.monotonic() - start < 5


# ------------------------------------------------------------------ a planted course/ folder

def test_a_course_folder_in_the_current_folder_does_not_replace_the_package(tmp_path):
    """`python -m course grade` run where `course/grade/` holds the submissions: sys.path[0]
    is the current folder under -m, which made `course` and `course.grade` that folder."""
    from test_grade_hostile import good_notebook
    subs = tmp_path / "course" / "grade"
    subs.mkdir(parents=True)
    good_notebook(subs / "alice.ipynb")
    p = subprocess.run([sys.executable, "-m", "course", "grade", "course/grade", "-o", "g.csv"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    with open(tmp_path / "g.csv") as f:
        rows = list(csv.DictReader(f))
    assert any(r["result"] == "correct" for r in rows), rows


def test_json_of_a_run_is_unchanged_by_the_checks(tmp_path, dpsim_cli):
    code, out, _ = dpsim_cli("run", "d2l-ps-vs-ring", "--json", "--trace", tmp_path / "t.json")
    assert code == 0 and json.loads(out)["gpus"] >= 1
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert os.listdir(tmp_path) == ["t.json"]
