"""`dpsim sweep`: one scenario at several GPU counts."""
import json
import sys

from . import cli, config
from .errors import ScenarioError
from .simulate import sweep


def parse_gpus(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ScenarioError("--gpus", f"expected comma-separated integers like 1,2,4,8, got {text!r}")
    if not counts:
        raise ScenarioError("--gpus", "a sweep needs at least one GPU count, e.g. 1,2,4,8")
    return counts


def print_sweep(results, out=sys.stdout):
    print(f"{'GPUs':>5} {'iteration ms':>13} {'samples/s':>12} {'speed-up':>9} {'efficiency':>11} "
          f"{'exposed comm ms':>16}", file=out)
    for r in results:
        print(f"{r.gpus:5d} {r.iteration_time_s * 1e3:13.3f} {r.throughput_samples_per_s:12,.0f} "
              f"{r.speedup:9.2f} {r.scaling_efficiency:11.0%} {r.breakdown_s['exposed_comm'] * 1e3:16.3f}", file=out)


def cmd_sweep(args):
    sc = config.load_scenario(args.scenario, cli.parse_sets(args.set))
    results = sweep(sc, parse_gpus(args.gpus))
    if args.json:
        json.dump([r.to_dict() for r in results], sys.stdout, indent=2)
        print()
    else:
        print(cli.describe(sc))
        print_sweep(results)


def add_arguments(sw):
    sw.add_argument("--gpus", required=True, help="comma-separated GPU counts, e.g. 1,2,4,8")
    sw.add_argument("--json", action="store_true", help="print the results as JSON")
