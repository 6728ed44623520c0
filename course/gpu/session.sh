#!/usr/bin/env bash
# Every GPU check of this project on one GPU machine, in one command, inside a time budget:
# install as README.md says (from the wheels course/gpu/wheels.sh put in .whl/, so no network
# is needed), then the steps below, most important first, each with its own time limit and
# skipped once the budget has no room for it. It never stops at a failed step.
#
#   bash course/gpu/session.sh                          # all steps, 540 s
#   BUDGET=240 STEPS="install env tests" bash course/gpu/session.sh
#   VENV=.venv DEVICE=cpu bash course/gpu/session.sh    # a dry run on a CPU machine
#
# OUT (default /tmp/gpu-session) receives summary.txt (each step's exit code, time and last
# lines) and all.tar.gz (every step's full log and JSON, the profile and the compare plot).
#
# Steps:
#   install    a venv that sees the machine's own packages (CuPy, NumPy, Matplotlib, pytest)
#              after its own: mpich and mpi4py, and what else is missing, from .whl/; this
#              checkout editable
#   env        nvidia-smi, Python, CuPy and its GPU, NCCL, MPI's library, a 2-rank mpiexec
#   tests      tests/test_device.py: every collective on CuPy arrays against MPI's Allreduce,
#              the 1-bit codec's bits, host staging's bytes, train --device gpu against the CPU
#   bench      mpi_impl.bench --device gpu on 1, 2 and 4 ranks, every algorithm; nccl on 1 rank
#   train      mpi_impl.train on 2 ranks: samples/s on the GPU against the CPU, 1-bit against plain
#   calibrate  course calibrate --device gpu (5 rounds, to fit the budget)
#   compare    course compare --device gpu --ranks 1,2,4 from that profile
#   lectures   every lecture notebook executed (tests/test_lectures.py)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu-session}
BUDGET=${BUDGET:-540}
DEVICE=${DEVICE:-gpu}
STEPS=${STEPS:-"install env tests bench train calibrate compare lectures"}
VENV_GIVEN=${VENV:+yes}
VENV=${VENV:-/tmp/gpu-venv}
WORK=$(mktemp -d /tmp/gpu-session-work.XXXXXX)
START=$(date +%s)
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
: > "$SUMMARY"
export PYTHONUNBUFFERED=1 VENV VENV_GIVEN WORK DEVICE

say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $(( BUDGET - ($(date +%s) - START) )); }

# step NAME LIMIT_S COMMAND...: run it for at most LIMIT_S, or what the budget has left
step() {
    local name=$1 limit=$2 room t0 rc
    shift 2
    room=$(( $(left) - 15 ))
    if [ "$room" -lt 20 ]; then
        say "== $name: skipped, $(left) s of the budget left"
        return 0
    fi
    [ "$limit" -gt "$room" ] && limit=$room
    t0=$(date +%s)
    timeout "$limit" bash -c '"$@"' "$name" "$@" >> "$WORK/$name.log" 2>&1
    rc=$?
    say "== $name: exit $rc in $(( $(date +%s) - t0 )) s (limit $limit s): $*"
    tail -n "${TAIL:-12}" "$WORK/$name.log" | sed 's/^/   /' | tee -a "$SUMMARY"
    return 0
}

install() {
    if [ -n "$VENV_GIVEN" ]; then echo "using $VENV as it is"; return 0; fi
    local machine own
    # The machine's python3 may itself be a venv (CUDA images put PyTorch and CuPy in one), whose
    # packages a new venv's --system-site-packages would not see: a .pth file adds them, after
    # the new venv's own.
    machine=$(python3 -c 'import site; print(site.getsitepackages()[0])') || return 1
    python3 -m venv "$VENV" || return 1
    own=$("$VENV/bin/python" -c 'import site; print(site.getsitepackages()[0])') || return 1
    echo "$machine" > "$own/the-machines-packages.pth"
    echo "venv $VENV, seeing $machine after its own packages"
    # this project's MPI, in front of any mpi4py the machine has (built for another MPI, maybe)
    "$VENV/bin/python" -m pip install -q --no-index --ignore-installed --no-deps .whl/mpich-*.whl .whl/mpi4py-*.whl \
        || return 1
    "$VENV/bin/python" -m pip install -q --no-index --find-links .whl simpy tomli-w threadpoolctl \
        nbclient nbformat ipykernel ipywidgets "setuptools>=70.1" || return 1
    "$VENV/bin/python" -m pip install -q --no-index --no-deps --no-build-isolation -e . \
        || echo "the editable install failed: the steps run from the checkout (python -m ...)"
}

py() { "$VENV/bin/python" "$@"; }
mpi() { local n=$1; shift; "$VENV/bin/mpiexec" -n "$n" "$VENV/bin/python" "$@"; }

environment() {
    nvidia-smi || echo "no nvidia-smi"
    py -c 'import sys, numpy; print("python", sys.version.split()[0], "numpy", numpy.__version__)'
    py -c 'from mpi_impl.device import missing_cupy; print("GPU for --device gpu:", missing_cupy("gpu") or "yes")'
    py -c '
import cupy
rt = cupy.cuda.runtime
print("cupy", cupy.__version__, "CUDA runtime", rt.runtimeGetVersion(), "driver", rt.driverGetVersion())
print("GPU 0:", rt.getDeviceProperties(0)["name"].decode(), "of", rt.getDeviceCount())
from cupy.cuda import nccl
print("NCCL", nccl.get_version())' || echo "CuPy: see above"
    py -c 'from mpi4py import MPI; print("MPI:", MPI.Get_library_version().splitlines()[0], "mpi4py from", MPI.__file__)'
    mpi 2 -c 'import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; sys.stdout.write(f"rank {c.rank} of {c.size}\n")'
}

bench() {
    local n
    for n in 1 2 4; do
        mpi "$n" -m mpi_impl.bench --device "$DEVICE" --algo ring,recursive-doubling,halving-doubling,ps,sharded-ps,mpi,1bit \
            --sizes 1M,16M,64M --iters 10 --warmup 3 --json "$WORK/bench-$n-ranks.json"
    done
    [ "$DEVICE" = gpu ] && mpi 1 -m mpi_impl.bench --device gpu --algo nccl,mpi --sizes 1M,16M,64M,256M --iters 10 \
        --warmup 3 --json "$WORK/bench-nccl.json"
    return 0
}

train() {
    local device compress devices=cpu
    [ "$DEVICE" != cpu ] && devices="cpu $DEVICE"           # a dry run trains on the CPU once
    for device in $devices; do
        for compress in none 1bit; do
            echo "2 ranks, $device, compress $compress:"
            mpi 2 -m mpi_impl.train --data synthetic --samples 16384 --width 1024 --depth 2 --batch-per-rank 256 \
                --epochs 3 --momentum 0 --lr 0.1 --device "$device" --compress "$compress" \
                --json "$WORK/train-$device-$compress.json" | tail -n 1
        done
    done
}

export -f install py mpi environment bench train
for s in $STEPS; do
    case $s in
        install)   step install 120 install ;;
        env)       step env 60 environment ;;
        tests)     step tests 180 py -m pytest -q -rs tests/test_device.py ;;
        bench)     step bench 150 bench ;;
        train)     step train 120 train ;;
        calibrate) step calibrate 150 py -m course calibrate --device "$DEVICE" --rounds 5 -o "$WORK/profile.toml" ;;
        compare)   step compare 180 py -m course compare --device "$DEVICE" --profile "$WORK/profile.toml" \
                       --ranks 1,2,4 --json "$WORK/compare.json" --plot "$WORK/compare.png" ;;
        lectures)  step lectures 240 py -m pytest -q -rs tests/test_lectures.py ;;
        *)         say "== $s: no such step (steps: install env tests bench train calibrate compare lectures)" ;;
    esac
done
tar czf "$OUT/all.tar.gz" -C "$WORK" .
say "== done in $(( $(date +%s) - START )) s of $BUDGET; logs and JSON in $OUT/all.tar.gz"
