"""The sweep library, sweep() and sweep_grid(): many scenarios (GPU counts x varied keys), each
distinct one simulated once, serially, in local processes (jobs) or on the workers of
`mpiexec -n N python -m mpi4py.futures`. The executors live here and nowhere else; the
`dpsim sweep` command that prints them is dpsim.cli_sweep.
"""
import itertools
import math
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

from . import limits
from .config import Scenario, load_scenario
from .engine import Engine
from .errors import ScenarioError
from .results import Result
from .simulation import compressed, make_result, single_gpu, throughput, uncompressed_twin, with_gpus


def sweep(scenario, gpus, overrides: dict | None = None) -> list[Result]:
    """The scenario at each GPU count, with one shared one-GPU baseline."""
    return [res for _, res in sweep_grid(scenario, gpus, overrides=overrides)]


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
    jobs: 1 runs here, N > 1 in N local processes (never more than cores), 0 in one per core; under
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
    runs = len(counts) * math.prod(len(values) for values in vary.values())
    limits.at_most("sweep", runs, limits.SWEEP_RUNS, "rows (GPU counts x combinations of the varied values)")
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
        try:
            for finished, _ in enumerate(as_completed(futures), 1):
                report(finished, len(tasks))
        except BaseException:                  # Ctrl-C: no worker left running a simulation
            stop_workers(pool)
            raise
        return [f.result() for f in futures]


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def ignore_interrupts():
    """In each local worker: Ctrl-C is the parent's to handle (it stops the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def stop_workers(pool):
    """End a local pool's processes now, the simulations they run included."""
    pool.shutdown(wait=False, cancel_futures=True)
    terminate = getattr(pool, "terminate_workers", None)          # Python 3.14
    if terminate:
        terminate()
        return
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        process.terminate()


def executor(jobs: int, tasks: int):
    """Where simulations run: None (here), the mpi4py.futures workers, or local processes."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 0 <= jobs <= limits.JOBS:
        raise ScenarioError("jobs", f"expected 0 (one process per core), 1 (no extra processes) or more, "
                                    f"at most {limits.JOBS:,}; got {jobs!r}")
    mpi_pool = mpi_futures_pool()
    if mpi_pool is not None:
        return mpi_pool
    workers = min(jobs or cores(), cores(), tasks)          # more processes than cores only wait
    return ProcessPoolExecutor(workers, initializer=ignore_interrupts) if workers > 1 else None


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
    return futures.MPIPoolExecutor(main=False)     # the tasks live in dpsim.sweeps, not __main__
