"""The `dpsim` command: list, show, run, sweep, validate.

    dpsim list
    dpsim show cntk-1bit-k80
    dpsim run cntk-1bit-k80 --set sync.strategy=ps --json
    dpsim run cntk-1bit-k80 --trace trace.json --plot breakdown.png
    dpsim sweep d2l-ps-vs-ring --gpus 1,2,4,8
    dpsim validate --case v100_4node_1xedr --verbose
A mistake in the input ends in one line naming the key and what is allowed, and exit code 2;
Ctrl-C in one line, "dpsim: interrupted", and exit code 130. Every file is checked before any
work and written under a temporary name, renamed when complete (dpsim.files).
"""
import argparse
import json
import pathlib
import sys

from . import bands, cli_sweep, config, diagnosis, hardware, models
from .errors import ScenarioError
from .files import FIGURES, check_distinct, check_output_path, printable
from .report import print_result
from .simulation import simulate


def cmd_list(args):
    print("Scenarios (dpsim show NAME for details):")
    for name in config.builtin_names():
        sc = config.load_scenario(name)
        print(f"  {name:28s} {sc.description.strip().splitlines()[0] if sc.description else ''}")
    print("\nGPUs (per GPU: peak FP32 / FP16 TFLOP/s, memory GB/s, memory GB; source):")
    for g in hardware.GPUS.values():
        print(f"  {g.name:9s} {g.fp32_tflops:7.2f} {g.fp16_tflops:8.1f} {g.mem_bw_gbs:7.0f} {g.memory_gb:6.0f}   {g.source}")
    print("\nLinks (kind, GB/s per direction nominal and achievable, latency us; source):")
    for l in hardware.LINKS.values():
        print(f"  {l.name:10s} {l.kind:10s} {l.bandwidth_gbs:7.3g} {l.achievable_gbs:7.3g} {l.latency_us:6.1f}   {l.source}")
    print("\nNodes (cluster.node: GPUs, inside, host link, GPUs per PCIe switch, NICs; source):")
    for name, n in hardware.NODES.items():
        print(f"  {name:11s} {n['gpus_per_node']:2d} x {n['gpu']:5s} {n['intra']:10s} {n['host_link']:6s} "
              f"{n['gpus_per_pcie_switch']} {n['nics_per_node']} x {n['inter']:7s} {n['source']}")
    print("\nModels (parameters, GFLOPs per sample forward+backward; source):")
    for m in models.MODELS.values():
        print(f"  {m.name:24s} {m.params / 1e6:8.2f} M {m.flops_per_sample / 1e9:9.2f}   {m.source}")


def cmd_show(args):
    from .scenario_file import to_toml
    print(to_toml(config.load_scenario(args.scenario, config.parse_sets(args.set))), end="")


def timeline_path(plot_path: str) -> str:
    """Where `--plot` puts the Gantt chart when `--trace` is given too: beside the breakdown."""
    path = pathlib.Path(plot_path)
    return str(path.with_name(f"{path.stem}-timeline{path.suffix}"))


def check_run_outputs(args):
    """--trace, --plot and (with both) the timeline beside the plot: each writable, all distinct."""
    timeline = timeline_path(args.plot) if args.plot and args.trace else None
    if args.trace:
        check_output_path(args.trace, "--trace")
    if args.plot:
        check_output_path(args.plot, "--plot", FIGURES)
    if timeline:
        check_output_path(timeline, "--plot's timeline", FIGURES)
    check_distinct({"--trace": args.trace, "--plot": args.plot, "--plot's timeline": timeline})


def cmd_run(args):
    check_run_outputs(args)
    sc, ranged = config.load_ranged(args.scenario, config.parse_sets(args.set))
    show_progress = args.progress or sys.stderr.isatty()
    res = simulate(sc, trace=bool(args.trace), progress=cli_sweep.progress_bar(unit="iterations") if show_progress else None)
    verdict = diagnosis.diagnose(sc, res)
    ranged, band = run_band(ranged, res)
    written = []
    if args.trace:
        res.trace.write_chrome(args.trace)
        written.append(f"timeline written to {printable(args.trace)} (open it in ui.perfetto.dev or chrome://tracing)")
    if args.plot:
        from . import plot          # matplotlib only when a figure is asked for
        label = f"{res.gpus} GPUs, {sc.sync.strategy}"
        runs, labels = [res], [label]
        if res.uncompressed:
            runs, labels = [res.uncompressed, res], [f"{label}, no compression", f"{label}, {sc.sync.compression}"]
        plot.breakdown(runs, args.plot, labels, title=f"{sc.name}: where an iteration's time goes")
        written.append(f"breakdown plotted in {printable(args.plot)}")
        if args.trace:
            path = timeline_path(args.plot)
            plot.gantt(res.trace, path, title=f"{sc.name}: the first two measured iterations",
                       iterations=(res.trace.warmup_iterations, res.trace.warmup_iterations + 2))
            written.append(f"timeline of two iterations plotted in {printable(path)}")
    if args.json:
        json.dump({**res.to_dict(), "diagnosis": verdict.to_dict(), **bands.json_keys(ranged, band)}, sys.stdout,
                  indent=2, allow_nan=False)
        print()
    else:
        print_result(sc, res)
        if band:
            print(f"  {bands.describe(ranged, band)}:")
            print("\n".join(bands.run_lines(res, band)))
        for note in config.notes(sc):
            print(f"  note: {note}")
        print("  diagnosis:")
        for line in verdict.text.splitlines():
            print(f"    {line}")
        for line in written:
            print(f"  {line}")


def run_band(ranged, res):
    """(dpsim.bands.Ranged, its band) where the scenario has ranges; (None, None) where not."""
    if not ranged.ranges:
        return None, None
    return ranged, bands.propagate(ranged, lambda d: [simulate(d)], [res])


def cmd_validate(args):
    from . import validate          # reads published.toml only when asked
    cases = validate.load_cases()
    rows = validate.validate(args.case, cases)
    if args.json:
        out = {"cases": [r.to_dict() for r in rows], "summary": validate.summary(rows)}
        json.dump(out, sys.stdout, indent=2, allow_nan=False)
        print()
        return
    print("\n".join(validate.table(rows)))
    print(validate.summary(rows))
    if args.verbose:
        by_name = {c["name"]: c for c in cases}
        print("\nsources; what dpsim runs; what it assumes where the source is silent:")
        for r in rows:
            case = by_name[r.name]
            print(f"  {r.name}: {r.source}\n    dpsim: {validate.describe(case)}")
            if "assumes" in case["dpsim"]:
                print(f"    assumes: {case['dpsim']['assumes']}")
    else:
        print("sources and assumptions: dpsim validate --verbose")


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line, whatever was typed (`dpsim: error: ...`), exit code 2."""

    def error(self, message):
        print(f"dpsim: error: {printable(message, 300)} ({self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dpsim", description="Simulate synchronous data-parallel training.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    sub.add_parser("list", help="built-in scenarios, GPUs, links and models, with sources")

    def scenario_command(name, helptext):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("scenario", help="built-in scenario name or path to a .toml file")
        q.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a key, e.g. --set sync.strategy=ps (repeatable)")
        return q

    scenario_command("show", "print a scenario with every default filled in, as a TOML file "
                     "that dpsim run reads (dpsim show NAME > my.toml)")
    run = scenario_command("run", "simulate a scenario")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--progress", action="store_true",
                     help="draw a progress bar of the iterations on stderr even when it is not a terminal")
    run.add_argument("--trace", metavar="FILE", help="write the timeline as Chrome trace JSON (ui.perfetto.dev)")
    run.add_argument("--plot", metavar="FILE", help="draw the breakdown as stacked bars (PNG, PDF or SVG); "
                     "with --trace also the timeline of two iterations, in FILE-timeline")
    cli_sweep.add_arguments(scenario_command("sweep", "simulate a scenario at several GPU counts"))
    val = sub.add_parser("validate", help="dpsim's predictions beside published measurements (dpsim/published.toml)")
    val.add_argument("--case", nargs="+", action="extend", metavar="NAME", help="only these cases (repeatable)")
    val.add_argument("--json", action="store_true", help="print the rows and the summary as JSON")
    val.add_argument("--verbose", action="store_true", help="list each case's source and dpsim's assumptions")
    return p


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:
        print("dpsim: interrupted", file=sys.stderr)
        return 130
    handler = {"list": cmd_list, "show": cmd_show, "run": cmd_run, "sweep": cli_sweep.cmd_sweep,
               "validate": cmd_validate}[args.command]
    try:
        handler(args)
    except ScenarioError as e:
        print(f"dpsim: error: {printable(e, 2000)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as e:                  # stdout on a full disk, say
        print(f"dpsim: error: cannot write the output: {printable(e.strerror or e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:             # Ctrl-C: files are written whole or not at all
        cli_sweep.end_progress_line()
        print("dpsim: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
