"""Time the parts of a training step on N ranks at once, as the machine is right now.

    mpiexec -n N python -m course.probe [--model mlp --width 1024 --depth 2 --batch 64]
                                        [--syncs ring,1bit] [--steps 16] [--device cpu|gpu]
                                        [--codec VALUES,VALUES] [--lowrank R]

`calibrate` runs it on 1, 2 and 4 ranks (on 2 cores), every rank count once a round
(course/measurements.py); `compare --probe` right before a run, to say which part moved when
a prediction is off (it never feeds the prediction).

Every rank repeats the parts of mpi_impl.train's step, each timed on its own:

  load       take a batch of the synthetic data (mpi_impl's Loader, no decode work)
  compute    forward + loss + backward of the mpi_impl model on that batch
  sync       the all-reduce (sum) of the gradient, one block of steps per algorithm of
             --syncs (ring, ps, ..., 1bit), one block after the other; none: no sync
  scale      the division of the sum by N
  update     the momentum SGD step

The steps keep the rhythm of training (every rank computes, then waits in a sync whose MPI
calls spin while they wait, which takes cores away from ranks that share them), so the
compute time of a rank says how fast it computes when N ranks share the machine. A sync's
time is what a rank spends in it, as mpi_impl.train counts it: the wait for the slowest rank
included (fit.straggler_s takes that out), a mean over ranks. The time inside the 1-bit
codec (OneBitAllreduce.codec_s) is kept as well.

Ranks then pair up (0-1, 2-3, ...) and all pairs ping-pong at once; per message size the
one-way time is the best, the median and the mean of a few round trips (the mean holds the
rare long waits of busy-polling ranks for the scheduler). With --codec, one OneBitAllreduce
of each size is timed: the call and its codec. With --lowrank R, PowerSGD's products and
orthogonalisation at rank R on the model's weight matrices, every rank at once
(course/lowrank.py): the slowest rank's seconds per pass.

Rank 0 prints one JSON object: {"ranks", "blocks": {algorithm (or "none"): {"steps_s": {part:
[[per step] per rank]} for load, compute, scale, update, "sync_steps_s": [per step, mean of
ranks], "codec_steps_s": [per step; 1bit only]}}, "sizes_bytes", "one_way_s",
"one_way_median_s", "one_way_mean_s": [per size, the slowest pair's], "codec_values",
"onebit_s", "codec_s": [per size], "lowrank": [R, seconds] or null}.
"""
import json
import time

import numpy as np

import mpi_impl                 # first: it sets up MPI as mpi_impl.train has it (single_copy.py)
from mpi4py import MPI
from mpi_impl import data, nets, pick_device
from mpi_impl.errors import Parser, algorithm_names, usage_errors
from mpi_impl.loader import Loader
from mpi_impl.sgd import MomentumSGD

SIZES = (8, 1024, 65536, 1 << 20, 4 << 20)
PARTS = ("load", "compute", "scale", "update")


def ping_pong(comm, nbytes, reps):
    """(best, median, mean) one-way time of `reps` round trips of nbytes between this rank and its
    partner, after one untimed round trip (first touches of the buffer). The best is the
    link's own cost; the median also holds what ranks that outnumber the cores typically
    wait to be scheduled."""
    rank = comm.Get_rank()
    partner = rank ^ 1
    buf = np.zeros(max(nbytes, 1), np.uint8)
    times = []
    if partner >= comm.Get_size():                 # odd rank count: the last rank sits out
        for _ in range(reps + 1):
            comm.Barrier()
        return 0.0, 0.0, 0.0
    for k in range(reps + 1):
        comm.Barrier()
        start = time.perf_counter()
        if rank % 2 == 0:
            comm.Send([buf, nbytes, MPI.BYTE], partner)
            comm.Recv([buf, nbytes, MPI.BYTE], partner)
        else:
            comm.Recv([buf, nbytes, MPI.BYTE], partner)
            comm.Send([buf, nbytes, MPI.BYTE], partner)
        if k:
            times.append((time.perf_counter() - start) / 2)
    return min(times), float(np.median(times)), float(np.mean(times))


def one_way_times(comm, reps):
    """Per size in SIZES, the slowest pair's best, median and mean one-way time: three lists."""
    best, median, mean = [], [], []
    for nbytes in SIZES:
        b, med, m = ping_pong(comm, nbytes, reps)
        best.append(comm.allreduce(b, op=MPI.MAX))
        median.append(comm.allreduce(med, op=MPI.MAX))
        mean.append(comm.allreduce(m, op=MPI.MAX))
    return best, median, mean


def codec_times(comm, values, reps=5, device="cpu"):
    """For a buffer of each size in `values`: the mean seconds of one OneBitAllreduce call, and
    of its codec (encode/decode) within it, the slowest rank's; two lists."""
    dev = pick_device(device, comm)
    calls, codec = [], []
    for v in values:
        onebit = mpi_impl.OneBitAllreduce(comm=comm)
        g = dev.xp.asarray(np.random.default_rng(comm.Get_rank()).standard_normal(v).astype(np.float32))
        onebit(g)                                   # warm-up: buffers allocated once
        comm.Barrier()
        before, start = onebit.codec_s, dev.clock()
        for _ in range(reps):
            onebit(g)
        spent = dev.clock() - start
        calls.append(comm.allreduce(spent / reps, op=MPI.MAX))
        codec.append(comm.allreduce((onebit.codec_s - before) / reps, op=MPI.MAX))
    return calls, codec


def lowrank_times(comm, args):
    """[rank, the slowest rank's seconds of one pass of PowerSGD's products and orthogonalisation
    over the model's weight matrices] (course/lowrank.py), every rank at once."""
    from course.lowrank import lowrank_seconds
    from course.measurements import weight_matrices
    dev = pick_device(args.device, comm)
    net = nets.build(args.model, *_data_shape(), args.width, args.depth, xp=dev.xp)
    seconds = lowrank_seconds(weight_matrices(net) or [], args.lowrank, dev.xp, dev.clock, barrier=comm.Barrier)
    return [args.lowrank, comm.allreduce(seconds, op=MPI.MAX)]


def _data_shape():
    train, _ = data.load("synthetic", samples=16)
    return train.shape, train.classes


def steps(comm, model, width, depth, batch, syncs, count, device="cpu"):
    """A block of `count` steps (after one warm-up step) for each algorithm in syncs, one
    block after the other: a sync sets the rhythm of the steps around it (how staggered the
    ranks leave it and arrive at the next one), so each is timed in its own rhythm.
    Returns this rank's {block: {part: [seconds per step]}}, parts as in PARTS plus "sync"
    and "codec" (time inside the 1-bit codec). One rank: one block "none", without a sync.
    The same code runs on NumPy and on CuPy arrays (--device)."""
    n = comm.Get_size()
    dev = pick_device(device, comm)       # as mpi_impl.train picks: GPU local rank mod GPUs
    xp, clock = dev.xp, dev.clock
    train, _ = data.load("synthetic", samples=max(1024, batch))
    net = nets.build(model, train.shape, train.classes, width, depth, xp=xp)
    loader = Loader(train, batch)
    indices = np.arange(batch)
    opt = MomentumSGD(net.params, net.grads, 0.01, 0.9)
    g = net.grads
    onebit = mpi_impl.OneBitAllreduce(comm=comm)
    blocks = {}
    for algo in (list(syncs) if n > 1 and syncs else ["none"]):
        times = blocks[algo] = {part: [] for part in (*PARTS, "sync", "codec")}
        for i in range(count + 1):
            t0 = clock()
            x, y = loader.make_batch(indices)
            x, y = xp.asarray(x), xp.asarray(y)
            t1 = clock()
            _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
            net.backward(dlogits)
            t2 = clock()
            before = onebit.codec_s
            if algo == "1bit":
                g[...] = onebit(g)
            elif algo != "none":
                mpi_impl.allreduce(g, algo=algo, comm=comm, out=g)
            t3 = clock()
            xp.multiply(g, 1.0 / n, out=g)
            t4 = clock()
            opt.step()
            t5 = clock()
            if i == 0:                                  # warm-up: buffers, plans, the rhythm
                continue
            for part, dt in (("load", t1 - t0), ("compute", t2 - t1), ("sync", t3 - t2),
                             ("scale", t4 - t3), ("update", t5 - t4),
                             ("codec", onebit.codec_s - before)):
                times[part].append(dt)
    return blocks


def main(argv=None):
    p = Parser(prog="course.probe")
    p.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    names = algorithm_names((*mpi_impl.ALGORITHMS, "1bit"))
    p.add_argument("--syncs", default="ring", type=lambda text: names(text) if text.strip() else [],
                   help="comma-separated: ring, recursive-doubling, halving-doubling, ps, sharded-ps, mpi, "
                        "1bit; empty: compute alone")
    p.add_argument("--steps", type=int, default=16, help="timed steps per algorithm")
    p.add_argument("--reps", type=int, default=10, help="ping-pong round trips per size")
    p.add_argument("--codec", default="", help="comma-separated buffer sizes (values) at which to time "
                                               "the 1-bit codec")
    p.add_argument("--lowrank", type=int, default=0, help="PowerSGD's rank at which to time its products "
                                                           "(course/lowrank.py); 0: not timed")
    with usage_errors("course.probe"):
        args = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    n = comm.Get_size()
    syncs = args.syncs
    codec_values = [int(v) for v in args.codec.split(",") if v]
    with mpi_impl.abort_on_error():
        every = comm.gather(steps(comm, args.model, args.width, args.depth, args.batch, syncs, args.steps,
                                  args.device))
        one_way, one_way_median, one_way_mean = one_way_times(comm, args.reps) if n > 1 else ([], [], [])
        onebit_s, codec_s = codec_times(comm, codec_values, device=args.device) if codec_values else ([], [])
        lowrank = lowrank_times(comm, args) if args.lowrank > 0 else None
    if comm.Get_rank() != 0:
        return
    blocks = {}
    for algo in every[0]:
        mean_of_ranks = lambda part: np.mean([r[algo][part] for r in every], axis=0).tolist()
        blocks[algo] = {"steps_s": {part: [r[algo][part] for r in every] for part in PARTS},
                        # what a rank waits in the sync, the wait for the slowest rank included
                        "sync_steps_s": mean_of_ranks("sync") if algo != "none" else [],
                        "codec_steps_s": mean_of_ranks("codec") if algo == "1bit" else []}
    print(json.dumps({"ranks": n, "blocks": blocks, "sizes_bytes": list(SIZES), "one_way_s": one_way,
                      "one_way_median_s": one_way_median,
                      "one_way_mean_s": one_way_mean, "codec_values": codec_values, "onebit_s": onebit_s,
                      "codec_s": codec_s, "lowrank": lowrank}),
          flush=True)


if __name__ == "__main__":
    main()
