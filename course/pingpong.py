"""Point-to-point latency and bandwidth between ranks, and one gradient sync timed for real.

    mpiexec -n 2 python -m course.pingpong [--elements N] [--reps R]

Ranks pair up (0 with 1, 2 with 3, ...) and all pairs ping-pong at once, so with more ranks
than cores the figures include the cost of sharing the cores. For each message size the
one-way time is half the best round trip of a few. With --elements N every rank also times a
ring all-reduce and a 1-bit all-reduce of N float32 values, as mpi_impl.train's averager does
them (the sum, then the division by the number of ranks).

Rank 0 prints one JSON object: {"ranks", "sizes_bytes", "one_way_s", "ring_s", "onebit_s"}.
"""
import argparse
import json
import time

import numpy as np
from mpi4py import MPI

import mpi_impl

SIZES = (8, 1024, 65536, 1 << 20, 4 << 20)


def ping_pong(comm, nbytes, reps):
    """Best one-way time of `reps` round trips of nbytes between this rank and its partner."""
    rank = comm.Get_rank()
    partner = rank ^ 1
    buf = np.zeros(max(nbytes, 1), np.uint8)
    best = float("inf")
    if partner >= comm.Get_size():                 # odd rank count: the last rank sits out
        for _ in range(reps):
            comm.Barrier()
        return best
    for _ in range(reps):
        comm.Barrier()
        start = time.perf_counter()
        if rank % 2 == 0:
            comm.Send([buf, nbytes, MPI.BYTE], partner)
            comm.Recv([buf, nbytes, MPI.BYTE], partner)
        else:
            comm.Recv([buf, nbytes, MPI.BYTE], partner)
            comm.Send([buf, nbytes, MPI.BYTE], partner)
        best = min(best, (time.perf_counter() - start) / 2)
    return best


def median_time(comm, step, reps):
    """Median over reps of the slowest rank's time for step()."""
    times = []
    for _ in range(reps):
        comm.Barrier()
        start = time.perf_counter()
        step()
        times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
    return float(np.median(times))


def sync_times(comm, elements, reps):
    n = comm.Get_size()
    g = np.random.default_rng(comm.Get_rank()).standard_normal(elements).astype(np.float32)
    onebit = mpi_impl.OneBitAllreduce(comm=comm)

    def ring():
        mpi_impl.allreduce(g, algo="ring", comm=comm, out=g)
        np.multiply(g, 1.0 / n, out=g)

    def one_bit():
        g[...] = onebit(g)
        np.multiply(g, 1.0 / n, out=g)

    ring(), one_bit()                               # warm-up: buffers and plans
    return median_time(comm, ring, reps), median_time(comm, one_bit, reps)


def main(argv=None):
    p = argparse.ArgumentParser(prog="course.pingpong")
    p.add_argument("--elements", type=int, default=0, help="also time syncs of this many float32 values")
    p.add_argument("--reps", type=int, default=20)
    args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    with mpi_impl.abort_on_error():
        one_way = []
        for nbytes in SIZES:
            t = ping_pong(comm, nbytes, args.reps)
            one_way.append(comm.allreduce(t if np.isfinite(t) else 0.0, op=MPI.MAX))
        out = {"ranks": comm.Get_size(), "sizes_bytes": list(SIZES), "one_way_s": one_way}
        if args.elements > 0 and comm.Get_size() > 1:
            out["ring_s"], out["onebit_s"] = sync_times(comm, args.elements, max(3, args.reps // 2))
    if comm.Get_rank() == 0:
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
