"""simulate(), sweep() and sweep_grid(): run a scenario, compare it with itself on one GPU.

sweep_grid() runs many scenarios (GPU counts x varied keys), each distinct one once, serially, in
local processes (jobs) or on the workers of `mpiexec -n N python -m mpi4py.futures`.
"""
import dataclasses
import itertools
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from .config import Scenario, load_scenario
from .engine import Engine
from .errors import ScenarioError
from .results import Result
from .trace import Trace


def single_gpu(sc: Scenario) -> Scenario:
    """The same scenario on one GPU: the baseline of speed-up."""
    return sc.with_overrides({"cluster.nodes": 1, "cluster.gpus_per_node": 1, "sync.strategy": "none",
                              "cluster.gpu_speed": sc.cluster.gpu_speed[:1], "sync.update_location": "gpu"})


def with_gpus(sc: Scenario, gpus: int) -> Scenario:
    """The scenario on `gpus` GPUs: fill one node first, then add whole nodes."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ScenarioError("gpus", f"GPU counts must be integers >= 1, got {gpus!r}")
    if gpus == 1:
        return single_gpu(sc)
    per_node = sc.cluster.gpus_per_node
    if gpus <= per_node:
        nodes, per_node = 1, gpus
    elif gpus % per_node == 0:
        nodes = gpus // per_node
    else:
        raise ScenarioError("gpus", f"{gpus} GPUs do not fill whole nodes of {per_node}; "
                            f"use a multiple of {per_node} or at most {per_node}")
    strategy = sc.sync.strategy if sc.sync.strategy != "none" else "ring"
    return sc.with_overrides({"cluster.nodes": nodes, "cluster.gpus_per_node": per_node,
                              "sync.strategy": strategy, "cluster.gpu_speed": sc.cluster.gpu_speed[:gpus]})


def resolved(sc: Scenario) -> dict:
    """The scenario with every preset it names spelled out, so each number can be traced."""
    model = sc.model_spec()
    out = sc.to_dict()
    out["resolved"] = {
        "gpu": dataclasses.asdict(sc.gpu_spec()),
        **{k: dataclasses.asdict(sc.link_spec(k)) for k in ("intra", "inter", "host_link")},
        "model": {"name": model.name, "params": model.params, "flops_per_sample": model.flops_per_sample,
                  "layers": len(model.layers), "source": model.source},
    }
    return out


def simulate(scenario, overrides: dict | None = None, trace: bool = False, baseline: Result | None = None) -> Result:
    """Simulate a scenario (name, path, dict or Scenario). `baseline`: a one-GPU result to reuse."""
    sc = load_scenario(scenario, overrides)
    record = Trace(gpus_per_node=sc.cluster.gpus_per_node) if trace else None
    run = Engine(sc, record).run()
    sync_s = Engine(sc).sync_alone()
    if sc.gpus == 1:
        base = None
    elif baseline is not None:
        base = baseline.throughput_samples_per_s
    else:
        base = simulate(single_gpu(sc)).throughput_samples_per_s
    plain = None
    if compressed(sc):
        plain = Engine(uncompressed_twin(sc)).run()
    return make_result(sc, run, sync_s, base, plain, record)


def compressed(sc: Scenario) -> bool:
    return sc.sync.compression != "none" and sc.gpus > 1


def uncompressed_twin(sc: Scenario) -> Scenario:
    """The same scenario without compression: what a compressed result is compared with."""
    return sc.with_overrides({"sync.compression": "none"})


def make_result(sc, run, sync_s, base_throughput, plain, record=None) -> Result:
    """A Result from the engine's raw numbers. base_throughput None: sc is its own baseline."""
    own = throughput(sc, run)
    speedup = own / (own if base_throughput is None else base_throughput)
    return Result(run["iteration_time_s"], own, speedup, speedup / sc.gpus, sync_s,
                  run["bytes_sent_per_gpu"], run["breakdown_s"], resolved(sc), sc.gpus, record, plain)


def throughput(sc: Scenario, run: dict) -> float:
    return sc.gpus * sc.training.batch_per_gpu / run["iteration_time_s"]


def sweep(scenario, gpus, overrides: dict | None = None) -> list[Result]:
    """The scenario at each GPU count, with one shared one-GPU baseline."""
    return [res for _, res in sweep_grid(scenario, gpus, overrides=overrides)]


# ---------------------------------------------------------------- grids of scenarios

def sweep_grid(scenario, gpus, vary: dict | None = None, overrides: dict | None = None, jobs: int = 1,
         progress=None) -> list[tuple[dict, Result]]:
    """The scenario at every GPU count, for every combination of the varied keys.

        rows = sweep_grid("d2l-ps-vs-ring", [1, 2, 4], vary={"sync.strategy": ["ps", "ring"]})
        for settings, res in rows: print(settings["sync.strategy"], res.gpus, res.speedup)

    Rows come combination by combination (the first varied key changes slowest, as in nested
    loops), each with the GPU counts in the order given; `settings` holds that row's varied
    values. Every scenario is checked before any runs. Each distinct scenario is simulated once:
    combinations that agree on one GPU share their baseline (a strategy does not change a
    one-GPU run, a batch size does), and a compressed run reuses its uncompressed twin's run.
    jobs: 1 runs here, N > 1 in N local processes, 0 in one per core; under
    `mpiexec -n N python -m mpi4py.futures` the other N-1 MPI processes run them instead.
    progress(done, total) is called as simulations finish.
    """
    sc = load_scenario(scenario, overrides)
    counts = list(gpus)
    if not counts:
        raise ScenarioError("gpus", "a sweep needs at least one GPU count, e.g. 1,2,4,8")
    vary = {key: list(values) for key, values in (vary or {}).items()}
    for key, values in vary.items():
        if key == "cluster.nodes":
            raise ScenarioError(key, "the GPU counts decide the nodes; vary cluster.gpus_per_node or the GPU counts")
        if not values:
            raise ScenarioError(key, "nothing to vary over: give at least one value")
    rows = []                                   # (settings, scenario, its one-GPU baseline)
    for values in itertools.product(*vary.values()):
        settings = dict(zip(vary, values))
        combo = sc.with_overrides(settings)
        rows += [(settings, with_gpus(combo, g), single_gpu(combo)) for g in counts]

    todo = {}                      # each distinct scenario once: repr -> [scenario, also time one sync alone?]

    def need(s, full=True):
        entry = todo.setdefault(repr(s), [s, False])
        entry[1] = entry[1] or full

    for _, s, base in rows:
        need(s)
        need(base)
        if compressed(s):
            need(uncompressed_twin(s), full=False)

    done = dict(zip(todo, run_all([tuple(task) for task in todo.values()], jobs, progress)))
    out = []
    for settings, s, base in rows:
        run, sync_s = done[repr(s)]
        base_throughput = None if s.gpus == 1 else throughput(base, done[repr(base)][0])
        plain = done[repr(uncompressed_twin(s))][0] if compressed(s) else None
        out.append((settings, make_result(s, run, sync_s, base_throughput, plain)))
    return out


def measure(sc: Scenario, full: bool = True):
    """One simulation, in whichever process runs it: the engine's run, and (full) one sync alone."""
    return Engine(sc).run(), (Engine(sc).sync_alone() if full else None)


def run_all(tasks: list, jobs: int = 1, progress=None) -> list:
    """measure(*task) for every task, results in the order of the tasks."""
    report = progress or (lambda done, total: None)
    report(0, len(tasks))
    pool = executor(jobs, len(tasks))
    if pool is None:
        results = []
        for task in tasks:
            results.append(measure(*task))
            report(len(results), len(tasks))
        return results
    with pool:
        futures = [pool.submit(measure, *task) for task in tasks]
        for finished, _ in enumerate(as_completed(futures), 1):
            report(finished, len(tasks))
        return [f.result() for f in futures]


def executor(jobs: int, tasks: int):
    """Where simulations run: None (here), the mpi4py.futures workers, or local processes."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise ScenarioError("jobs", f"expected 0 (one process per core), 1 (no extra processes) or more, got {jobs!r}")
    mpi_pool = mpi_futures_pool()
    if mpi_pool is not None:
        return mpi_pool
    if jobs == 0:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = min(jobs, tasks)
    return ProcessPoolExecutor(workers) if workers > 1 else None


def mpi_futures_pool():
    """An MPIPoolExecutor when run as `mpiexec -n N python -m mpi4py.futures -m dpsim ...`, else None.

    That launcher imports mpi4py.futures, runs our program on rank 0 and makes the other ranks
    its workers; dpsim itself never imports mpi4py, so finding mpi4py.futures loaded in an MPI
    job of more than one process is the sign. mpi4py.MPI is only looked up, never imported:
    importing it would initialise MPI.
    """
    futures, mpi = sys.modules.get("mpi4py.futures"), sys.modules.get("mpi4py.MPI")
    if futures is None or mpi is None or mpi.COMM_WORLD.Get_size() < 2:
        return None
    return futures.MPIPoolExecutor(main=False)     # the tasks live in dpsim.simulate, not __main__
