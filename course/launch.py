"""Run a Python module under mpiexec (the one beside this Python: the mpich wheel's) and read
the JSON it prints or writes. One BLAS thread per rank, this checkout on PYTHONPATH.

On a cluster, COURSE_MPIEXEC names the launcher instead, words split as a shell would:
COURSE_MPIEXEC="srun --mpi=pmix" under slurm, or "mpiexec -f hosts" with a hostfile
(course/cluster/README.md)."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mpiexec():
    """The launcher's words: COURSE_MPIEXEC if set, else the mpiexec beside this Python."""
    if os.environ.get("COURSE_MPIEXEC", "").strip():
        return shlex.split(os.environ["COURSE_MPIEXEC"])
    beside = Path(sys.executable).with_name("mpiexec")
    return [str(beside) if beside.exists() else "mpiexec"]


def env():
    return dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run(ranks, module, args, timeout=600):
    """Run `mpiexec -n ranks python -m module args`; its stdout, or RuntimeError with stderr."""
    cmd = [*mpiexec(), "-n", str(ranks), sys.executable, "-m", module, *map(str, args)]
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def probe(ranks, model, width, depth, batch, syncs=("ring",), steps=16, device="cpu", timeout=300, codec=(),
          lowrank=0):
    """course.probe's JSON: every step's parts on `ranks` ranks (see course/probe.py); codec:
    buffer sizes at which to time the 1-bit codec; lowrank: PowerSGD's rank at which to time
    its products (0: not timed)."""
    out = run(ranks, "course.probe", ["--model", model, "--width", width, "--depth", depth, "--batch", batch,
                                      "--syncs", ",".join(syncs), "--steps", steps, "--device", device,
                                      "--codec", ",".join(map(str, codec)), "--lowrank", lowrank], timeout)
    return json.loads(out.strip().splitlines()[-1])
