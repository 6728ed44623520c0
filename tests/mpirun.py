"""Launch a Python module or script under mpiexec from a test, with a hard time limit.

MPI tests run in a subprocess so that a hanging collective can never hang pytest itself.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mpiexec() -> str:
    """The mpiexec that sits beside this interpreter (from the mpich wheel), else the one on PATH."""
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        raise RuntimeError("mpiexec not found: install the 'mpich' wheel (pip install mpich)")
    return found


def run_mpi(n: int, args: list[str], timeout: float = 120, env: dict | None = None):
    """Run `mpiexec -n n python ARGS...` in the repository root; return the CompletedProcess.

    Raises subprocess.TimeoutExpired (and kills the job) if it runs past `timeout` seconds.
    """
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("OPENBLAS_NUM_THREADS", "1")
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    cmd = [mpiexec(), "-n", str(n), sys.executable, *args]
    return subprocess.run(cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


def explain(proc) -> str:
    """A failed MPI run's exit code and the end of its output, for an assertion message."""
    return f"exit code {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
