"""How fast the simulator runs: `python -m dpsim.bench [--cases 8,64,256,1024] [--json]`.

Fixed cases: ring all-reduce of ResNet-50's gradients (model preset "resnet50", 25 MiB buckets,
4 buckets) on 8, 64, 256 and 1,024 V100 GPUs, 8 per node: NVLink 2 inside a node ("nvlink2",
a full mesh in dpsim.cluster), 100 Gb/s InfiniBand EDR between nodes ("ib-edr"), PCIe 3 to
the host ("pcie3"). Ten measured iterations, no warm-up, synthetic data.

What is measured, for each case, is Engine(sc).run() (what simulate() spends most of its time in):
  wall_s, cpu_s  seconds of wall-clock time, and of CPU time of this process (steadier on a
                 shared machine); build_cpu_s: CPU seconds of Engine(sc) before it
  events         SimPy events processed: Engine.env.step is wrapped with a counter, so
                 every event taken off SimPy's queue (timeouts, transfer arrivals, process
                 resumptions, conditions) counts once
  ns_per_gpu_step  CPU time / (GPUs x ring steps x buckets x iterations), ring steps = 2(n-1):
                 flat or falling as n grows means the cost grows no faster than GPUs x steps
  path           "fast" when rounds or steps were replayed (dpsim.replay), else "detailed"
With `--detailed-max N` (default 64) cases up to N GPUs also run with Engine(sc, fast=False),
to show the fast path's speed-up and that both give the same iteration time.
Wall times depend on the machine and its load; compare the two paths within one run.

`--strategies all` (or a list of STRATEGIES' names) runs the same cases with each way of
synchronising instead, one child process per run, stopped once it has used `--limit` CPU
seconds (default 60; building the engine included) and reported as "> 60 s": a table of CPU
seconds and peak memory (the child's maximum resident set size, ru_maxrss, in MiB) per
strategy and GPU count, and for cases up to `--detailed-max` GPUs the detailed path's CPU
seconds beside the fast path's, their ratio and the iteration times' difference (the detailed
path's cost: dpsim.maxmin, dpsim.network).
"""
import argparse
import json
import math
import queue
import resource
import time

from . import workload
from .config import load_scenario
from .engine import Engine

GPUS_PER_NODE = 8
# Every way of synchronising, as overrides of the ring case.
STRATEGIES = {
    "ring": {}, "recursive-doubling": {"sync.strategy": "recursive-doubling"},
    "halving-doubling": {"sync.strategy": "halving-doubling"}, "mpi": {"sync.strategy": "mpi"},
    "ps": {"sync.strategy": "ps"}, "ps-cpu": {"sync.strategy": "ps", "sync.ps_location": "cpu"},
    "sharded-ps": {"sync.strategy": "sharded-ps"}, "hierarchical": {"sync.strategy": "hierarchical"},
    "dataparallel": {"sync.strategy": "dataparallel"},
    "1bit": {"sync.compression": "1bit"}, "fp16": {"sync.compression": "fp16"},
    "double-tree": {"sync.strategy": "double-tree"}, "torus2d": {"sync.strategy": "torus2d"},
    "byteps": {"sync.strategy": "byteps"}, "zero1": {"sync.strategy": "zero1"}, "zero2": {"sync.strategy": "zero2"},
    "zero3": {"sync.strategy": "zero3"}, "powersgd": {"sync.compression": "powersgd"},
    "topk": {"sync.compression": "topk"},
}


def scenario(gpus: int):
    nodes, per_node = max(1, gpus // GPUS_PER_NODE), min(gpus, GPUS_PER_NODE)
    return load_scenario({
        "name": f"bench-ring-{gpus}",
        "cluster": {"nodes": nodes, "gpus_per_node": per_node, "gpu": "v100",
                    "intra": "nvlink2", "inter": "ib-edr", "host_link": "pcie3"},
        "model": {"preset": "resnet50"},
        "training": {"iterations": 10, "warmup_iterations": 0},
        "sync": {"strategy": "ring", "bucket_mib": 25},
    })


def timed_run(sc, fast: bool) -> dict:
    """Run the engine once; wall time, events processed, which path, the simulated result, and
    the CPU seconds of building the engine (its cluster: 983,040 channels at 131,072 GPUs)."""
    build = time.process_time()
    eng = Engine(sc, fast=fast)
    build = time.process_time() - build
    events = 0
    step = eng.env.step

    def counted_step():
        nonlocal events
        events += 1
        step()
    eng.env.step = counted_step          # Environment.run calls self.step(): the instance's wins
    start, cpu = time.perf_counter(), time.process_time()
    out = eng.run()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {"path": eng.path, "wall_s": wall, "cpu_s": cpu, "events": events, "events_per_s": events / wall,
            "iteration_time_s": out.iteration_time_s, "build_cpu_s": build}


def bench(gpus: int, detailed_max: int = 64) -> dict:
    sc = scenario(gpus)
    n, buckets = sc.gpus, len(workload.build(sc).buckets)
    gpu_steps = n * 2 * (n - 1) * buckets * sc.training.iterations
    row = {"gpus": n, "nodes": sc.cluster.nodes, "gpu_steps": gpu_steps, **timed_run(sc, fast=True)}
    row["ns_per_gpu_step"] = row["cpu_s"] / gpu_steps * 1e9
    if n <= detailed_max:
        d = timed_run(sc, fast=False)
        row["detailed"] = {**d, "ns_per_gpu_step": d["cpu_s"] / gpu_steps * 1e9}
        row["speedup"] = d["cpu_s"] / row["cpu_s"]
        row["relative_difference"] = abs(row["iteration_time_s"] / d["iteration_time_s"] - 1)
    return row


def _one(gpus, strategy, fast, out, limit_s):
    """The child: at most limit_s CPU seconds (RLIMIT_CPU, whole seconds; SIGXCPU ends it)."""
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = math.ceil(limit_s)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    try:
        sc = scenario(gpus).with_overrides(STRATEGIES[strategy])
        row = timed_run(sc, fast=fast)
        out.put({**row, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})
    except Exception as e:                       # a strategy that does not apply to this cluster
        out.put({"error": str(e).splitlines()[0]})


WALL_PER_CPU_S = 10     # a child on a busy machine may take this many wall seconds per CPU second


def bench_strategy(gpus: int, strategy: str, limit_s: float, fast: bool = True) -> dict:
    """One run in a child process, stopped once it has used limit_s CPU seconds (or after
    WALL_PER_CPU_S times that of wall-clock time)."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_one, args=(gpus, strategy, fast, out, limit_s), daemon=True)
    child.start()
    child.join(limit_s * WALL_PER_CPU_S)
    if child.is_alive():
        child.terminate()
        child.join()
    try:
        return {"gpus": gpus, "strategy": strategy, "timed_out": False, **out.get(timeout=5)}
    except queue.Empty:                          # stopped at its CPU limit, or at the wall-clock one
        return {"gpus": gpus, "strategy": strategy, "timed_out": True, "limit_s": limit_s}


def with_detailed(row, limit_s):
    """Add the detailed path's run of the same case (fast=False): its CPU time, the fast path's
    speed-up over it, and how far apart the two iteration times are."""
    if row["timed_out"] or "error" in row:
        return row
    d = bench_strategy(row["gpus"], row["strategy"], limit_s, fast=False)
    row["detailed"] = d
    if not d["timed_out"] and "error" not in d:
        row["speedup"] = d["cpu_s"] / row["cpu_s"]
        row["relative_difference"] = abs(row["iteration_time_s"] / d["iteration_time_s"] - 1)
    return row


def print_strategies(rows, cases):
    print("each strategy, ResNet-50, 25 MiB buckets, 10 iterations; V100, 8 per node, nvlink2 inside, "
          "ib-edr between nodes; CPU seconds of one run, its peak memory (MiB, the child's ru_maxrss), "
          "path (fast = rounds replayed)")
    print(f"{'strategy':>20} " + " ".join(f"{g:>22,} GPUs" for g in cases))
    for name in dict.fromkeys(r["strategy"] for r in rows):
        cells = []
        for g in cases:
            r = next(x for x in rows if x["strategy"] == name and x["gpus"] == g)
            cells.append(f"> {r['limit_s']:.0f} s" if r["timed_out"] else "error" if "error" in r
                         else f"{r['cpu_s']:.2f} s {r['max_rss_mib']:,.0f} MiB {r['path']}")
        print(f"{name:>20} " + " ".join(f"{c:>27}" for c in cells))
    for r in rows:
        if "error" in r:
            print(f"  {r['strategy']} on {r['gpus']} GPUs: {r['error']}")
    checked = [r for r in rows if "detailed" in r]
    if checked:
        print("detailed path (every transfer simulated) on the same cases: its CPU seconds, the fast path's, "
              "detailed / fast, iteration times' relative difference")
        for r in checked:
            d = r["detailed"]
            if d["timed_out"]:
                print(f"{r['strategy']:>20} {r['gpus']:>6,} GPUs  > {d['limit_s']:.0f} s")
            else:
                print(f"{r['strategy']:>20} {r['gpus']:>6,} GPUs  {d['cpu_s']:>8.2f} s  {r['cpu_s']:>6.2f} s"
                      f"  {r['speedup']:>7.0f}x  {r['relative_difference']:.1e}")


def print_table(rows):
    print("ring all-reduce, ResNet-50, 25 MiB buckets, 10 iterations; V100, 8 per node, "
          "nvlink2 inside, ib-edr (100 Gb/s) between nodes")
    print("(cpu: CPU seconds of this process; ns/GPU-step = cpu / (GPUs x 2(n-1) ring steps x buckets x "
          "iterations); speed-up and differ: detailed path against fast)")
    print(f"{'GPUs':>5} {'nodes':>5} {'path':>8} {'iteration':>11} {'wall':>8} {'cpu':>8} {'events':>9} "
          f"{'events/s':>9} {'ns/GPU-step':>11} | {'det. cpu':>9} {'ns/GPU-step':>11} {'speed-up':>8} {'differ':>8}")
    for r in rows:
        line = (f"{r['gpus']:>5} {r['nodes']:>5} {r['path']:>8} {r['iteration_time_s'] * 1e3:>8.3f} ms "
                f"{r['wall_s']:>6.2f} s {r['cpu_s']:>6.2f} s {r['events']:>9,} {r['events_per_s']:>9,.0f} "
                f"{r['ns_per_gpu_step']:>11.1f} |")
        if "detailed" in r:
            d = r["detailed"]
            line += (f" {d['cpu_s']:>7.2f} s {d['ns_per_gpu_step']:>11.1f} {r['speedup']:>7.0f}x"
                     f" {r['relative_difference']:>8.1e}")
        else:
            line += f" {'(not run)':>9}"
        print(line)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m dpsim.bench", description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="8,64,256,1024", help="GPU counts, comma-separated (multiples of 8 above 8)")
    p.add_argument("--detailed-max", type=int, default=64, help="also run the detailed path up to this many GPUs")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--strategies", help=f"'all' or some of: {', '.join(STRATEGIES)}")
    p.add_argument("--limit", type=float, default=60.0, help="with --strategies: CPU seconds before a run is stopped")
    args = p.parse_args(argv)
    cases = [int(g) for g in args.cases.split(",")]
    if args.strategies:
        names = list(STRATEGIES) if args.strategies == "all" else args.strategies.split(",")
        unknown = [n for n in names if n not in STRATEGIES]
        if unknown:
            p.error(f"unknown strategy {unknown[0]!r}; choose from {', '.join(STRATEGIES)} or all")
        rows = [bench_strategy(g, n, args.limit) for n in names for g in cases]
        rows = [with_detailed(r, args.limit) if r["gpus"] <= args.detailed_max else r for r in rows]
        print(json.dumps(rows, indent=2)) if args.json else print_strategies(rows, cases)
        return
    rows = [bench(int(g), args.detailed_max) for g in cases]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
