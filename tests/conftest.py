"""Fixtures shared by the test files, one section per kind of test.

Sections: MPI (below). Helpers that are plain functions stay in their own modules
(tests/mpirun.py, tests/dpsim_helpers.py), which test files may also import directly.
"""
import pytest

from mpirun import run_mpi


# ------------------------------------------------------------------ MPI

@pytest.fixture
def mpirun():
    """Launch ``mpiexec -n n python ARGS...`` in the repository root and return the
    CompletedProcess: ``mpirun(n, args, timeout=120, env=None)`` (tests/mpirun.py's run_mpi:
    the mpich wheel's mpiexec, one BLAS thread per rank, the job killed past `timeout`)."""
    return run_mpi
