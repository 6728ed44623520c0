"""python -m course calibrate | compare: see course/README.md."""
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")          # before NumPy: one BLAS thread per rank
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402


def ints(text):
    return [int(x) for x in text.split(",") if x]


def words(text):
    return [x for x in text.split(",") if x]


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m course")
    sub = p.add_subparsers(dest="command", required=True)
    cal = sub.add_parser("calibrate", help="measure this machine, write a dpsim scenario fragment")
    cal.add_argument("-o", "--output", default="profile.toml")
    cmp_ = sub.add_parser("compare", help="run mpi_impl.train and dpsim side by side")
    cmp_.add_argument("--ranks", type=ints, default=[1, 2, 4])
    cmp_.add_argument("--sync", type=words, default=["ring", "ps"])
    cmp_.add_argument("--compress", type=words, default=["none", "1bit"])
    cmp_.add_argument("--profile", help="from calibrate (default: calibrate now into a temporary file)")
    cmp_.add_argument("--samples", type=int, default=8192, help="training samples per epoch (all ranks)")
    cmp_.add_argument("--epochs", type=int, default=3, help="the first epoch is not measured")
    cmp_.add_argument("--repeats", type=int, default=3,
                      help="runs of each configuration, in rounds (default 3); a row shows their median")
    cmp_.add_argument("--probe", action="store_true",
                      help="probe the parts of a step right before each run, to say which part moved "
                           "where a row is off (the prediction always comes from the profile)")
    cmp_.add_argument("--no-probe", dest="probe", action="store_false", help=argparse.SUPPRESS)  # the default now
    cmp_.add_argument("--json", help="write the rows as JSON")
    cmp_.add_argument("--plot", help="PNG: predicted against measured iteration time, and speed-up against ranks")
    for sp in (cal, cmp_):
        sp.add_argument("--model", choices=("mlp", "cnn"), default="mlp")
        sp.add_argument("--width", type=int, default=1024)
        sp.add_argument("--depth", type=int, default=2)
        sp.add_argument("--batch", type=int, default=64, help="samples per rank per step")
        sp.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help="gpu: CuPy arrays, ranks sharing the GPUs (mpi_impl.train --device gpu)")
    args = p.parse_args(argv)
    if args.command == "compare" and args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.device == "gpu":
        try:
            import cupy  # noqa: F401
        except ImportError:
            print("error: --device gpu needs CuPy: pip install 'dpsim[gpu]' (or use --device cpu)", file=sys.stderr)
            return 2

    from course import calibrate, compare
    net = dict(model=args.model, width=args.width, depth=args.depth, batch=args.batch)
    device = dict(device=args.device)
    if args.command == "calibrate":
        prof, m = calibrate.calibrate(args.output, **net, **device, progress=lambda text: print(text, file=sys.stderr))
        print(calibrate.summary(prof, m))
        print(f"wrote {args.output} (dpsim scenario fragment) and {calibrate.sidecar(args.output)}")
        return 0
    if args.profile:
        prof, measured = compare.load_profile(args.profile)
    else:
        print("no --profile: calibrating first", file=sys.stderr)
        scratch = tempfile.mkdtemp(prefix="course-")                # never a fixed name in /tmp
        prof, measured = calibrate.calibrate(str(Path(scratch) / "profile.toml"), **net, **device,
                                             progress=lambda text: print(text, file=sys.stderr))
    want = {"name": args.model, "width": args.width, "depth": args.depth}
    if measured and {k: measured["model"].get(k) for k in want} != want:
        print(f"error: the profile was calibrated for {measured['model']}, not {want}; "
              f"run calibrate with the same --model/--width/--depth", file=sys.stderr)
        return 2
    result = compare.compare(prof, args.ranks, args.sync, args.compress, samples=args.samples,
                             epochs=args.epochs, repeats=args.repeats, probe=args.probe,
                             progress=lambda s: print(s, file=sys.stderr), **net, **device)
    print(compare.table(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    if args.plot:
        compare.plot(result, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
