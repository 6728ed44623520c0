"""The figures lecture 06, course/README.md, course/TEACHING.md, mpi_impl/README.md and README.md's
"What the simulator assumes" state that the code computes (a default, a threshold, a count, a
constant, a package's version), computed again (issue 31). Their measured and quoted figures:
test_doc_measured.py; README.md's stories, verdict and printouts: test_readme_figures.py."""

import re

import pytest

import dpsim

from doc_text import ROOT, WORDS, flat, lecture, says


# ---------------------------------------------------------------- lecture 06

def test_lecture6_what_it_runs():
    from course.__main__ import parser
    from course.compare import THRESHOLD, model_params
    cmp = parser().parse_args(["compare"])
    code = lecture(6, "code")
    says(code, '"--width", 1024, "--depth", 2, "--batch-per-rank", 64, "--samples", 2048, "--epochs", 2',
         'train = [mpiexec, "-n", 2,')
    says(lecture(6), f"The model is `mpi_impl`'s MLP (width {cmp.width}, two hidden layers, "
                     f"{model_params('mlp', cmp.width, cmp.depth) / 1e6:.1f} M parameters) at batch {cmp.batch} per rank, "
                     "the defaults of both `course` commands",
         f"{2048:,} synthetic samples per epoch ({2048 // (2 * 64)} steps of 2 x 64), two epochs",
         "three times (`--repeats`)", f"differ by more than {THRESHOLD:.0%}", "the grey band is ±10%")
    says(flat((ROOT / "course" / "compare_plot.py").read_text()), "[0, 0.9 * top], [0, 1.1 * top]")
    assert (cmp.depth, cmp.repeats) == (2, 3)


def lecture6_training_runs():
    """The mpi_impl.train runs lecture 06 starts: its own loops', and compare's (configurations x --repeats)."""
    from course.__main__ import parser
    from course.compare import configurations
    code = lecture(6, "code")
    loops = [re.search(pattern, code)[1].split(",") for pattern in
             (r"for attempt in \(([\d, ]+)\): run\(\*train", r"for n in \(([\d, ]+)\): run\(mpiexec")]
    ranks, syncs, compress = re.search(r'"compare", .*?"--ranks", "([\d,]+)", "--sync", "([\w,-]+)", '
                                       r'"--compress", "([\w,]+)"', code).groups()
    assert "--repeats" not in code
    runs = configurations([int(r) for r in ranks.split(",")], syncs.split(","), compress.split(","))
    return sum(map(len, loops)) + len(runs) * parser().parse_args(["compare"]).repeats


# ---------------------------------------------------------------- course/TEACHING.md, course/README.md

TEACHING = flat((ROOT / "course" / "TEACHING.md").read_text())
COURSE = flat((ROOT / "course" / "README.md").read_text())
MPI_README = flat((ROOT / "mpi_impl" / "README.md").read_text())


def test_teaching_figures():
    from importlib.metadata import version
    says(TEACHING, f"06 | 75 s (it measures: a calibration, {lecture6_training_runs()} training runs)",
         f"pip download mpich=={version('mpich')}", f"`mpi4py=={version('mpi4py')}`",
         "mpiexec -n 2 python -m mpi_impl.bench --algo ring --sizes 1M", "time a ring all-reduce of 1 MiB")


def test_course_readme_defaults_and_thresholds():
    from course.__main__ import parser
    from course.compare import SPREAD_WARNING, THRESHOLD, configurations
    from course.measurements import BATCHES, ROUNDS, copy_gbs, matmul_flops, step_times
    from course.probe import SIZES
    from dpsim.compute import UPDATE_BYTES_PER_PARAM
    import inspect
    a = parser().parse_args(["compare"])
    default = lambda f, name: inspect.signature(f).parameters[name].default
    n = default(matmul_flops, "n")
    says(COURSE, f"(default: MLP, width {a.width}, depth {a.depth}, batch {a.batch} per rank)",
         f"`--samples` (per epoch, default {a.samples})", f"`--epochs` (default {a.epochs}, the first not counted)",
         f"`--repeats` (runs of each configuration, default {a.repeats})", f"off by more than {THRESHOLD:.0%}",
         f"spread more than {SPREAD_WARNING:.0%} gets a WARNING", f"The probes run {ROUNDS} rounds (`course.measurements.ROUNDS`, `--rounds`)",
         f"| FLOP/s of a {n}x{n} matmul |", f"at batch {', '.join(map(str, BATCHES))}, timed inside",
         f"{default(step_times, 'reps')} steps each", f"= {UPDATE_BYTES_PER_PARAM} bytes x params / t",
         f"ping-pong between 2 ranks, {SIZES[0]} B .. {SIZES[-1] >> 20} MiB", f"a {default(copy_gbs, 'mb')} MB copy")
    # "Measured on this machine": its command's configurations, each run --repeats times (not given: the default)
    ranks, syncs, compress = re.search(r"--profile pI.toml --ranks ([\d,]+) \\ --sync ([\w,-]+) --compress ([\w,]+) --json",
                                       COURSE).groups()
    count = len(configurations([int(r) for r in ranks.split(",")], syncs.split(","), compress.split(",")))
    says(COURSE, f"{count} configurations, {a.repeats} runs each")
    says(TEACHING, f"spread more than {SPREAD_WARNING:.0%})")


# ---------------------------------------------------------------- mpi_impl/README.md

def test_mpi_impl_readme_stall_timeout():
    from mpi_impl.train_options import build_parser
    says(MPI_README, f"with `--stall-timeout S` ({build_parser().parse_args([]).stall_timeout:g} s; 0 = off)")


def test_mpi_impl_readme_constants():
    from importlib.metadata import version
    from dpsim.vocabulary import ONEBIT_BLOCK, SEGMENT_BYTES
    from mpi_impl import mpi_builtin
    says(MPI_README, f"one scale per block of `dpsim.vocabulary.ONEBIT_BLOCK` = {ONEBIT_BLOCK} values",
         f"`mpi_impl.SEGMENT_BYTES` = {SEGMENT_BYTES >> 20} MiB", f"MPICH {version('mpich')} (the `mpich` wheel)",
         "when the message is <= 8 bytes or count < q",
         f"2(p-1)/p m (1/32 + 1/{ONEBIT_BLOCK}) beta")
    assert [mpi_builtin.choice(count, size, 4) for count, size in ((2, 4), (3, 8), (4, 4))] == \
        ["recursive-doubling", "recursive-doubling", "halving-doubling"]     # 8 bytes; count < q; neither


# ---------------------------------------------------------------- README.md, beyond test_readme_figures

def test_readme_assumptions_and_limits():
    from dpsim import limits, workload
    from dpsim.compute import UPDATE_BYTES_PER_PARAM
    from dpsim.hardware import EFFICIENCY
    from dpsim.strategies.onebit import BYTES_PER_VALUE
    readme = flat((ROOT / "README.md").read_text())
    e = {kind: f"{value:g}" for kind, (value, _) in EFFICIENCY.items()}
    says(readme, f"The update is memory-bound: {UPDATE_BYTES_PER_PARAM} bytes per parameter",
         f"(PCIe {e['pcie']}, NVLink {e['nvlink']}, InfiniBand {e['infiniband']}, RoCE {e['roce']}, TCP {e['ethernet']})",
         f"with {BYTES_PER_VALUE / 4:.3f} of FP32's bytes", "Backward is two thirds of the compute",
         f"at most {limits.GPUS:,} GPUs, {limits.GPUS_PER_NODE:,} per node, {limits.LAYERS:,} layers and iterations, "
         f"{limits.TRACE_SPANS:,} trace spans, {limits.WORKERS:,} loader workers, {limits.SWEEP_RUNS:,} rows in a sweep",
         f"`--jobs` up to {limits.JOBS:,}", f"a regular file of at most {limits.SCENARIO_BYTES >> 20} MiB")
    assert limits.ITERATIONS == limits.LAYERS and e["nvswitch"] == e["nvlink"]
    w = workload.build(dpsim.load_scenario("cntk-1bit-k80", {"compute.overhead_ms": 0}))
    assert w.backward_s / (w.forward_s + w.backward_s) == pytest.approx(2 / 3)
