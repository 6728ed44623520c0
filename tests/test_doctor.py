"""course doctor: each check passes on a ready machine and fails (or warns) on the defect it
looks for; and the load it reads counts other programs' CPU time, not ours."""
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from course import doctor, machine_load


def test_python_too_old():
    assert doctor.check_python((3, 10, 0))[0] == "FAIL"
    assert doctor.check_python((3, 11, 2))[0] == "ok"


def test_packages_missing_or_old():
    real = __import__
    def missing(name):
        if name == "simpy":
            raise ImportError(name)
        return real(name)
    status, line = doctor.check_packages(missing)
    assert status == "FAIL" and "simpy missing" in line
    old = lambda name: SimpleNamespace(__version__="3.6.1") if name == "matplotlib" else real(name)
    status, line = doctor.check_packages(old)
    assert status == "FAIL" and "matplotlib 3.6.1 is older than 3.7" in line
    assert doctor.check_packages()[0] == "ok"


def test_one_core_is_not_enough():
    assert doctor.check_cores(1)[0] == "FAIL" and doctor.check_cores(2)[0] == "ok"


def test_a_busy_machine_fails_and_an_unknown_load_warns():
    assert doctor.check_load({"others_cores": 0.9, "run_queue": 4})[0] == "FAIL"
    assert doctor.check_load({"others_cores": 0.05, "run_queue": 1})[0] == "ok"
    assert doctor.check_load({"others_cores": None, "run_queue": None})[0] == "warn"


def test_no_blas_for_threadpoolctl():
    assert doctor.check_blas([])[0] == "FAIL"
    assert doctor.check_blas([{"user_api": "blas", "internal_api": "openblas", "num_threads": 2}])[0] == "ok"


def test_mpi_missing_failing_or_hanging():
    assert doctor.check_mpi(["/nonexistent/mpiexec"])[0] == "FAIL"
    assert doctor.check_mpi([sys.executable, "-c", "raise SystemExit(3)"])[0] == "FAIL"
    hang = [sys.executable, "-c", "import time; time.sleep(30)"]
    status, line = doctor.check_mpi(hang, timeout=1)
    assert status == "FAIL" and "did not finish" in line


def test_mpi_works_here():
    status, line = doctor.check_mpi()
    assert status == "ok", line


def test_messages_without_single_copy_warn_but_do_not_fail():
    assert doctor.check_messages(False)[0] == "warn"
    assert doctor.check_messages(True)[0] == "ok"


def test_gpu_without_cupy_fails():
    def no_cupy(name):
        raise ImportError("No module named 'cupy'")
    assert doctor.check_gpu(no_cupy)[0] == "FAIL"
    fake = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: 0)))
    assert doctor.check_gpu(lambda name: fake)[0] == "FAIL"


def test_doctor_exits_1_when_a_check_fails(monkeypatch):
    lines = []
    monkeypatch.setattr(doctor, "checks", lambda gpu: [lambda: ("ok", "a"), lambda: ("warn", "b")])
    assert doctor.doctor(write=lines.append) == 0 and lines[-1] == "ready for the labs"
    monkeypatch.setattr(doctor, "checks", lambda gpu: [lambda: ("ok", "a"), lambda: ("FAIL", "c")])
    assert doctor.doctor(write=lines.append) == 1 and lines[-2:] == ["FAIL  c", "1 check failed: see above"]


# ---------------------------------------------------------------- machine_load

@pytest.mark.skipif(not machine_load.readable(), reason="needs Linux's /proc")
def test_a_burning_process_outside_our_tree_counts_as_load():
    """A process burning a core is counted when it is not in the measured tree (the tree is
    rooted at a sleeping process here), and not counted when it is ours."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        theirs = machine_load.sample(1.0, root=sleeper.pid)["others_cores"]
        assert theirs >= 0.6                          # the burner's core, and whatever else runs
        table = machine_load.process_table()
        assert burner.pid in machine_load.tree(table, machine_load.os.getpid())
        assert burner.pid not in machine_load.tree(table, sleeper.pid)
    finally:
        burner.kill()
        sleeper.kill()


def fake_proc(tmp_path, processes, running):
    """A /proc with `processes` {pid: (ppid, utime_ticks, stime_ticks)}."""
    (tmp_path / "stat").write_text(f"cpu 1 2 3 4\nprocs_running {running}\n")
    for pid, (ppid, ut, st) in processes.items():
        (tmp_path / str(pid)).mkdir(exist_ok=True)
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ut), str(st)] + ["0"] * 10
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) " + " ".join(fields) + "\n")


def test_others_cpu_counts_only_processes_outside_the_tree(tmp_path, monkeypatch):
    tick = machine_load.os.sysconf("SC_CLK_TCK")
    monkeypatch.setattr(machine_load.os, "getpid", lambda: 10)
    fake_proc(tmp_path, {1: (0, 0, 0), 10: (1, 0, 0), 11: (10, 0, 0), 20: (1, 0, 0)}, running=3)
    clock = iter([0.0, 2.0])

    def later(seconds):      # two seconds pass: ours (10, 11) use 4 s, pid 20 uses 1 s, pid 30 starts and uses 0.5 s
        fake_proc(tmp_path, {1: (0, 0, 0), 10: (1, 2 * tick, 0), 11: (10, tick, tick), 20: (1, tick // 2, tick // 2),
                             30: (1, 0, tick // 2)}, running=3)
    load = machine_load.sample(2.0, proc=tmp_path, sleep=later, clock=lambda: next(clock))
    assert load == {"others_cores": pytest.approx(1.5 / 2.0, rel=0.02), "run_queue": 3}
