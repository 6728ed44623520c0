"""Fixtures shared by the test files, one section per kind of test.

Sections: MPI, and the dpsim command (in this process, or as a user types it). Helpers that are plain functions stay in their own modules
(tests/mpirun.py, tests/dpsim_helpers.py), which test files may also import directly.
"""
import pytest

from dpsim_helpers import run_dpsim
from mpirun import run_mpi


# ------------------------------------------------------------------ MPI

@pytest.fixture
def mpirun():
    """Launch ``mpiexec -n n python ARGS...`` in the repository root and return the
    CompletedProcess: ``mpirun(n, args, timeout=120, env=None)`` (tests/mpirun.py's run_mpi:
    the mpich wheel's mpiexec, one BLAS thread per rank, the job killed past `timeout`)."""
    return run_mpi


# ------------------------------------------------------------------ the dpsim command

@pytest.fixture
def dpsim_cli():
    """Run the dpsim command in this process: ``dpsim_cli(*args)`` -> (exit code, stdout,
    stderr) (tests/dpsim_helpers.py's run_dpsim, for helpers that are not tests)."""
    return run_dpsim


@pytest.fixture
def dpsim_command():
    """Run ``python -m dpsim ARGS`` as a user types it, in a subprocess:
    ``dpsim_command(*args, cwd=None, env=None)`` -> CompletedProcess (text, 120 s limit)."""
    import subprocess
    import sys

    def run(*args, cwd=None, env=None):
        return subprocess.run([sys.executable, "-m", "dpsim", *map(str, args)], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)
    return run
