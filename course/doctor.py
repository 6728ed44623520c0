"""`python -m course doctor`: is this machine ready for the labs? One line per check.

    python -m course doctor [--gpu]

Each check returns (status, line), status "ok", "warn" or "FAIL": a FAIL stops a lab from
working or from measuring anything worth comparing; a warning makes it slower or noisier but
still right. The command exits 0 when nothing failed, 1 otherwise. The checks:

    python     Python 3.11 or newer (tomllib)
    packages   numpy, simpy, mpi4py, matplotlib, threadpoolctl importable, at the versions
               pyproject.toml asks for
    cores      at least 2 cores for this process (lecture 06 runs 2 ranks side by side)
    load       other programs use less than LOAD_LIMIT of a core, sampled for a second
               (course/machine_load.py); a busy machine makes every measurement move
    blas       threadpoolctl finds the BLAS library, so each rank can be held to one thread
    mpi        two ranks start under the mpiexec beside this Python and add 1 + 1 with
               MPI's Allreduce, within MPI_TIMEOUT_S
    messages   single-copy messages between ranks (Linux CMA; mpi_impl/single_copy.py): a
               warning where the kernel forbids them (every message is then copied twice)
    gpu        (with --gpu) CuPy imports and sees a GPU
"""
from __future__ import annotations

import importlib
import subprocess
import sys

from course import machine_load

LOAD_LIMIT = 0.25             # cores' worth of other programs' CPU time per second
MPI_TIMEOUT_S = 60
NEEDED = {"numpy": (1, 24), "simpy": (4, 1), "mpi4py": (4, 0), "matplotlib": (3, 7), "threadpoolctl": (3, 0)}


def version_tuple(text: str) -> tuple:
    out = []
    for part in text.split(".")[:2]:
        digits = "".join(ch for ch in part if ch.isdigit()) or "0"
        out.append(int(digits))
    return tuple(out)


def check_python(version=sys.version_info):
    ok = tuple(version[:2]) >= (3, 11)
    return ("ok" if ok else "FAIL",
            f"Python {version[0]}.{version[1]}" + ("" if ok else ": 3.11 or newer is needed (tomllib)"))


def check_packages(importer=importlib.import_module):
    problems, found = [], []
    for name, least in NEEDED.items():
        try:
            version = getattr(importer(name), "__version__", "0")
        except ImportError:
            problems.append(f"{name} missing")
            continue
        if version_tuple(version) < least:
            problems.append(f"{name} {version} is older than {'.'.join(map(str, least))}")
        else:
            found.append(f"{name} {version}")
    if problems:
        return "FAIL", "packages: " + "; ".join(problems) + ' (pip install -e ".[lectures]" in the checkout)'
    return "ok", "packages: " + ", ".join(found)


def check_cores(cores=None):
    if cores is None:
        from dpsim.sweeps import cores as available
        cores = available()
    if cores < 2:
        return "FAIL", f"cores: {cores}; the labs run 2 ranks side by side and need 2"
    return "ok", f"cores: {cores}"


def check_load(load=None, seconds=1.0):
    load = load if load is not None else machine_load.sample(seconds)
    busy, queue = load["others_cores"], load["run_queue"]
    if busy is None:
        return "warn", "load: cannot be read on this system (no /proc); close other programs before measuring"
    line = f"load: other programs use {busy:.2f} cores; {queue} threads ready to run"
    if busy >= LOAD_LIMIT:
        return "FAIL", line + f" (more than {LOAD_LIMIT}: close them, or measurements will move)"
    return "ok", line


def check_blas(info=None):
    if info is None:
        from threadpoolctl import threadpool_info
        info = threadpool_info()
    blas = [i for i in info if i.get("user_api") == "blas"]
    if not blas:
        return "FAIL", "blas: threadpoolctl finds no BLAS library, so ranks cannot be held to one thread each"
    return "ok", "blas: " + ", ".join(f"{i.get('internal_api')} ({i.get('num_threads')} threads)" for i in blas)


MPI_PROGRAM = ("from mpi4py import MPI; import numpy as np; x = np.ones(1); y = np.zeros(1); "
               "MPI.COMM_WORLD.Allreduce(x, y); assert y[0] == MPI.COMM_WORLD.Get_size(); "
               "print(MPI.Get_library_version().splitlines()[0]) if MPI.COMM_WORLD.Get_rank() == 0 else None")


def check_mpi(launcher=None, timeout=MPI_TIMEOUT_S, run=subprocess.run):
    from course.launch import env, mpiexec
    words = launcher or mpiexec()
    try:
        done = run([*words, "-n", "2", sys.executable, "-c", MPI_PROGRAM], env=env(), capture_output=True,
                   text=True, timeout=timeout)
    except FileNotFoundError:
        return "FAIL", f"mpi: {words[0]} not found (pip install mpich, or set COURSE_MPIEXEC)"
    except subprocess.TimeoutExpired:
        return "FAIL", f"mpi: 2 ranks did not finish a 1-number Allreduce in {timeout} s"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return "FAIL", f"mpi: 2 ranks failed (exit {done.returncode}): {last[:200]}"
    return "ok", f"mpi: 2 ranks ran an Allreduce ({' '.join(done.stdout.split())[:80]})"


def check_messages(allowed=None):
    if allowed is None:        # in a child: importing mpi_impl starts MPI, which this process does not need
        from course.launch import env
        done = subprocess.run([sys.executable, "-c", "from mpi_impl.single_copy import allowed; print(allowed())"],
                              env=env(), capture_output=True, text=True, timeout=MPI_TIMEOUT_S)
        allowed = done.stdout.strip() == "True"
    if not allowed:
        return "warn", ("messages: single-copy (CMA) forbidden here: every message between ranks is copied "
                        "twice; results stay right, large messages slower")
    return "ok", "messages: single-copy between ranks (CMA)"


def check_gpu(importer=importlib.import_module):
    try:
        cupy = importer("cupy")
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:                      # ImportError, or CUDA's own error without a driver
        return "FAIL", (f"gpu: CuPy cannot reach a GPU ({type(e).__name__}: {str(e)[:120]}); "
                        'pip install -e ".[gpu]" (CUDA 12) or ".[gpu-cuda13]" (CUDA 13)')
    if count < 1:
        return "FAIL", "gpu: CuPy sees no GPU"
    return "ok", f"gpu: {count} visible to CuPy"


def checks(gpu=False):
    out = [check_python, check_packages, check_cores, check_load, check_blas, check_mpi, check_messages]
    return out + [check_gpu] if gpu else out


def doctor(gpu=False, write=print) -> int:
    """Run every check, write one line each; 0 if none failed, else 1."""
    failed = 0
    for check in checks(gpu):
        status, line = check()
        write(f"{status:4s}  {line}")
        failed += status == "FAIL"
    write("ready for the labs" if not failed else f"{failed} check{'s' if failed > 1 else ''} failed: see above")
    return 1 if failed else 0
