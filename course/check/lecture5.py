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


# ------------------------------------------------------------------ worked solutions (teacher)

def _worked_workers():
    """Exercise 1 worked (see worked_solutions)."""
    from . import Worked
    sc = dpsim.load_scenario(EX1_SCENARIO, EX1_OVERRIDES)
    processes, b = loading_processes(sc)
    d = sc.data.decode_ms_per_sample / 1e3
    t = _synthetic(EX1_SCENARIO, EX1_OVERRIDES).iteration_time_s
    per_gpu = math.ceil(sc.training.batch_per_gpu * d / t)
    one = Worked(
        1, "fewest loader workers that keep the GPUs fed (batch 32 per GPU)", solution1(),
        f"{solution1()} workers", (
            f"DataParallel: {processes} training process loads the whole node's batch, "
            f"b = {sc.gpus_per_process} GPUs x {sc.training.batch_per_gpu} = {b} samples per iteration",
            f"t on synthetic data (a dpsim run with data.source = synthetic): {t * 1e3:.1f} ms; "
            f"decode d = {d * 1e3:g} ms per sample",
            f"W* = b d / t = {b} x {d * 1e3:g} ms / {t * 1e3:.1f} ms = {b * d / t:.2f}, so {math.ceil(b * d / t)} "
            "whole workers",
            f"dpsim's sweep over the workers agrees: throughput is within 1% of its best from "
            f"{solution1()} workers on"),
        wrong=((per_gpu, f"b = {sc.training.batch_per_gpu} per GPU: as if each GPU had its own loaders; "
                         "DataParallel's one process loads all four GPUs' samples"),
               (sc.data.workers, "the scenario's own worker count: enough, but not the fewest")),
        rubric=(f"{solution1()}, from W* = b d / t with b the loading process's {b} samples and t from a "
                "synthetic run",
                "the method right with b per GPU, or t taken from a real-data run",
                "a guess without the knee formula or a sweep"))
    return one


def _worked_cores():
    """Exercise 2 worked (see worked_solutions)."""
    from . import Worked
    sc2, compute_bound = ex2_figures()
    processes2, _ = loading_processes(sc2)
    cores, d2 = sc2.cluster.cpu_cores, sc2.data.decode_ms_per_sample / 1e3
    two = Worked(
        2, "throughput with 4 cores and 12 workers (samples/s)", solution2((sc2, compute_bound)),
        f"{solution2((sc2, compute_bound)):.4g} samples/s", (
            f"{cores} cores, {processes2} kept by the training process: {cores - processes2} cores for the "
            f"{sc2.data.workers} workers, who share them",
            f"each core decodes one sample per {d2 * 1e3:g} ms: ({cores} - {processes2}) / {d2 * 1e3:g} ms = "
            f"{fed_throughput(sc2):,.0f} samples/s",
            f"the GPUs alone (synthetic data) could do {compute_bound:,.0f} samples/s, so the loaders set the pace: "
            f"min({fed_throughput(sc2):,.0f}, {compute_bound:,.0f}) = {solution2((sc2, compute_bound)):,.0f}",
            "a short timing from the start sees the prefetched burst and reports about the GPUs' rate: "
            "measure whole cycles after the queue has drained"),
        wrong=((round(cores / d2), "counted every core; the training process keeps one"),
               (round(compute_bound), "the GPUs' rate: timed the first, prefetched batches (the lecture's trap)")),
        rubric=(f"{solution2((sc2, compute_bound)):,.0f} samples/s from (c - 1) / d, noting the GPUs could go faster",
                "the formula with all the cores, or the right number without saying which side limits",
                "the synthetic (GPU) rate, or the rate with 12 workers each on its own core"),
        rel=0.05)
    return two


def _worked_decode_cost():
    """Exercise 3 worked (see worked_solutions)."""
    from . import Worked
    sc3 = dpsim.load_scenario(EX3_SCENARIO, EX3_OVERRIDES)
    p3, b3 = loading_processes(sc3)
    free = max(sc3.cluster.cpu_cores - p3, 1)
    busy = min(sc3.data.workers * p3, free)
    t3 = _synthetic(EX3_SCENARIO, EX3_OVERRIDES).iteration_time_s
    three = Worked(
        3, "TensorFlow after the upgrade: largest decode cost the loaders keep up with (ms)", solution3(),
        f"{solution3():.4g} ms per sample", (
            f"{p3} training processes, {sc3.data.workers} workers each: {sc3.data.workers * p3} workers on "
            f"{sc3.cluster.cpu_cores} - {p3} = {free} free cores, so {busy} cores decode",
            f"the GPUs eat {p3} x {b3} = {p3 * b3} samples per iteration; t on synthetic data = {t3 * 1e3:.2f} ms",
            f"fed while {busy} / d >= {p3 * b3} / t, so d* = {busy} x {t3 * 1e3:.2f} ms / {p3 * b3} = "
            f"{solution3():.3f} ms per sample",
            "the decode cost the lecture fitted to TensorFlow's real-data rate lies above it: that is the "
            "real-data gap"),
        wrong=((round(sc3.data.workers * p3 * t3 / (p3 * b3) * 1e3, 3),
                "counted every worker as a core: there are more workers than free cores"),),
        rubric=(f"{solution3():.3g} ms from the decoding cores and t of a synthetic run",
                "read off the plot within 5%, or the formula with the workers instead of the cores",
                "a decode cost for one GPU's batch, or TensorFlow's fitted decode cost read off the lecture"),
        rel=0.05)
    return three


def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed by the code above
(course.check.worked(5) prints them)."""
    return [_worked_workers(), _worked_cores(), _worked_decode_cost()]
