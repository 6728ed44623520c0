"""python -m course doctor | calibrate | compare | grade: see course/README.md.

A mistake in the arguments ends in one line and exit code 2; Ctrl-C in one line ("python -m
course: interrupted") and exit code 130; every file is checked before any work and written
under a temporary name, renamed when complete (dpsim.files).
"""
import os
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")          # before NumPy: one BLAS thread per rank
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def this_package_only():
    """Under `python -m course`, sys.path[0] is the current folder, so a folder there named
    course/ (or dpsim/, mpi_impl/) is imported instead of the installed package: `course/grade/`
    beside the submissions would be `course.grade`. This file knows where its package is: the
    current folder leaves sys.path unless it is where the package lives, and `course` is
    imported again from here if it came from there. A planted course/__main__.py runs instead
    of this file and cannot be stopped from here (course/README.md, Known limits)."""
    here = os.path.dirname(os.path.realpath(__file__))
    home = os.path.dirname(here)

    def ours():
        paths = list(getattr(sys.modules.get("course"), "__path__", []))
        return [os.path.realpath(p) for p in paths] == [here]

    if sys.path and os.path.realpath(sys.path[0] or ".") == os.path.realpath(os.getcwd()) \
            and os.path.realpath(os.getcwd()) != home:
        del sys.path[0]
    if not ours():
        for name in [m for m in sys.modules if m == "course" or m.startswith("course.")]:
            del sys.modules[name]
        import course  # noqa: F401
    if not ours():
        print(f"python -m course: error: the course package comes from {sys.modules['course'].__path__} "
              f"instead of {here}; run from another folder", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    this_package_only()

import argparse  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402


MAX_RANKS = 256        # a typo guard: more ranks than this on one machine is not a study


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (`python -m course: error: ...`) and exit code 2."""

    def error(self, message):
        from dpsim.files import printable                 # one line, whatever was typed
        print(f"python -m course: error: {printable(message, 2000)}", file=sys.stderr)
        sys.exit(2)


class ShowDefaults(argparse.HelpFormatter):
    """--help shows every option's default, except where there is none to show (None, False)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default not in (None, False, argparse.SUPPRESS) and action.option_strings \
                and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def at_least(low, high=None):
    """An argparse type: a whole number in [low, high] (high: a typo guard)."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"at most {high:,}, got {value:,}")
        return value
    return parse


def rank_counts(text):
    counts = [at_least(1)(x) for x in text.split(",") if x.strip()]
    if not counts:
        raise argparse.ArgumentTypeError("give rank counts such as 1,2,4")
    if max(counts) > MAX_RANKS:
        raise argparse.ArgumentTypeError(f"{max(counts)} ranks on one machine: at most {MAX_RANKS}")
    return sorted(set(counts))


def names(allowed, what):
    def parse(text):
        from dpsim.vocabulary import unknown_algorithm
        chosen = [x.strip() for x in text.split(",") if x.strip()]
        for name in chosen:
            if name not in allowed:
                message = unknown_algorithm(name, allowed) if what == "algorithm" else \
                    f"unknown {what} {name!r}; choose one of: {', '.join(allowed)}"
                raise argparse.ArgumentTypeError(message)
        if not chosen:
            raise argparse.ArgumentTypeError(f"give at least one of: {', '.join(allowed)}")
        return list(dict.fromkeys(chosen))
    return parse


def parser():
    """The command line: calibrate, compare and grade, each with its options."""
    from course.compare import COMPRESSIONS, SYNCS
    from course.measurements import ROUNDS
    p = Parser(prog="python -m course")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    command = dict(formatter_class=ShowDefaults)
    doc = sub.add_parser("doctor", help="check this machine before a class: one line per check", **command)
    doc.add_argument("--gpu", action="store_true", help="also check that CuPy sees a GPU")
    cal = sub.add_parser("calibrate", help="measure this machine, write a dpsim scenario fragment", **command)
    cal.add_argument("-o", "--output", default="profile.toml",
                     help="the profile to write (a dpsim scenario fragment); its measurements go beside it")
    cal.add_argument("--rounds", type=at_least(2, 200), default=ROUNDS,
                     help="rounds of the probes: each figure's range is over them, and dpsim's band takes them "
                          "as samples (19: a 90%% prediction interval where runs are like rounds, dpsim/bands.py)")
    cal.add_argument("--accept-noisy", action="store_true",
                     help="write the profile even where figures' rounds disagree (a busy machine): "
                          "otherwise calibrate ends with exit code 3 and writes nothing")
    cmp_ = sub.add_parser("compare", help="run mpi_impl.train and dpsim side by side", **command)
    cmp_.add_argument("--ranks", type=rank_counts, default="1,2,4", help="rank counts, comma-separated")
    cmp_.add_argument("--sync", type=names(SYNCS, "algorithm"), default="ring,ps",
                      help=f"algorithms, comma-separated, from: {','.join(SYNCS)}")
    cmp_.add_argument("--compress", type=names(COMPRESSIONS, "compression"), default="none,1bit",
                      help=f"compressions, comma-separated, from: {','.join(COMPRESSIONS)}")
    cmp_.add_argument("--profile", help="from calibrate (none: calibrate now into a temporary folder)")
    cmp_.add_argument("--samples", type=at_least(1, 10_000_000), default=8192, help="training samples per epoch (all ranks)")
    cmp_.add_argument("--epochs", type=at_least(2, 1000), default=3, help="the first epoch is not measured")
    cmp_.add_argument("--repeats", type=at_least(1, 100), default=3,
                      help="runs of each configuration, in rounds; a row shows their median")
    cmp_.add_argument("--probe", action="store_true",
                      help="probe the parts of a step right before each run, to say which part moved "
                           "where a row is off (the prediction always comes from the profile)")
    # --no-probe is the default; the flag stays for scripts that pass it
    cmp_.add_argument("--no-probe", dest="probe", action="store_false", help=argparse.SUPPRESS)
    cmp_.add_argument("--json", help="write the rows as JSON")
    cmp_.add_argument("--plot", help="PNG: predicted against measured iteration time, and speed-up against ranks")
    grd = sub.add_parser("grade", help="check every exercise of a folder of submitted notebooks, write a CSV",
                         **command)
    grd.add_argument("folder", help="the submitted notebooks (every .ipynb below it)")
    grd.add_argument("-o", "--output", default="grades.csv", help="the CSV to write, one row per exercise")
    for sp in (cal, cmp_):
        sp.add_argument("--model", choices=("mlp", "cnn"), default="mlp", help="the network trained")
        sp.add_argument("--width", type=at_least(1, 16384), default=1024, help="units per hidden layer (mlp)")
        sp.add_argument("--depth", type=at_least(1, 64), default=2, help="hidden layers (mlp)")
        sp.add_argument("--batch", type=at_least(1, 65536), default=64, help="samples per rank per step")
        sp.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: CuPy arrays, ranks sharing the GPUs (mpi_impl.train --device gpu)")
    return p


def main(argv=None):
    try:
        return run(argv)
    except KeyboardInterrupt:              # Ctrl-C: files are written whole or not at all
        print("python -m course: interrupted", file=sys.stderr)
        return 130


def run(argv=None):
    p = parser()
    args = p.parse_args(argv)
    if args.command == "doctor":
        from course import doctor
        return doctor.doctor(gpu=args.gpu)
    if args.command == "grade":
        return grade(p, args)
    problem = check_before_work(args)
    if problem:
        p.error(problem)
    if args.device == "gpu":
        from mpi_impl.device import missing_cupy
        if missing_cupy(args.device):
            p.error(missing_cupy(args.device))
    if args.command == "calibrate":
        return calibrate(args)
    return compare(args)


def say(text):
    print(text, file=sys.stderr)


def net_of(args):
    return dict(model=args.model, width=args.width, depth=args.depth, batch=args.batch, device=args.device)


NOISY = 3          # calibrate's exit code when the machine was too busy to measure


def noisy_exit(error):
    """The one line of course.spread.Noisy, and calibrate's exit code for it."""
    print(f"python -m course: calibrate: {error}", file=sys.stderr)
    return NOISY


def calibrate(args):
    from course import calibrate as calibration, spread
    try:
        prof, m = calibration.calibrate(args.output, **net_of(args), progress=say, accept_noisy=args.accept_noisy,
                                        rounds=args.rounds)
    except spread.Noisy as error:
        return noisy_exit(error)
    print(calibration.summary(prof, m))
    print(f"wrote {shown(args.output)} (dpsim scenario fragment) and {shown(calibration.sidecar(args.output))}")
    return 0


def compare(args):
    """The profile (--profile, or a calibration now into a temporary folder), then compare;
    the table, and the JSON and plot where asked."""
    from course import calibrate as calibration, compare as comparison
    if args.profile:
        prof, _ = comparison.load_profile(args.profile)      # checked by check_before_work
    else:
        say("no --profile: calibrating first")
        from course import spread
        scratch = tempfile.mkdtemp(prefix="course-")                # never a fixed name in /tmp
        try:
            prof, _ = calibration.calibrate(str(Path(scratch) / "profile.toml"), **net_of(args), progress=say)
        except spread.Noisy as error:
            return noisy_exit(error)
    result = comparison.compare(prof, args.ranks, args.sync, args.compress, samples=args.samples,
                                epochs=args.epochs, repeats=args.repeats, probe=args.probe,
                                progress=say, **net_of(args))
    print(comparison.table(result))
    if args.json:
        from dpsim.files import write_text
        write_text(args.json, json.dumps(result, indent=1), "--json")
    if args.plot:
        comparison.plot(result, args.plot)
        print(f"plot: {shown(args.plot)}")
    return 0


def shown(path):
    from dpsim.files import printable
    return printable(path, 200)


def grade(p, args):
    from dpsim.errors import ScenarioError
    from dpsim.files import check_output_path
    from course import grade as grading
    if not Path(args.folder).is_dir():
        p.error(f"{shown(args.folder)}: not a folder of notebooks")
    try:
        check_output_path(args.output, "-o")
    except ScenarioError as error:
        p.error(str(error))
    if not any(Path(args.folder).rglob("*.ipynb")):
        print(f"python -m course: warning: no notebooks (*.ipynb) under {shown(args.folder)}: nothing graded",
              file=sys.stderr)
        return 1
    scores = grading.grade(args.folder, args.output)
    for name, (right, total) in scores.items():
        print(f"{shown(name)}: {right} of {total} exercises correct")
    exercises = sum(total for _, total in scores.values())
    print(f"checked {len(scores)} notebooks under {shown(args.folder)} ({exercises} rows: lectures 01-05 "
          f"re-checked, lecture 06 from each notebook's output); every row in {shown(args.output)}")
    return 0


def check_before_work(args):
    """Everything that can be wrong with the arguments, found before anything is measured: one
    line, or None. Output paths can be written as given; a profile reads, is a scenario dpsim
    accepts, and was calibrated for this model; the samples fill a step of the most ranks."""
    from dpsim.errors import ScenarioError
    from dpsim.files import FIGURES, check_distinct, check_output_path
    from course import calibrate, compare
    try:
        if args.command == "calibrate":
            check_output_path(args.output, "-o")
            check_output_path(calibrate.sidecar(args.output), "-o's sidecar")
            check_distinct({"-o": args.output, "-o's sidecar": str(calibrate.sidecar(args.output))})
            return None
        if args.json:
            check_output_path(args.json, "--json")
        if args.plot:
            check_output_path(args.plot, "--plot", FIGURES)
        check_distinct({"--json": args.json, "--plot": args.plot, "--profile": args.profile})
    except ScenarioError as error:
        return str(error)
    step = max(args.ranks) * args.batch
    if args.samples < step:
        return f"--samples {args.samples} is less than one step of {max(args.ranks)} ranks x --batch {args.batch}"
    if args.profile:
        return (compare.profile_problem(args.profile, dict(model=args.model, width=args.width, depth=args.depth))
                or compare.powersgd_problem(args.profile, args.compress))
    return None


if __name__ == "__main__":
    sys.exit(main())
