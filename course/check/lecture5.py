"""Checkers for lecture 05, the input pipeline: loader workers, cores, real against synthetic data.

    from course.check import lecture5
    lecture5.exercise1(answer)

The exercises' settings are the constants below; the notebook states the same ones. Right
answers come from dpsim runs (exercise 1) or from the pipeline's closed form with the
compute time taken from a dpsim run on synthetic data (exercises 2 and 3).

The closed form (dpsim/pipeline.py): a training process that eats b samples per iteration
gets a batch every b x decode / W seconds from W workers, as long as each worker has a core;
the node's cores minus one per training process are shared by all workers. The GPUs are fed
when that is no longer than the iteration time on synthetic data.
"""
import functools
import math

import dpsim

from . import Verdict, close, number, pending

# Exercise 1: story 4's DataParallel box with a smaller batch per GPU.
EX1_SCENARIO = "pytorch-dataparallel-4gpu"
EX1_OVERRIDES = {"training.batch_per_gpu": 32}

# Exercise 2: the same box with only 4 cores (12 workers as before).
EX2_SCENARIO = "pytorch-dataparallel-4gpu"
EX2_OVERRIDES = {"cluster.cpu_cores": 4}

# Exercise 3: story 3, TensorFlow after its upgrade (the scenario's description lists these).
EX3_SCENARIO = "mxnet-vs-tf-4gpu"
EX3_OVERRIDES = {"compute.efficiency": 0.0504, "compute.dispatch_ms_per_gpu": 18.8,
                 "sync.update_location": "gpu", "sync.overlap": False}


def loading_processes(sc) -> tuple[int, int]:
    """(training processes that load per node, samples each loads per iteration): DataParallel
    loads the node's whole batch in its one process."""
    return sc.processes_per_node, sc.training.batch_per_gpu * sc.gpus_per_process


def fed_throughput(sc) -> float:
    """Samples/s the loaders of one node can deliver (closed form), all nodes together."""
    processes, batch = loading_processes(sc)
    cores_for_loaders = max(sc.cluster.cpu_cores - processes, 1)
    busy = min(sc.data.workers * processes, cores_for_loaders)
    return busy / (sc.data.decode_ms_per_sample / 1e3) * sc.cluster.nodes


def _synthetic(name, overrides):
    return dpsim.simulate(name, {**overrides, "data.source": "synthetic"})


# ------------------------------------------------------------------ exercise 1

def knee_workers(name=EX1_SCENARIO, overrides=None) -> int:
    """The fewest loader workers at which throughput is within 1% of its best (dpsim runs)."""
    return _knee_workers(name, tuple(sorted((overrides or EX1_OVERRIDES).items())))


@functools.lru_cache(maxsize=None)
def _knee_workers(name, overrides):
    overrides = dict(overrides)
    sc = dpsim.load_scenario(name, overrides)
    processes, _ = loading_processes(sc)
    most = max(sc.cluster.cpu_cores - processes, 1)
    runs = [dpsim.simulate(name, {**overrides, "data.workers": w}).throughput_samples_per_s
            for w in range(1, most + 1)]
    best = max(runs)
    return next(w for w, t in enumerate(runs, start=1) if t >= 0.99 * best)


def exercise1(answer) -> Verdict:
    """The smallest number of loader workers that keeps the GPUs fed (batch 32 per GPU)."""
    if answer is None:
        return pending("a whole number of workers")
    value = number(answer)
    if value is None:
        return Verdict(False, f"expected a whole number of workers, got {answer!r}")
    expected = knee_workers()
    if value == expected:
        return Verdict(True, f"{expected} workers")
    sc = dpsim.load_scenario(EX1_SCENARIO, EX1_OVERRIDES)
    per_process = sc.training.batch_per_gpu
    t = _synthetic(EX1_SCENARIO, EX1_OVERRIDES).iteration_time_s
    if value == math.ceil(per_process * sc.data.decode_ms_per_sample / 1e3 / t):
        return Verdict(False, f"{value:g} workers would be enough if each GPU had its own loaders; "
                              "DataParallel loads all four GPUs' samples in one process.")
    if value > expected:
        return Verdict(False, f"{value:g} workers keep the GPUs fed, but fewer do too.")
    return Verdict(False, f"with {value:g} workers the GPUs still wait for data. Hint: W >= b x decode / t, "
                          "b = samples the loading process needs per iteration, t = the iteration "
                          "time on synthetic data.")


# ------------------------------------------------------------------ exercise 2

def exercise2(answer) -> Verdict:
    """Throughput (samples/s) of the DataParallel box with 4 cores and 12 workers."""
    if answer is None:
        return pending("samples per second")
    if number(answer) is None:
        return Verdict(False, f"expected a number of samples per second, got {answer!r}")
    sc, compute_bound = ex2_figures()
    expected = solution2((sc, compute_bound))
    verdict = close(answer, expected, rel=0.05, unit=" samples/s")
    if verdict.ok:
        return verdict
    value = number(answer)
    if math.isclose(value, sc.cluster.cpu_cores / (sc.data.decode_ms_per_sample / 1e3), rel_tol=0.02):
        return Verdict(False, f"{value:.4g} samples/s counts every core; the training process keeps one.")
    if expected < compute_bound and 1.1 * expected < value <= 1.05 * compute_bound:
        return Verdict(False, f"{value:.4g} samples/s is about what the GPUs could do if fed. Did the run "
                              "measure long enough for the first, prefetched batches to run out?")
    return Verdict(False, verdict.message + " Hint: the loaders can use (cores - 1) cores, each "
                          "decoding one sample per decode_ms_per_sample.")


# ------------------------------------------------------------------ exercise 3

def break_even_decode_ms(name=EX3_SCENARIO, overrides=EX3_OVERRIDES) -> float:
    """The decode cost per sample (ms) at which the loaders just keep up with the GPUs."""
    sc = dpsim.load_scenario(name, overrides)
    processes, batch = loading_processes(sc)
    busy = min(sc.data.workers * processes, max(sc.cluster.cpu_cores - processes, 1))
    t = _synthetic(name, overrides).iteration_time_s
    return busy * t / (processes * batch) * 1e3


def exercise3(answer) -> Verdict:
    """Story 3, TensorFlow after the upgrade: the largest decode_ms_per_sample the loaders keep up with."""
    if answer is None:
        return pending("milliseconds per sample")
    if number(answer) is None:
        return Verdict(False, f"expected a number of milliseconds, got {answer!r}")
    expected = break_even_decode_ms()
    verdict = close(answer, expected, rel=0.05, unit=" ms")
    if verdict.ok:
        return verdict
    return Verdict(False, verdict.message + " Hint: all loaders together decode (cores for loaders) / "
                          "decode samples per second; the GPUs eat 4 x 128 samples per (synthetic) iteration.")


def solution1() -> int:
    """Exercise 1's answer: the smallest number of workers that keeps the GPUs fed."""
    return knee_workers()


def ex2_figures():
    """(the scenario, the GPUs' samples/s when fed) of exercise 2."""
    return (dpsim.load_scenario(EX2_SCENARIO, EX2_OVERRIDES),
            _synthetic(EX2_SCENARIO, EX2_OVERRIDES).throughput_samples_per_s)


def solution2(figures=None) -> float:
    """Exercise 2's answer: samples/s, the loaders' rate or the GPUs', whichever is lower
    (`figures`: ex2_figures())."""
    sc, compute_bound = figures or ex2_figures()
    return min(fed_throughput(sc), compute_bound)


def solution3() -> float:
    """Exercise 3's answer: the break-even decode cost in ms per sample."""
    return break_even_decode_ms()
