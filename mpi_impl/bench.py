"""Time the all-reduce algorithms over message sizes, the way nccl-tests and the OSU
micro-benchmarks do.  Run under mpiexec; rank 0 prints the table::

    mpiexec -n 4 python -m mpi_impl.bench --algo ring,halving-doubling,mpi --sizes 1K,1M,64M

For every size and algorithm: a few warm-up calls (the first also checks the arguments on
all ranks), then `--iters` timed calls, each preceded by a Barrier so that all ranks start
together.  The algorithms take turns call by call, so a machine whose load changes during
the run slows them alike.  A call's time is the slowest rank's (max over ranks); the table
shows the mean over calls (the JSON also has median, min and max).  As in nccl-tests:

    algbw = size / time                 (size = bytes of the buffer being reduced)
    busbw = algbw * 2 (p - 1) / p       (what each rank's link carried, for all-reduce)

busbw is the figure to compare with a link's bandwidth and across rank counts.  "sent/rank"
is what the busiest rank sends in one call (rank 0 for ps).  "1bit" can
be timed too; its busbw uses the same formula (the uncompressed size), so it shows the
speed a user sees, not the bytes on the wire (that is the "sent/rank" column).

A bad command line (an unknown or old algorithm name, a bad size) is one line on stderr and
exit code 2 on every rank.
"""
from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl.errors import Parser, UsageError, algorithm_names, usage_errors

UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2,
         "G": 1024 ** 3, "GB": 1024 ** 3}
BENCH_ALGORITHMS = mpi_impl.ALGORITHMS + ("1bit",)


def parse_size(text: str) -> int:
    """'1K' -> 1024, '64M' -> 67108864, '100' -> 100 (bytes; K, M, G are powers of 1024)."""
    t = text.strip().upper()
    digits = t.rstrip("KMGB")
    unit = t[len(digits):]
    if not digits.isdigit() or unit not in UNITS:
        raise ValueError(f"bad size {text!r}: use a number with an optional K, M or G (e.g. 64M)")
    return int(digits) * UNITS[unit]


def human(nbytes: int) -> str:
    for unit, factor in (("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor}{unit}"
    return str(nbytes)


def time_interleaved(calls, comm, iters: int, warmup: int):
    """Time each of `calls` `iters` times, taking turns call by call (so that a change in the
    machine's load during the run hits every algorithm alike).  Returns an (iters, calls)
    array of seconds: the slowest rank's time of each call."""
    for call in calls:
        for _ in range(warmup):
            call()
    times = np.empty((iters, len(calls)))
    for i in range(iters):
        for j, call in enumerate(calls):
            comm.Barrier()
            start = MPI.Wtime()
            call()
            times[i, j] = MPI.Wtime() - start
    comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    return times


def prepare(algo, x, comm, args, sync):
    """A function doing one all-reduce of x with `algo`, and the bytes it sends per rank."""
    if algo == "1bit":
        onebit = mpi_impl.OneBitAllreduce(comm, cuda_aware=args.cuda_aware)
        onebit(x)                                    # checks arguments, builds the plan
        before = onebit.bytes_sent
        onebit(x)
        return (lambda: (onebit(x), sync())), onebit.bytes_sent - before
    out = x.copy()                                   # reused, as a training loop would
    mpi_impl.allreduce(x, algo, comm, out=out, cuda_aware=args.cuda_aware)   # checked once
    sent = mpi_impl.bytes_sent(algo, x.size, x.itemsize, comm.Get_size(), comm.Get_rank())
    call = lambda: (mpi_impl.allreduce(x, algo, comm, out=out, cuda_aware=args.cuda_aware,
                                       check=False), sync())
    return call, sent


def bench_size(algos, nbytes, args, comm, xp):
    """One table row per algorithm for buffers of `nbytes` bytes."""
    p = comm.Get_size()
    dtype = np.dtype(args.dtype)
    count = nbytes // dtype.itemsize
    x = xp.asarray(np.random.default_rng(comm.Get_rank()).standard_normal(count).astype(dtype))
    sync = (lambda: None) if xp is np else xp.cuda.get_current_stream().synchronize
    prepared = [prepare(algo, x, comm, args, sync) for algo in algos]
    times = time_interleaved([call for call, _ in prepared], comm, args.iters, args.warmup)
    sent = np.array([bytes_ for _, bytes_ in prepared], dtype=np.int64)
    comm.Allreduce(MPI.IN_PLACE, sent, op=MPI.MAX)          # the busiest rank's bytes
    rows = []
    for j, algo in enumerate(algos):
        seconds = float(times[:, j].mean())
        algbw = count * dtype.itemsize / seconds / 1e9
        rows.append({"algo": algo, "size_bytes": count * dtype.itemsize, "count": count,
                     "dtype": dtype.name, "ranks": p, "time_us": seconds * 1e6,
                     "median_us": float(np.median(times[:, j])) * 1e6,
                     "min_us": float(times[:, j].min()) * 1e6,
                     "max_us": float(times[:, j].max()) * 1e6,
                     "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (p - 1) / p,
                     "sent_per_rank_bytes": int(sent[j])})
    return rows


PROG = "mpi_impl.bench"


def main(argv=None):
    with usage_errors(PROG):
        return run(argv)


def run(argv):
    parser = Parser(prog=f"python -m {PROG}", description=__doc__.split("\n")[0])
    parser.add_argument("--algo", default="ring,recursive-doubling,halving-doubling,ps,sharded-ps,mpi",
                        type=algorithm_names(BENCH_ALGORITHMS),
                        help=f"comma-separated, from: {','.join(BENCH_ALGORITHMS)}")
    parser.add_argument("--sizes", default="1K,64K,1M,16M", help="buffer sizes in bytes, e.g. 1K,1M,64M")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--cuda-aware", action="store_true", default=None,
                        help="pass GPU buffers straight to MPI (default: MPI_IMPL_CUDA_AWARE)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (rank 0)")
    args = parser.parse_args(argv)

    comm = MPI.COMM_WORLD
    algos = args.algo
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError as exc:
        raise UsageError(str(exc)) from None     # the same on every rank: all exit with code 2
    if args.iters < 1 or args.warmup < 0:
        raise UsageError("--iters must be >= 1 and --warmup >= 0")
    if args.device == "gpu":
        try:
            import cupy  # noqa: F401
        except ImportError:
            raise UsageError("--device gpu needs CuPy (pip install cupy-cuda12x)") from None
    xp = mpi_impl.pick_device(args.device, comm).xp

    rank0 = comm.Get_rank() == 0
    if rank0:
        print(f"# mpi_impl.bench: {comm.Get_size()} ranks, device {args.device}, {args.dtype}, "
              f"{args.iters} iterations after {args.warmup} warm-up; time = slowest rank, mean "
              f"over iterations; algbw, busbw from the mean")
        print(f"# {MPI.Get_library_version().splitlines()[0].strip()}")
        print(f"{'size':>8} {'algo':>18} {'time(us)':>12} {'median(us)':>12} {'algbw(GB/s)':>12} "
              f"{'busbw(GB/s)':>12} {'sent/rank(B)':>14}")
    rows = []
    with mpi_impl.abort_on_error(comm):
        for nbytes in sizes:
            for row in bench_size(algos, nbytes, args, comm, xp):
                rows.append(row)
                if rank0:
                    print(f"{human(row['size_bytes']):>8} {row['algo']:>18} {row['time_us']:12.1f} "
                          f"{row['median_us']:12.1f} "
                          f"{row['algbw_gbs']:12.3f} {row['busbw_gbs']:12.3f} "
                          f"{row['sent_per_rank_bytes']:14d}", flush=True)
    if rank0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": comm.Get_size(), "device": args.device, "iters": args.iters,
                       "warmup": args.warmup, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
