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

busbw is the figure to compare with a link's bandwidth and across rank counts.  "ring-shm" and
"halving-doubling-shm" are the two over MPI-3 shared memory (shm_ring.py,
shm_halving_doubling.py; CPU and one node only): their input is copied into the shared window
before each call, outside the timer, and their "sent/rank" is what a rank copies into or out
of another rank's buffer.  "sent/rank"
is what the busiest rank sends in one call (rank 0 for ps).  "1bit" can
be timed too; its busbw uses the same formula (the uncompressed size), so it shows the
speed a user sees, not the bytes on the wire (that is the "sent/rank" column).

**The bound.**  Before the table, the bench measures this machine's primitives
(primitives.py: the per-message latency alpha, the fastest transfer and add rates over
message sizes, every rank at once and one alone, each the best of many repeats), and times
two STREAM kernels of each size (a copy and an in-place add), a ring step and an addition
among the algorithms, call by call.  Each row's ``bound(us)`` is lower_bound.py's: the
largest of the algorithm's critical path of pipelined steps, its memory traffic priced at
the faster kernel's seconds per byte, every rank at once, and (all ranks on this
machine's CPU) the cores' work: a time no correct implementation of the algorithm's steps can
beat, so "of bound" = bound / time is at most 1.  "textbook(us)" is the old alpha-beta-gamma
model (``mpi_impl.seconds``, transfers and additions one after the other with 64 MiB figures),
which a pipelined step can beat; for 1bit it adds the encode/decode seconds the instance
measured during the timed calls (codec_s).

**Segments.**  ``--segment 256K,1M,none`` times ring, halving-doubling and sharded-ps once
per pipeline segment size ("none": the textbook steps, whole chunks then the additions);
the default is the library's (mpi_impl.SEGMENT_BYTES).

A bad command line (an unknown or old algorithm name, a bad size) is one line on stderr and
exit code 2 on every rank.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl import files, lower_bound, primitives, shm_halving_doubling, shm_ring, shm_window, single_copy
from mpi_impl.errors import Parser, UsageError, algorithm_names, interrupted, usage_errors, watch_ctrl_c

UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "M": 1024 ** 2, "MB": 1024 ** 2,
         "G": 1024 ** 3, "GB": 1024 ** 3}
SHARED_MEMORY = {"ring-shm": shm_ring, "halving-doubling-shm": shm_halving_doubling}   # host memory, one node
BENCH_ALGORITHMS = mpi_impl.ALGORITHMS + ("1bit",) + tuple(SHARED_MEMORY)
#: Limits, checked before any buffer is allocated (mpi_impl/README.md, "Limits"): a buffer
#: of --sizes or --segment (each rank holds about five: x, out, scratch and staging copies)
SIZE_LIMIT = 1 << 30
#: how many --sizes, --segment values and --iters or --warmup calls
LIST_LIMIT, ITERS_LIMIT = 64, 1_000_000


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


def time_interleaved(calls, comm, iters: int, warmup: int, before=()):
    """Time each of `calls` `iters` times, taking turns call by call (so that a change in the
    machine's load during the run hits every algorithm alike, and every call finds the
    caches as the calls before it left them), after `warmup` untimed rounds of the same
    turns.  Each round starts one call further on (round i runs call i mod n first), so no
    call always follows the same one: the call after the STREAM kernels' 64 MiB passes
    found colder caches, 8% slower in one run on 2 ranks, whichever algorithm it was.
    before[j], if given and not None, runs before call j, outside the timer.
    Returns an (iters, calls) array of seconds: the slowest rank's time of each call."""
    before = list(before) + [None] * (len(calls) - len(before))
    n = len(calls)
    turns = lambda i: [(i + k) % n for k in range(n)]
    for i in range(warmup):
        for j in turns(i):
            if before[j]:
                before[j]()
            calls[j]()
    times = np.empty((iters, n))
    for i in range(iters):
        for j in turns(i):
            if before[j]:
                before[j]()
            comm.Barrier()
            start = MPI.Wtime()
            calls[j]()
            times[i, j] = MPI.Wtime() - start
    comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    return times


PIPELINED = ("ring", "halving-doubling", "sharded-ps")     # the algorithms with segments


def parse_segments(text: str) -> list:
    """'256K,1M,none' -> [262144, 1048576, 0]: 0 is the textbook step (whole messages),
    spelled "none" on the command line and null in the JSON; a size of 0 is refused."""
    words = text.split(",")
    textbook = [t.strip().lower() == "none" for t in words]
    segments = [0 if none else parse_size(t) for t, none in zip(words, textbook)]
    if any(not size and not none for size, none in zip(segments, textbook)):
        raise ValueError("a --segment of 0 bytes: use none for whole messages")
    return segments


def prepare(algo, x, comm, args, sync, segment):
    """A function doing one all-reduce of x with `algo`, the bytes it sends per rank, a
    function giving the codec seconds per call so far (0 but for 1bit), and a function to
    run before each call, outside the timer (or None)."""
    if algo in SHARED_MEMORY:
        return prepare_shm(SHARED_MEMORY[algo], x, comm)
    if algo == "1bit":
        onebit = mpi_impl.OneBitAllreduce(comm, cuda_aware=args.cuda_aware)
        onebit(x)                                    # checks arguments, builds the plan
        before = onebit.bytes_sent
        onebit(x)
        calls, start = [0], onebit.codec_s

        def call():
            onebit(x)
            sync()
            calls[0] += 1
        return call, onebit.bytes_sent - before, lambda: (onebit.codec_s - start) / max(calls[0], 1), None
    out = x.copy()                                   # reused, as a training loop would
    mpi_impl.allreduce(x, algo, comm, out=out, cuda_aware=args.cuda_aware)   # checked once
    sent = mpi_impl.bytes_sent(algo, x.size, x.itemsize, comm.Get_size(), comm.Get_rank())
    call = lambda: (mpi_impl.allreduce(x, algo, comm, out=out, cuda_aware=args.cuda_aware,
                                       check=False, segment=segment), sync())
    return call, sent, lambda: 0.0, None


def prepare_shm(module, x, comm):
    """prepare() for a shared-memory all-reduce (module: shm_ring or shm_halving_doubling):
    x's values are copied into the shared window before each call (the gradient would be
    computed there), and the call reduces the window in place."""
    shared = shm_window.SharedBuffer(x.size, x.dtype, comm)
    restore = lambda: np.copyto(shared.array, x)
    restore()
    module.allreduce(shared.array, shared)                      # checked once
    sent = module.bytes_copied(x.size, x.itemsize, comm.Get_size(), comm.Get_rank())
    return lambda: module.allreduce(shared.array, shared, check=False), sent, lambda: 0.0, restore


def variants(algos, segments):
    """(algo, segment) pairs to time: every segment size for the pipelined algorithms."""
    return [(algo, segment) for algo in algos
            for segment in (segments if algo in PIPELINED else [mpi_impl.SEGMENT_BYTES])]


def textbook(algo, count, itemsize, p, machine, codec_s):
    """The textbook model of one call: its alpha-beta-gamma formula with this machine's alpha,
    beta and gamma, transfers and additions one after the other.  Not a bound."""
    figures = (machine["alpha"], machine["beta"], machine["gamma"])
    if algo == "1bit":
        return mpi_impl.onebit.seconds(count, itemsize, p, *figures) + codec_s
    if algo in SHARED_MEMORY:
        return SHARED_MEMORY[algo].seconds(count, itemsize, p, *figures)
    return mpi_impl.seconds(algo, count, itemsize, p, *figures)


def bound_figures(machine) -> dict:
    """The primitives a row's bound was computed from (they improve as the run goes on)."""
    seen = primitives.figures(machine)
    return {"alpha_us": seen["alpha_us"], "beta_best_gbs": seen["beta_best_gbs"],
            "gamma_best_gbs": seen["gamma_best_gbs"], "copy_us": machine["copy_s"] * 1e6,
            "add_us": machine["add_s"] * 1e6, "byte_ns": machine["byte_s"] * 1e9,
            "cores": machine["cores"]}


def bench_size(runs, nbytes, args, comm, device, machine):
    """One table row per (algorithm, segment) for buffers of `nbytes` bytes."""
    p = comm.Get_size()
    dtype = np.dtype(args.dtype)
    count = nbytes // dtype.itemsize
    x = device.xp.asarray(np.random.default_rng(comm.Get_rank()).standard_normal(count).astype(dtype))
    prepared = [prepare(algo, x, comm, args, device.wait, segment) for algo, segment in runs]
    probes = primitives.probes(machine, x)
    times = time_interleaved([call for call, _, _, _ in prepared] + [call for call, _ in probes],
                             comm, args.iters, args.warmup, [before for _, _, _, before in prepared])
    for k, (_, keep) in enumerate(probes):
        keep(float(times[:, len(runs) + k].min()))
    mine = np.array([bytes_ for _, bytes_, _, _ in prepared], dtype=np.int64)
    sent, sent_total = mine.copy(), mine.copy()
    comm.Allreduce(MPI.IN_PLACE, sent, op=MPI.MAX)          # the busiest rank's bytes
    comm.Allreduce(MPI.IN_PLACE, sent_total, op=MPI.SUM)
    codec = np.array([codec_s() for _, _, codec_s, _ in prepared])
    comm.Allreduce(MPI.IN_PLACE, codec, op=MPI.MAX)
    rows = []
    for j, (algo, segment) in enumerate(runs):
        seconds = float(times[:, j].mean())
        algbw = count * dtype.itemsize / seconds / 1e9
        limit = lower_bound.seconds(algo, count, dtype.itemsize, p, machine, machine["byte_s"], int(sent[j]),
                                    int(sent_total[j]), machine["cores"])
        rows.append({"algo": algo, "segment_bytes": segment if algo in PIPELINED and segment else None,
                     "size_bytes": count * dtype.itemsize, "count": count,
                     "dtype": dtype.name, "ranks": p, "time_us": seconds * 1e6,
                     "median_us": float(np.median(times[:, j])) * 1e6,
                     "min_us": float(times[:, j].min()) * 1e6,
                     "max_us": float(times[:, j].max()) * 1e6,
                     "algbw_gbs": algbw, "busbw_gbs": algbw * 2 * (p - 1) / p,
                     "bound_us": limit["bound"] * 1e6, "path_us": limit["path"] * 1e6,
                     "memory_us": limit["memory"] * 1e6, "cores_us": limit["cores"] * 1e6,
                     "bound_from": bound_figures(machine),
                     "of_bound": limit["bound"] / seconds if p > 1 else None,
                     "textbook_us": textbook(algo, count, dtype.itemsize, p, machine, float(codec[j])) * 1e6,
                     "sent_per_rank_bytes": int(sent[j])})
    return rows


def segment_name(row) -> str:
    if row["segment_bytes"] is None:
        return "-" if row["algo"] not in PIPELINED else "none"
    return human(row["segment_bytes"])


PROG = "mpi_impl.bench"


def main(argv=None):
    watch_ctrl_c(PROG)
    try:
        with usage_errors(PROG):
            return run(argv)
    except KeyboardInterrupt:                   # Ctrl-C: one line, no rank left waiting
        interrupted(PROG)


def build_parser():
    parser = Parser(prog=f"python -m {PROG}", description=__doc__.split("\n")[0],
                    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--algo", default="ring,recursive-doubling,halving-doubling,ps,sharded-ps,mpi",
                        type=algorithm_names(BENCH_ALGORITHMS),
                        help=f"comma-separated, from: {','.join(BENCH_ALGORITHMS)}")
    parser.add_argument("--sizes", default="1K,64K,1M,16M", help="buffer sizes in bytes, e.g. 1K,1M,64M")
    parser.add_argument("--iters", type=int, default=20, help="timed calls per algorithm and size")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"], help="the buffers' type")
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu"], help="gpu: CuPy arrays")
    parser.add_argument("--cuda-aware", action="store_true", default=None,    # %(default).0s: no "(default: None)"
                        help="pass GPU buffers straight to MPI (default: the MPI_IMPL_CUDA_AWARE "
                             "environment variable)%(default).0s")
    parser.add_argument("--segment", default=human(mpi_impl.SEGMENT_BYTES),
                        help="pipeline segment sizes for ring, halving-doubling and sharded-ps, "
                             "e.g. 256K,1M,none (none: the textbook steps)")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as JSON (rank 0)")
    return parser


def sizes_and_segments(args):
    """The --sizes and --segment lists in bytes, after checking the whole command line;
    a UsageError (the same on every rank: all exit with code 2) if it is wrong."""
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
        segments = parse_segments(args.segment)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.iters < 1 or args.warmup < 0:
        raise UsageError("--iters must be >= 1 and --warmup >= 0")
    if max(args.iters, args.warmup) > ITERS_LIMIT:
        raise UsageError(f"--iters and --warmup are limited to {ITERS_LIMIT:,} calls")
    for option, values in (("--sizes", sizes), ("--segment", segments)):
        if len(values) > LIST_LIMIT:
            raise UsageError(f"{option}: {len(values)} values, above the limit of {LIST_LIMIT}")
        if max(values) > SIZE_LIMIT:
            raise UsageError(f"{option} {human(max(values))} is above the limit of "
                             f"{human(SIZE_LIMIT)} per buffer (mpi_impl/README.md, \"Limits\")")
    for algo in SHARED_MEMORY:
        if algo in args.algo and args.device == "gpu":
            raise UsageError(f"--algo {algo} reduces host memory only: use it with --device cpu")
    ranks_problem = shm_halving_doubling.ranks_problem(MPI.COMM_WORLD.Get_size())
    if "halving-doubling-shm" in args.algo and ranks_problem:
        raise UsageError(f"--algo {ranks_problem}")
    problem = mpi_impl.missing_cupy(args.device)
    if problem:
        raise UsageError(problem)
    return sizes, segments


def run(argv):
    args = build_parser().parse_args(argv)
    sizes, segments = sizes_and_segments(args)
    comm = MPI.COMM_WORLD
    problem = files.output_problem("--json", args.json) if args.json and comm.Get_rank() == 0 else None
    problem = comm.bcast(problem, root=0)       # rank 0 writes it: its verdict for every rank
    if problem:
        raise UsageError(problem)
    device = mpi_impl.pick_device(args.device, comm)
    rank0 = comm.Get_rank() == 0
    if rank0:
        print_header(comm, args)
    with mpi_impl.abort_on_error(comm, PROG):
        machine = primitives.measure(comm, device, args.cuda_aware)
        machine["cores"] = primitives.shared_cores(comm, args.device)
    if rank0:
        print_machine(primitives.figures(machine))
    rows = []
    with mpi_impl.abort_on_error(comm, PROG):
        for nbytes in sizes:
            for row in bench_size(variants(args.algo, segments), nbytes, args, comm, device, machine):
                rows.append(row)
                if rank0:
                    print(row_line(row), flush=True)
    if rank0 and args.json:
        figures = primitives.figures(machine)
        result = {"ranks": comm.Get_size(), "device": args.device, "iters": args.iters,
                  "warmup": args.warmup, "machine": figures, "rows": rows}
        files.write_new(args.json, lambda f: json.dump(result, f, indent=1))
    return 0


def print_header(comm, args):
    print(f"# mpi_impl.bench: {comm.Get_size()} ranks, device {args.device}, {args.dtype}, "
          f"{args.iters} iterations after {args.warmup} warm-up; time = slowest rank, mean "
          f"over iterations; algbw, busbw from the mean")
    cma = "on" if os.environ.get(single_copy.VARIABLE, "").strip() == "1" else "off"
    print(f"# {MPI.Get_library_version().splitlines()[0].strip()}; single-copy messages "
          f"(CMA, mpi_impl/single_copy.py): {cma}", flush=True)


def print_machine(machine):
    """The figures the bound and the textbook model use, then the table's column names."""
    rate = lambda key: "-" if machine[key] is None else f"{machine[key]:.2f}"
    print(f"# measured for the bound (best of repeats, mpi_impl/primitives.py): alpha "
          f"{machine['alpha_us']:.1f} us, beta_best {rate('beta_best_gbs')} GB/s, gamma_best "
          f"{machine['gamma_best_gbs']:.2f} GB/s added; for the textbook model (64 MiB, all ranks "
          f"at once): beta {rate('beta_gbs')} GB/s, gamma {machine['gamma_gbs']:.2f} GB/s, copy "
          f"{machine['copy_gbs']:.2f} GB/s; 64 MiB one way alone (ping-pong) {rate('one_way_gbs')} GB/s",
          flush=True)
    print(f"{'size':>8} {'algo':>18} {'segment':>8} {'time(us)':>12} {'median(us)':>12} "
          f"{'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'bound(us)':>10} {'of bound':>9} "
          f"{'textbook(us)':>12} {'sent/rank(B)':>14}")


def row_line(row) -> str:
    share = "-" if row["of_bound"] is None else f"{row['of_bound']:.2f}"
    return (f"{human(row['size_bytes']):>8} {row['algo']:>18} {segment_name(row):>8} "
            f"{row['time_us']:12.1f} {row['median_us']:12.1f} "
            f"{row['algbw_gbs']:12.3f} {row['busbw_gbs']:12.3f} "
            f"{row['bound_us']:10.1f} {share:>9} {row['textbook_us']:12.1f} "
            f"{row['sent_per_rank_bytes']:14d}")


if __name__ == "__main__":
    sys.exit(main())
