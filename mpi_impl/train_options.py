"""mpi_impl.train's command line: its options, and every check that can refuse a run
before it trains.

A bad command line is one line on stderr and exit code 2 on every rank (errors.py:
:class:`UsageError`, raised alike on every rank because every rank parses the same
arguments).  Checked here: each option's own value (numbers are finite and in range),
combinations (--resume needs --checkpoint, --sync nccl needs --device gpu, --device gpu
needs CuPy), output paths that could not be written at the end, and, once the data is
loaded (:func:`load_data`), that every rank gets at least one batch.
"""
import argparse
import math

from dpsim.vocabulary import MIB, SHARDED

import mpi_impl
from mpi_impl import data, nets
from mpi_impl.powersgd import largest_rank
from mpi_impl.device import missing_cupy
from mpi_impl.errors import Parser, UsageError, algorithm_name
from mpi_impl.files import output_problem, printable, same_file

PROG = "mpi_impl.train"

#: Limits on what a run may allocate, checked before anything is (mpi_impl/README.md, "Limits"):
LIMITS = {"--samples": 1_000_000,       # synthetic: 1.25M images of 64 float32 = 320 MB per rank
          "--width": 16_384, "--depth": 1_024, "--batch-per-rank": 65_536,
          "--loader-workers": 64, "--prefetch": 64, "--epochs": 100_000}
#: numbers (parameters + activations of one batch) a replica may hold: 2**28 = 1 GiB of float32
MODEL_NUMBERS_LIMIT = 1 << 28


def _number(kind, low, inclusive):
    """An argparse type: a `kind` number >= low (> low unless `inclusive`); never NaN or
    infinite, each refused in one line."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < low or (value == low and not inclusive):
            bound = f">= {low}" if inclusive else f"> {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
        return value
    return parse


positive_int = _number(int, 0, inclusive=False)
count = _number(int, 0, inclusive=True)
positive_float = _number(float, 0, inclusive=False)
nonnegative_float = _number(float, 0, inclusive=True)


def ratio(text):
    """An argparse type: a fraction in (0, 1]."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {text}")
    return value


#: the --sync choices: the all-reduce algorithms, then ZeRO's stages (dpsim.vocabulary.SHARDED)
SYNCS = mpi_impl.ALGORITHMS + tuple(SHARDED)
COMPRESSIONS = ("none", "1bit", "powersgd", "topk")


def build_parser():
    p = Parser(prog=PROG, description="Synchronous data-parallel SGD (and 1-bit SGD) under mpiexec.",
               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    m = p.add_argument_group("model")
    m.add_argument("--model", choices=("mlp", "cnn"), default="mlp", help="the network (mpi_impl/nets.py)")
    m.add_argument("--width", type=positive_int, default=64,
                   help="mlp: hidden units per layer; cnn: channels of the first conv")
    m.add_argument("--depth", type=positive_int, default=1, help="mlp: hidden layers")
    m.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="parameters and gradients")
    d = p.add_argument_group("data")
    d.add_argument("--data", choices=data.SOURCES, default="synthetic", help="the training set (mpi_impl/data.py)")
    d.add_argument("--data-dir", help="cifar10: folder with data_batch_*.bin")
    d.add_argument("--samples", type=positive_int,
                   help="training samples (synthetic: how many to make, default 16384; others: a cap)")
    d.add_argument("--loader-workers", type=count, default=0,
                   help="background loader threads; 0 loads inside the training loop")
    d.add_argument("--prefetch", type=positive_int, default=2, help="batches queued per loader worker")
    d.add_argument("--decode-ms", type=nonnegative_float, default=0.0,
                   help="busy CPU work per sample, standing in for JPEG decoding")
    t = p.add_argument_group("training")
    t.add_argument("--batch-per-rank", type=positive_int, default=32, help="samples per rank per step")
    t.add_argument("--epochs", type=positive_int, default=5, help="the first is not counted in the timings")
    t.add_argument("--lr", type=positive_float, default=0.05, help="learning rate")
    t.add_argument("--momentum", type=nonnegative_float, default=0.9, help="SGD momentum")
    t.add_argument("--seed", type=count, default=0, help="weights, data and shuffling")
    t.add_argument("--device", choices=("cpu", "gpu"), default="cpu", help="gpu: CuPy, a GPU per local rank")
    t.add_argument("--stall-timeout", type=nonnegative_float, default=120.0, metavar="SECONDS",
                   help="end the whole job if a rank makes no progress for this long (some rank "
                        "stalled or dead: the others would wait in the all-reduce forever); 0 = never")
    sync_options(p.add_argument_group("gradient synchronisation"))
    o = p.add_argument_group("output")
    o.add_argument("--json", metavar="FILE", help="write metrics and time breakdown as JSON")
    o.add_argument("--trace", metavar="FILE", help="write a Chrome trace (one process per rank)")
    o.add_argument("--checkpoint", metavar="DIR",
                   help="save a checkpoint here after every epoch (two generations per rank; "
                        "a run stops, exit 1, rather than save NaN or inf weights)")
    o.add_argument("--resume", action="store_true",
                   help="continue from the newest epoch that every rank has in --checkpoint DIR")
    return p


def sync_options(s):
    """The options of how the gradient is synchronised (or sharded, or compressed)."""
    s.add_argument("--sync", choices=SYNCS, type=algorithm_name(SYNCS), default="ring",
                   help="the all-reduce algorithm, or zero1/zero2/zero3: ZeRO's sharded "
                        "data parallelism (mpi_impl/README.md)")
    s.add_argument("--compress", choices=COMPRESSIONS, default="none",
                   help="1bit: 1-bit SGD; powersgd: rank-r factors; topk: the largest values "
                        "(each with error feedback)")
    s.add_argument("--powersgd-rank", type=positive_int, default=1,
                   help="powersgd: the rank r of each matrix's factors, 1 as PyTorch's hook and dpsim (capped per matrix at "
                        "min(rows, cols))")
    s.add_argument("--topk-ratio", type=ratio, default=0.01,
                   help="topk: the fraction of each bucket's values a rank sends, in (0, 1]")
    s.add_argument("--no-error-feedback", action="store_true",
                   help="compression: drop the error instead of carrying it to the next step")
    s.add_argument("--warmup-samples", type=count, default=0,
                   help="compression: full-precision sync until this many samples are trained "
                        "globally (CNTK's -a)")
    s.add_argument("--overlap", action="store_true",
                   help="all-reduce gradient buckets while backward still runs: MPI's "
                        "Iallreduce for --sync mpi on the CPU, a communication thread running "
                        "the blocking algorithm otherwise (see mpi_impl/sgd.py)")
    s.add_argument("--bucket-mib", type=nonnegative_float, default=25.0,
                   help="bucket size for --overlap in MiB (2**20 bytes); 0 = one bucket")
    s.add_argument("--bucket-mb", action=Renamed, new="--bucket-mib",
                   why=f"bucket sizes are in MiB ({MIB} bytes) here and in dpsim")


class Renamed(argparse.Action):
    """An option that has a new name: using it is a one-line usage error naming the new one."""

    def __init__(self, option_strings, dest, new, why, **kwargs):
        super().__init__(option_strings, argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS,
                         help=argparse.SUPPRESS)
        self.new, self.why = new, why

    def __call__(self, parser, namespace, values, option_string=None):
        raise UsageError(f"{option_string} is now {self.new}: {self.why}")


def parse_args(argv, size):
    """Parse and check everything that can be checked without data or other ranks."""
    args = build_parser().parse_args(argv)
    for option, limit in LIMITS.items():
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None and value > limit:
            raise UsageError(f"{option} {value} is above the limit {limit:,} (mpi_impl/README.md, "
                             f"\"Limits\")")
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint DIR")
    check_output_paths(args)
    if args.sync == "nccl" and args.device != "gpu":
        cpu = ", ".join(a for a in mpi_impl.ALGORITHMS if a != "nccl")
        raise UsageError(f"--sync nccl runs on NVIDIA GPUs: add --device gpu, or pick --sync from {cpu}")
    problem = missing_cupy(args.device)
    if problem:
        raise UsageError(problem)
    check_sharding_and_compression(args, size)
    return args


def check_sharding_and_compression(args, size):
    """ZeRO and the new compressors: the combinations that are not built, refused; ZeRO on one
    rank has nothing to shard over (as dpsim refuses ZeRO on one GPU)."""
    if args.sync in SHARDED and size < 2:
        raise UsageError(f"--sync {args.sync} shards the model over the ranks, and this job has one; "
                         f"run it with mpiexec -n 2 or more, or use --sync ring")
    if args.sync in SHARDED and args.compress != "none":
        raise UsageError(f"--sync {args.sync} reduce-scatters full-precision gradients; "
                         f"--compress {args.compress} works with the all-reduce algorithms "
                         f"({', '.join(mpi_impl.ALGORITHMS)})")
    if args.sync == "zero3" and args.overlap:
        raise UsageError("--sync zero3 reduce-scatters each layer's gradient as backward "
                         "produces it already; --overlap is for zero1, zero2 and the all-reduces")
    if args.checkpoint and (args.sync in SHARDED or args.compress in ("powersgd", "topk")):
        what = f"--sync {args.sync}" if args.sync in SHARDED else f"--compress {args.compress}"
        raise UsageError(f"--checkpoint does not save the state of {what} (shards, "
                         f"residuals); train without --checkpoint")


def check_output_paths(args, probe=False):
    """Refuse, before any training, output paths that could not be written at the end:
    --json and --trace must name a file, not a folder, in a folder that exists, and not the
    same file; --checkpoint must not be a file.  With `probe`, each must also be a place
    where a file can be created (files.output_problem: not /proc, not a read-only file
    system); :func:`check_outputs_together` does that on the ranks that will write."""
    outputs = [(f"--{o}", getattr(args, o)) for o in ("json", "trace") if getattr(args, o)]
    for option, value in outputs:
        problem = output_problem(option, value, probe=probe)
        if problem:
            raise UsageError(problem)
    if len(outputs) == 2 and same_file(outputs[0][1], outputs[1][1]):
        raise UsageError(f"--json and --trace name the same file {printable(args.json)}; "
                         f"give each its own")
    if args.checkpoint:
        problem = output_problem("--checkpoint", args.checkpoint, folder=True, probe=probe)
        if problem:
            raise UsageError(problem)


def check_outputs_together(args, comm):
    """Collective: try every output place on the ranks that write there (--json and
    --trace: rank 0; --checkpoint: every rank) and raise the same UsageError on every rank
    if any rank cannot write, before epoch 1."""
    problem = None
    try:
        if comm.Get_rank() == 0:
            check_output_paths(args, probe=True)
        elif args.checkpoint:
            problem = output_problem("--checkpoint", args.checkpoint, folder=True)
    except UsageError as error:
        problem = str(error)
    problems = [p for p in comm.allgather(problem) if p]
    if problems:
        raise UsageError(problems[0])


def load_data(args, size):
    """(train, test) data sets, after checking that every rank gets at least one batch."""
    try:
        train_set, test_set = data.load(args.data, samples=args.samples, data_dir=args.data_dir,
                                        seed=args.seed)
    except data.DataError as error:
        raise UsageError(str(error)) from None
    n = len(train_set)
    if size > n:
        raise UsageError(f"{size} ranks but --data {args.data} has only {n} training samples; "
                         f"use at most {n} ranks")
    per_rank = n // size
    if args.batch_per_rank > per_rank:
        raise UsageError(f"--batch-per-rank {args.batch_per_rank} is larger than each rank's shard "
                         f"({n} training samples / {size} ranks = {per_rank}); use at most {per_rank}")
    if args.model == "cnn" and (train_set.shape[1] % 4 or train_set.shape[2] % 4):
        raise UsageError(f"--model cnn needs image sides divisible by 4, got {train_set.shape}")
    numbers = model_numbers(args, train_set.shape, train_set.classes)
    if numbers > MODEL_NUMBERS_LIMIT:
        raise UsageError(f"--model {args.model} --width {args.width} --depth {args.depth} "
                         f"--batch-per-rank {args.batch_per_rank}: about {numbers:,} numbers per "
                         f"rank (parameters + one batch's activations), above the limit "
                         f"{MODEL_NUMBERS_LIMIT:,} (1 GiB of float32); make one of them smaller")
    if args.compress == "powersgd":
        check_powersgd_rank(args, train_set)
    return train_set, test_set


def model_numbers(args, shape, classes):
    """About how many numbers a replica holds: parameters (and as many gradients and
    momenta), plus one batch's activations (nets.py's MLP and CNN layer by layer)."""
    w, inputs = args.width, math.prod(shape)
    if args.model == "mlp":
        params = inputs * w + (args.depth - 1) * w * w + w * classes
        activations = inputs + 2 * args.depth * w + classes
    else:
        c, h, wd = shape
        params = 9 * c * w + 9 * w * 2 * w + 2 * w * (h // 4) * (wd // 4) * classes
        activations = inputs + 2 * w * h * wd + w * h * wd + classes
    return 3 * params + args.batch_per_rank * activations


def check_powersgd_rank(args, train_set):
    """--powersgd-rank above every matrix's min(rows, cols) would compress nothing: refused.
    (Every model shards for ZeRO: chunk_bounds cuts any length into p chunks, empty ones
    when a layer has fewer values than there are ranks, so nothing is checked for it.)"""
    net = nets.build(args.model, train_set.shape, train_set.classes, args.width, args.depth)
    shapes = [shape for layer in net.layers for shape in layer.param_shapes().values()]
    limit = largest_rank(shapes)
    if args.powersgd_rank > limit:
        raise UsageError(f"--powersgd-rank {args.powersgd_rank} is above every matrix of this "
                         f"--model {args.model} (the largest min(rows, cols) is {limit}); "
                         f"use 1 to {limit}")
