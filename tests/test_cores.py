"""mpi_impl shares the machine's cores: each rank's BLAS threads leave room for the other
ranks and for their loader workers, and rank 0 says once when ranks outnumber the cores."""
import os
import subprocess
import sys

from mpirun import ROOT, mpiexec

PROBE = ("import sys; from mpi_impl import pick_device; from mpi_impl.device import usable_cores; from threadpoolctl import threadpool_info; "
         "pick_device('cpu', workers=int(sys.argv[1])); "
         "print('threads', max(i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'), usable_cores())")


def run(ranks, workers):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([mpiexec(), "-n", str(ranks), sys.executable, "-c", PROBE, str(workers)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_blas_threads_leave_a_core_for_each_loader_worker():
    done = run(1, 1)
    assert done.returncode == 0, done.stderr
    (line,) = [l for l in done.stdout.splitlines() if l.startswith("threads")]
    threads, cores = map(int, line.split()[1:])
    assert threads == max(1, cores // 2)                 # one rank + one worker share the cores


def test_rank_0_says_once_when_ranks_outnumber_the_cores():
    cores = len(os.sched_getaffinity(0))
    done = run(cores + 1, 0)
    assert done.returncode == 0, done.stderr
    notes = [l for l in done.stdout.splitlines() if l.startswith("note:")]
    assert len(notes) == 1 and f"{cores + 1} ranks on {cores} cores" in notes[0]
    assert not any(l.startswith("note:") for l in run(1, 0).stdout.splitlines())
