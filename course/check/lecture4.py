"""Checkers for lecture 04, 1-bit SGD: when compression pays, and why error feedback matters.

    from course.check import lecture4
    lecture4.exercise1(answer)

The exercises' settings are the constants below; the notebook states the same ones. Every
right answer is computed here: from the closed form of 1-bit's message size, from dpsim
runs, or by running the quantiser itself; never copied from a notebook's output.
"""
import functools
import math

import dpsim
import numpy as np
from dpsim.vocabulary import ONEBIT_BLOCK

from . import Verdict, close, number, pending

# 1-bit's encoding (mpi_impl/onebit.py, dpsim/strategies/onebit.py): one sign bit per value
# and one 4-byte FP32 scale per block of ONEBIT_BLOCK (256) values.
BYTES_PER_VALUE = 1 / 8 + 4 / ONEBIT_BLOCK

# Exercise 1: the scenario whose per-GPU traffic the student predicts.
EX1_SCENARIO = "onebit-wins-ethernet"

# Exercise 2: cntk-1bit-k80 with both PCIe links (GPU <-> switch and switch <-> host) set to
# B GB/s, keeping PCIe 3's 1 us latency, and 1-bit's per-message software cost cut from the
# scenario's 25 us to 5 us (an MPI that needs fewer copies and synchronisations); find the B
# where 1-bit and plain SGD tie. (The lecture finds it for 25 us.)
EX2_SCENARIO = "cntk-1bit-k80"
EX2_OVERRIDES = {"sync.message_overhead_us": 5.0}
EX2_LATENCY_US = 1.0
EX2_RANGE_GBS = (0.02, 16.0)

# Exercise 3: the same two-value gradient arrives at every step; one block; error feedback.
EX3_GRADIENT = (0.9, 0.1)
EX3_STEPS = 10


# ------------------------------------------------------------------ exercise 1

def onebit_bytes_per_gpu(params: int, gpus: int) -> float:
    """Bytes one GPU sends per iteration with 1-bit SGD: all-to-all, then all-gather, each
    (n-1)/n of the quantised gradient."""
    return 2 * (gpus - 1) / gpus * params * BYTES_PER_VALUE


@functools.lru_cache(maxsize=None)
def _scenario_size(name):
    """(parameters, GPUs) of a built-in scenario, read from dpsim's resolved configuration."""
    gpus = dpsim.load_scenario(name).gpus
    one = dpsim.simulate(name, {"cluster.nodes": 1, "cluster.gpus_per_node": 1, "sync.strategy": "none",
                                "sync.compression": "none", "training.iterations": 1,
                                "training.warmup_iterations": 0})
    return one.scenario["resolved"]["model"]["params"], gpus


def solution1(size=None) -> float:
    """Exercise 1's answer: MB each GPU sends with 1-bit SGD (`size`: _scenario_size's (params, GPUs))."""
    return onebit_bytes_per_gpu(*(size or _scenario_size(EX1_SCENARIO))) / 1e6


def exercise1(answer) -> Verdict:
    """MB (10^6 bytes) each GPU sends per iteration with 1-bit SGD in onebit-wins-ethernet."""
    if answer is None:
        return pending("megabytes per GPU per iteration")
    if number(answer) is None:
        return Verdict(False, f"expected a number of megabytes, got {answer!r}")
    params, gpus = _scenario_size(EX1_SCENARIO)
    expected = solution1((params, gpus))
    verdict = close(answer, expected, rel=0.02, unit=" MB")
    if verdict.ok:
        return verdict
    value = number(answer)
    if value is None:
        return verdict
    plain = 2 * (gpus - 1) / gpus * params * 4 / 1e6
    if math.isclose(value, plain, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} MB is what the plain FP32 ring sends; 1-bit sends one bit "
                              "per value plus a scale per 256 values.")
    if math.isclose(value, params * BYTES_PER_VALUE / 1e6, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} MB is the quantised gradient once; each GPU sends (n-1)/n "
                              "of it twice (all-to-all, then all-gather).")
    if math.isclose(value, params / 8 * 2 * (gpus - 1) / gpus / 1e6, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} MB forgets the scales: 4 bytes per 256 values.")
    return Verdict(False, verdict.message + " Hint: 2 (n-1)/n x parameters x (1/8 + 4/256) bytes.")


# ------------------------------------------------------------------ exercise 2

def _onebit_minus_plain(bandwidth_gbs, overrides):
    """Iteration time of 1-bit minus that of plain SGD (seconds) at this PCIe bandwidth."""
    link = {"bandwidth_gbs": bandwidth_gbs, "latency_us": EX2_LATENCY_US, "kind": "pcie"}
    # no jitter, so every iteration is the same: 2 measured after 1 warm-up are enough
    r = dpsim.simulate(EX2_SCENARIO, {**dict(overrides), "sync.compression": "1bit", "cluster.intra": link,
                                      "cluster.host_link": link, "training.iterations": 2,
                                      "training.warmup_iterations": 1})
    return r.iteration_time_s - r.uncompressed.iteration_time_s


def break_even_bandwidth(overrides=None, steps=9):
    """The PCIe bandwidth (GB/s) where 1-bit and plain SGD take equally long in cntk-1bit-k80
    with these overrides (default: exercise 2's), by bisection on a log scale (1-bit wins
    below it, loses above)."""
    return _break_even(tuple(sorted((EX2_OVERRIDES if overrides is None else overrides).items())), steps)


@functools.lru_cache(maxsize=None)
def _break_even(overrides, steps):
    lo, hi = (math.log(b) for b in EX2_RANGE_GBS)
    if _onebit_minus_plain(math.exp(lo), overrides) >= 0 or _onebit_minus_plain(math.exp(hi), overrides) <= 0:
        raise RuntimeError("1-bit no longer wins at the low end and loses at the high end of "
                           f"{EX2_RANGE_GBS} GB/s; the exercise needs updating")
    for _ in range(steps):
        mid = (lo + hi) / 2
        if _onebit_minus_plain(math.exp(mid), overrides) < 0:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2)


def exercise2(answer) -> Verdict:
    """Break-even PCIe bandwidth (GB/s) of 1-bit SGD in cntk-1bit-k80, messages at 5 us."""
    if answer is None:
        return pending("the bandwidth in GB/s where the two lines cross")
    if number(answer) is None:
        return Verdict(False, f"expected a bandwidth in GB/s, got {answer!r}")
    expected = break_even_bandwidth()
    verdict = close(answer, expected, rel=0.15, unit=" GB/s")
    if verdict.ok:
        return verdict
    value = number(answer)
    if value is not None and value > 0 and math.isclose(value / 8, expected, rel_tol=0.15):
        return Verdict(False, f"{value:.4g} looks like Gbit/s or a factor of 8 off; answer in GB/s.")
    if value is not None and math.isclose(value, break_even_bandwidth({}), rel_tol=0.1):
        return Verdict(False, f"{value:.4g} GB/s is the break-even with the scenario's 25 us per "
                              "message; set sync.message_overhead_us to 5 first.")
    return Verdict(False, verdict.message + " Hint: read where the two lines cross, or use "
                          "B* = (bytes saved) / (extra fixed time of 1-bit).")


# ------------------------------------------------------------------ exercise 3

def quantise(v, block=ONEBIT_BLOCK):
    """Each value becomes +s (if >= 0) or -s, s = mean |value| of its block."""
    v = np.asarray(v, dtype=float)
    out = np.empty_like(v)
    for lo in range(0, v.size, block):
        part = v[lo:lo + block]
        scale = np.abs(part).mean()
        out[lo:lo + block] = np.where(part >= 0, scale, -scale)
    return out


def sent_with_error_feedback(gradient=EX3_GRADIENT, steps=EX3_STEPS):
    """Sum over steps of what 1-bit with error feedback sends, per value."""
    g = np.asarray(gradient, dtype=float)
    residual, total = np.zeros_like(g), np.zeros_like(g)
    for _ in range(steps):
        corrected = g + residual
        sent = quantise(corrected)
        residual = corrected - sent
        total += sent
    return total


def exercise3(answer) -> Verdict:
    """With error feedback, the total sent for the first value after 10 steps."""
    if answer is None:
        return pending("the sum of the first value over the 10 steps")
    if number(answer) is None:
        return Verdict(False, f"expected a number, got {answer!r}")
    expected = solution3()
    verdict = close(answer, expected, rel=0.01)
    if verdict.ok:
        return verdict
    value = number(answer)
    if value is None:
        return verdict
    g = np.asarray(EX3_GRADIENT)
    without = float(quantise(g)[0]) * EX3_STEPS
    if math.isclose(value, without, rel_tol=0.01):
        return Verdict(False, f"{value:.4g} is what arrives WITHOUT error feedback; with it, the lost "
                              "part is added to the next step's gradient.")
    if math.isclose(value, g[0] * EX3_STEPS, rel_tol=0.01):
        return Verdict(False, f"{value:.4g} is the exact sum; some of it is still in the residual "
                              "after the last step.")
    return Verdict(False, verdict.message + " Hint: loop 10 times: c = g + e; q = quantise(c); "
                          "e = c - q; add up q.")


def solution2() -> float:
    """Exercise 2's answer: the break-even bandwidth in GB/s."""
    return break_even_bandwidth()


def solution3() -> float:
    """Exercise 3's answer: the first value's total over the 10 steps."""
    return float(sent_with_error_feedback()[0])


# ------------------------------------------------------------------ worked solutions (teacher)

def _closed_form_break_even(overrides, fast_gbs=EX2_RANGE_GBS[1]):
    """The notebook's two-term closed form B* = (M_ring - M_1bit) / (A_1bit - A_plain), with each
    A = T - M / B taken from one run at the fastest PCIe of the range (GB/s)."""
    link = {"bandwidth_gbs": fast_gbs, "latency_us": EX2_LATENCY_US, "kind": "pcie"}
    r = dpsim.simulate(EX2_SCENARIO, {**overrides, "sync.compression": "1bit", "cluster.intra": link,
                                      "cluster.host_link": link, "training.iterations": 2,
                                      "training.warmup_iterations": 1})
    m_plain, m_1bit = r.uncompressed.bytes_sent_per_gpu, r.bytes_sent_per_gpu
    b = fast_gbs * 1e9
    a_plain, a_1bit = r.uncompressed.iteration_time_s - m_plain / b, r.iteration_time_s - m_1bit / b
    return (m_plain - m_1bit) / (a_1bit - a_plain) / 1e9, m_plain, m_1bit, a_plain, a_1bit


def _worked_bytes():
    """Exercise 1 worked (see worked_solutions)."""
    from . import Worked
    params, gpus = _scenario_size(EX1_SCENARIO)
    once = params * BYTES_PER_VALUE
    one = Worked(
        1, "MB each GPU sends per iteration with 1-bit SGD", solution1(), f"{solution1():.4g} MB", (
            f"{EX1_SCENARIO}: {params:,} parameters on {gpus} GPUs (dpsim's resolved scenario)",
            f"1-bit sends 1/8 byte of sign per value plus a 4-byte scale per {ONEBIT_BLOCK} values: "
            f"{BYTES_PER_VALUE:.6g} bytes per value; the quantised gradient is {once / 1e6:.4g} MB",
            f"each GPU sends (n-1)/n of it twice (all-to-all, then all-gather): 2 x {gpus - 1}/{gpus} x "
            f"{once / 1e6:.4g} MB = {solution1():.4g} MB",
            f"the plain FP32 ring would send 2 (n-1)/n x 4 bytes x parameters = "
            f"{2 * (gpus - 1) / gpus * params * 4 / 1e6:.4g} MB"),
        wrong=((round(2 * (gpus - 1) / gpus * params * 4 / 1e6, 2), "the plain ring's bytes: 1-bit not applied"),
               (round(once / 1e6, 3), "the quantised gradient once: forgot both phases and (n-1)/n"),
               (round(params / 8 * 2 * (gpus - 1) / gpus / 1e6, 3), "forgot the scales (4 bytes per block)")),
        rubric=(f"{solution1():.4g} MB with the bytes per value and both phases",
                "the bytes per value right but one phase or the (n-1)/n missing, or the scales forgotten",
                "the FP32 figure, or a figure without a per-value count"),
        rel=0.02)
    return one


def _worked_break_even():
    """Exercise 2 worked (see worked_solutions)."""
    from . import Worked
    b_star = break_even_bandwidth()
    closed, m_plain, m_1bit, a_plain, a_1bit = _closed_form_break_even(EX2_OVERRIDES)
    two = Worked(
        2, "break-even PCIe bandwidth with 5 us messages (GB/s)", b_star, f"{b_star:.4g} GB/s", (
            f"cntk-1bit-k80 with sync.message_overhead_us = {EX2_OVERRIDES['sync.message_overhead_us']:g} "
            f"and both PCIe links (GPU-switch, switch-host) at B GB/s, {EX2_LATENCY_US:g} us latency",
            f"per iteration plain SGD sends M_ring = {m_plain / 1e6:.4g} MB per GPU, 1-bit M_1bit = "
            f"{m_1bit / 1e6:.4g} MB",
            f"the fixed parts at {EX2_RANGE_GBS[1]:g} GB/s (A = T - M / B): A_plain = {a_plain * 1e3:.3f} ms, "
            f"A_1bit = {a_1bit * 1e3:.3f} ms",
            f"closed form B* = (M_ring - M_1bit) / (A_1bit - A_plain) = {closed:.3g} GB/s",
            f"dpsim's lines cross (bisection on the simulated difference) at {b_star:.3g} GB/s: the answer; "
            f"below it 1-bit wins",
            f"cheaper messages moved the break-even up from {break_even_bandwidth({}):.3g} GB/s at 25 us: "
            "1-bit's fixed cost per layer shrank"),
        wrong=((round(8 * b_star, 2), "a factor of 8: Gbit/s for GB/s"),
               (round(break_even_bandwidth({}), 3), "the lecture's break-even at 25 us: the override was not set")),
        rubric=(f"within the checker's 15% of {b_star:.3g} GB/s, by the sweep or the closed form, "
                "with the override set",
                "the method right but read off a coarse sweep outside 15%, or the unit off by 8",
                "the 25 us figure, or no crossing"),
        rel=0.15)
    return two


def _worked_error_feedback():
    """Exercise 3 worked (see worked_solutions)."""
    from . import Worked
    g = np.asarray(EX3_GRADIENT, dtype=float)
    residual, sent_first, rows = np.zeros_like(g), 0.0, []
    for step in range(1, EX3_STEPS + 1):
        corrected = g + residual
        q = quantise(corrected)
        residual = corrected - q
        sent_first += q[0]
        rows.append(f"{step}: c = ({corrected[0]:.2f}, {corrected[1]:.2f}) -> q = ({q[0]:.2f}, {q[1]:.2f})")
    three = Worked(
        3, "with error feedback, the first value's total after 10 steps", solution3(), f"{solution3():.4g}", (
            f"loop c = g + e; q = quantise(c) (sign times the mean |c| of the block); e = c - q; "
            f"g = {tuple(float(x) for x in g)}",
            "step " + "; ".join(rows[:3]) + "; ...",
            f"after {EX3_STEPS} steps the first value received {sent_first:.4g}; the exact sum is "
            f"{g[0] * EX3_STEPS:.4g} and the rest, {g[0] * EX3_STEPS - sent_first:.4g}, waits in the residual "
            "(sum q = sum g - e)",
            f"without error feedback it would be {float(quantise(g)[0]) * EX3_STEPS:.4g}: the bias never comes back"),
        wrong=((float(quantise(g)[0]) * EX3_STEPS, "the sum WITHOUT error feedback, the statement's own example"),
               (float(g[0] * EX3_STEPS), "the exact sum: forgot that the residual still holds some of it")),
        rubric=(f"{solution3():.4g}, with the loop (or its first steps) and sum q = sum g - e",
                "the loop right but a slip in a step, or the exact sum with the residual explained",
                f"{float(quantise(g)[0]) * EX3_STEPS:.4g} or {g[0] * EX3_STEPS:.4g} without a reason"),
        rel=0.01)
    return three


def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed by the code above
(course.check.worked(4) prints them)."""
    return [_worked_bytes(), _worked_break_even(), _worked_error_feedback()]
