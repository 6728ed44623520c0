"""Checkers for lecture 07, sharding and compression: memory against communication.

    from course.check import lecture7
    lecture7.exercise1(answer)

The exercises' settings are the constants below; the notebook states the same ones. Every
right answer is computed here from dpsim.memory's bytes per parameter (the ZeRO paper's
2 + 2 + K), a GPU preset's memory, dpsim.analytic's PowerSGD bytes and 1-bit's encoding;
never copied from a notebook's output.
"""
import math

from dpsim import analytic, hardware, memory
from dpsim.models import get_model
from dpsim.vocabulary import ONEBIT_BLOCK

from . import Verdict, close, number, pending

GB = 1e9

# Exercises 1 and 2: a 13-billion-parameter model trained with Adam in mixed precision (2 + 2 +
# 12 bytes per parameter: ZeRO, section 3.1).
PARAMS = 13e9
PRECISION, OPTIMIZER = "fp16", "adam"

# Exercise 1: its model states per GPU with ZeRO-2 on 8 GPUs.
EX1_GPUS, EX1_STAGE = 8, "zero2"

# Exercise 2: H100s (dpsim's preset memory, 80 GB), activations and buffers 10 GB per GPU; the
# fewest GPUs with which ZeRO-2 fits.
EX2_GPU, EX2_STAGE, EX2_OTHER_GB = "h100", "zero2", 10.0

# Exercise 3: AlexNet's classifier.4 weight (dpsim's alexnet preset), PowerSGD against 1-bit SGD.
EX3_MODEL, EX3_LAYER = "alexnet", "classifier.4"
ONEBIT_BYTES_PER_VALUE = 1 / 8 + 4 / ONEBIT_BLOCK        # one sign bit, a 4-byte scale per block


def _states_gb(gpus, stage):
    """Parameters + gradients + optimizer state per GPU, GB."""
    return sum(memory.model_states(PARAMS, gpus, PRECISION, OPTIMIZER, stage).values()) / GB


def _capacity_gb():
    return hardware.GPUS[EX2_GPU].memory_gb


def _matrix():
    return next(layer.matrix for layer in get_model(EX3_MODEL).layers if layer.name == EX3_LAYER)


def _powersgd_bytes(rank):
    p, q, _ = analytic.powersgd_wire([_matrix()], 0, rank)
    return p + q


def _onebit_bytes():
    n, m = _matrix()
    return n * m * ONEBIT_BYTES_PER_VALUE


def _fewest(stage, other_gb):
    gpus = 1
    while _states_gb(gpus, stage) + other_gb > _capacity_gb():
        gpus += 1
    return gpus


def solution1() -> float:
    """Exercise 1's answer: model states per GPU, GB."""
    return _states_gb(EX1_GPUS, EX1_STAGE)


def solution2() -> int:
    """Exercise 2's answer: the fewest GPUs with which ZeRO-2 fits."""
    return _fewest(EX2_STAGE, EX2_OTHER_GB)


def solution3() -> int:
    """Exercise 3's answer: the largest rank at which PowerSGD sends no more than 1-bit."""
    rank = 0
    while _powersgd_bytes(rank + 1) <= _onebit_bytes():
        rank += 1
    return rank


def exercise1(answer) -> Verdict:
    """Model states per GPU (GB) with ZeRO-2 on 8 GPUs."""
    if answer is None:
        return pending("the model states per GPU in GB")
    verdict = close(answer, solution1(), rel=0.02, unit=" GB")
    value = number(answer)
    if verdict.ok or value is None:
        return verdict
    known = [(_states_gb(1, "ring"), "is the whole model's states on one GPU: ZeRO-2 divides some of them by N"),
             (_states_gb(EX1_GPUS, "zero1"), "is ZeRO-1's figure: stage 2 divides the gradients by N too"),
             (_states_gb(EX1_GPUS, "zero3"), "divides everything by N: that is ZeRO-3; stage 2 keeps every parameter")]
    for figure, why in known:
        if math.isclose(value, figure, rel_tol=0.02):
            return Verdict(False, f"{value:.4g} GB {why}.")
    return Verdict(False, verdict.message + " Hint: 2 bytes of parameters per parameter stay whole; "
                                            "(2 + 12) bytes are divided by the GPUs.")


def exercise2(answer) -> Verdict:
    """The fewest H100s with which ZeRO-2 holds the model states and 10 GB of activations."""
    if answer is None:
        return pending("a whole number of GPUs")
    value, expected = number(answer), solution2()
    if value is None:
        return Verdict(False, f"expected a number of GPUs, got {answer!r}")
    if value == expected:
        return Verdict(True, f"{expected} GPUs: {_states_gb(expected, EX2_STAGE) + EX2_OTHER_GB:.1f} GB of "
                             f"{_capacity_gb():g} GB per GPU")
    capacity, whole = _capacity_gb(), 2 * PARAMS / GB
    exact = (14 * PARAMS / GB) / (capacity - EX2_OTHER_GB - whole)
    if value != int(value) or abs(value - exact) < 1 and value < expected:
        return Verdict(False, f"{value:g} GPUs is too few: the crossing is N = {exact:.2f} with the "
                              f"{EX2_OTHER_GB:g} GB of activations counted, and a fraction of a GPU does not "
                              "exist: round up")
    if value == _fewest(EX2_STAGE, 0.0):
        return Verdict(False, f"{value:g} GPUs fit the model states alone: add the {EX2_OTHER_GB:g} GB of activations")
    if value == _fewest("zero3", EX2_OTHER_GB):
        return Verdict(False, f"{value:g} GPUs is enough for ZeRO-3; ZeRO-2 keeps every parameter on every GPU")
    if value == _fewest("zero1", EX2_OTHER_GB):
        return Verdict(False, f"{value:g} GPUs is what ZeRO-1 needs; ZeRO-2 divides the gradients by N too")
    return Verdict(False, f"{value:g} is not it. Hint: 2 P + (2 + 12) P / N + {EX2_OTHER_GB:g} GB <= "
                          f"{capacity:g} GB; solve for N and round up.")


def exercise3(answer) -> Verdict:
    """The largest rank at which PowerSGD sends no more bytes than 1-bit for the matrix."""
    if answer is None:
        return pending("a whole rank r")
    value, expected = number(answer), solution3()
    if value is None:
        return Verdict(False, f"expected a rank, got {answer!r}")
    n, m = _matrix()
    if value == expected:
        return Verdict(True, f"rank {expected}: {_powersgd_bytes(expected):,.0f} bytes of P and Q against "
                             f"1-bit's {_onebit_bytes():,.0f}")
    if math.isclose(value, n * m / 8 / (4 * (n + m)), abs_tol=1):
        return Verdict(False, f"{value:g} forgets 1-bit's scales: one 4-byte scale per {ONEBIT_BLOCK} values "
                              "rides with the sign bits")
    if math.isclose(value, _onebit_bytes() / (4 * min(n, m)), abs_tol=1):
        return Verdict(False, f"{value:g} counts only one factor: PowerSGD all-reduces P (n x r) and Q (m x r)")
    if math.isclose(value, _onebit_bytes() / (n + m), abs_tol=1):
        return Verdict(False, f"{value:g} counts P and Q in values, not bytes: each value is 4 bytes (FP32)")
    return Verdict(False, f"{value:g} is not it. Hint: PowerSGD sends 4 (n + m) r bytes, 1-bit "
                          f"n m (1/8 + 4/{ONEBIT_BLOCK}); find the largest whole r with the first no larger.")


# ------------------------------------------------------------------ worked solutions (teacher)

def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed from the constants above
    (course.check.worked(7) prints them)."""
    from . import Worked
    p, n1 = PARAMS / GB, EX1_GPUS
    one = Worked(
        1, "model states per GPU with ZeRO-2 (GB)", solution1(), f"{solution1():.4g} GB", (
            f"mixed precision with Adam holds 2 + 2 + 12 = 16 bytes per parameter: {16 * p:g} GB for "
            f"{p:g} B parameters on one GPU",
            "ZeRO-2 divides the optimizer state (12 bytes) and the gradients (2 bytes) by N and keeps "
            "every parameter (2 bytes) on every GPU",
            f"2 x {p:g} + (2 + 12) x {p:g} / {n1} = {2 * p:g} + {14 * p / n1:g} = {solution1():.4g} GB",
            f"for comparison: ZeRO-1 {_states_gb(n1, 'zero1'):.4g} GB, ZeRO-3 {_states_gb(n1, 'zero3'):.4g} GB"),
        wrong=((round(16 * p, 1), "no sharding at all"),
               (round(_states_gb(n1, "zero1"), 2), "ZeRO-1: only the optimizer state divided"),
               (round(_states_gb(n1, "zero3"), 2), "ZeRO-3: the parameters divided too")),
        rubric=(f"{solution1():.4g} GB with what each stage divides named",
                "the right method with K or the byte counts slipped (e.g. 4 + 4 + 8 in FP32)",
                "a figure without the split into parameters, gradients and optimizer state"),
        rel=0.02)
    cap, other, whole = _capacity_gb(), EX2_OTHER_GB, 2 * p
    exact = 14 * p / (cap - other - whole)
    two = Worked(
        2, "fewest H100s with which ZeRO-2 fits", solution2(), f"{solution2()} GPUs", (
            f"per GPU: 2 P + 14 P / N + {other:g} GB <= {cap:g} GB (the h100 preset's memory)",
            f"{whole:g} + {14 * p:g} / N + {other:g} <= {cap:g}  <=>  N >= {14 * p:g} / "
            f"{cap - other - whole:g} = {exact:.2f}",
            f"the fewest whole GPUs: {solution2()} ({_states_gb(solution2(), EX2_STAGE) + other:.1f} GB each)",
            f"for comparison: ZeRO-1 needs {_fewest('zero1', other)}, ZeRO-3 {_fewest('zero3', other)}; "
            f"without sharding {16 * p + other:g} GB fits on no number of GPUs"),
        wrong=((int(exact), "the crossing rounded down (leaving out the activations gives the same count here)"),
               (_fewest("zero1", other), "ZeRO-1's count: the gradients not divided"),
               (_fewest("zero3", other), "ZeRO-3's count: the parameters divided too")),
        rubric=(f"{solution2()}, with the inequality written and rounded up",
                f"the crossing {exact:.2f} without rounding up, or a slip in one term",
                "an answer without the inequality, or one that divides the wrong parts"))
    n, m = _matrix()
    r = solution3()
    three = Worked(
        3, "largest PowerSGD rank that sends no more than 1-bit", r, f"{r} (the rank r)", (
            f"{EX3_MODEL}'s {EX3_LAYER} is {n} x {m}: {n * m:,} values",
            f"1-bit sends 1/8 + 4/{ONEBIT_BLOCK} = {ONEBIT_BYTES_PER_VALUE:g} bytes per value: "
            f"{_onebit_bytes():,.0f} bytes",
            f"PowerSGD at rank r sends P ({n} x r) and Q ({m} x r) in FP32: 4 x ({n} + {m}) r = {4 * (n + m):,} r bytes",
            f"{4 * (n + m):,} r <= {_onebit_bytes():,.0f}  <=>  r <= {_onebit_bytes() / (4 * (n + m)):.2f}: "
            f"rank {r} (both exchanges pay the same 2 (N-1)/N, so it cancels)",
            "in time PowerSGD loses much earlier: its three products cost 2 n m r FLOPs each (section 4)"),
        wrong=((round(n * m / 8 / (4 * (n + m))), "forgot 1-bit's scales"),
               (round(_onebit_bytes() / (4 * min(n, m))), "counted one factor only"),
               (round(_onebit_bytes() / (n + m)), "counted values, not bytes")),
        rubric=(f"rank {r}, both byte counts shown",
                "the right inequality with one term slipped (scales, or one factor)",
                "a rank without the bytes of both"))
    return [one, two, three]
