"""Checkers for lecture 01, synchronous data parallelism and the max(t1, t2) rule.

    from course.check import lecture1
    lecture1.exercise1(answer)

The exercises' data are the constants below; the notebook states the same numbers. Every
right answer is computed here from dpsim.analytic's closed forms, never copied from output.
"""
import math

from dpsim import analytic

from . import Verdict, choice, close, number, pending

# The setting of exercises 1 and 2: the d2l.ai lecture's 160 MB gradient (40 M FP32
# parameters), a ResNet-50-sized compute load (12.3 GFLOP per sample, forward and
# backward), V100 GPUs (15.7 TFLOP/s FP32, NVIDIA V100 datasheet) reaching 35% of peak,
# 8 GPUs in two machines joined by 10 GbE (1.25 GB/s per direction), ring all-reduce,
# latency ignored.
GPUS = 8
GRADIENT_BYTES = 160e6
FLOPS_PER_SAMPLE = 12.3e9
PEAK_TFLOPS = 15.7
EFFICIENCY = 0.35
HALF_BATCH = 8
NETWORK_GBS = 1.25
BATCH = 64

# Exercise 3: a run that keeps its global batch and spreads it over more GPUs.
EX3_BEFORE = {"gpus": 8, "batch_per_gpu": 128}
EX3_AFTER = {"gpus": 32, "batch_per_gpu": 32}


def _t1(batch, efficiency):
    return analytic.compute_time(FLOPS_PER_SAMPLE, batch, PEAK_TFLOPS, efficiency)


def _t2():
    return analytic.ring(GPUS, GRADIENT_BYTES, 0.0, 1 / (NETWORK_GBS * 1e9))


def solution1() -> float:
    """Exercise 1's answer: max(t1, t2) in ms."""
    return analytic.iteration_time(_t1(BATCH, EFFICIENCY), _t2(), overlap=True) * 1e3


def solution2() -> int:
    """Exercise 2's answer: the smallest whole batch with t1(b) >= t2."""
    t2, b = _t2(), 1
    while _t1(b, EFFICIENCY * b / (b + HALF_BATCH)) < t2:
        b += 1
    return b


def solution3() -> str:
    """Exercise 3's answer: the same global batch on more GPUs is strong scaling."""
    before = EX3_BEFORE["gpus"] * EX3_BEFORE["batch_per_gpu"]
    return "strong" if before == EX3_AFTER["gpus"] * EX3_AFTER["batch_per_gpu"] else "weak"


def exercise1(answer) -> Verdict:
    """Iteration time in milliseconds, with communication overlapping computation."""
    if answer is None:
        return pending("the iteration time in ms")
    t1, t2 = _t1(BATCH, EFFICIENCY), _t2()
    expected_ms = solution1()
    verdict = close(answer, expected_ms, rel=0.02, unit=" ms")
    if verdict.ok:
        return verdict
    value = number(answer)
    if value is None:
        return verdict
    if math.isclose(value, (t1 + t2) * 1e3, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} ms is t1 + t2: the time WITHOUT overlap. "
                              "With overlap the slower of the two sets the pace.")
    if math.isclose(value, t1 * 1e3, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} ms is t1. Is computing really the slower part here?")
    if math.isclose(value, 2 * GRADIENT_BYTES / (NETWORK_GBS * 1e9) * 1e3, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} ms counts 2m / B; a ring sends 2(n-1)/n of the gradient.")
    return Verdict(False, verdict.message + " Hint: t1 = F b / (P e), t2 = 2 (n-1)/n m / B, then max(t1, t2).")


def exercise2(answer) -> Verdict:
    """The smallest whole per-GPU batch b for which t1(b) >= t2, with e(b) = e_max b / (b + b_half)."""
    if answer is None:
        return pending("a whole number of samples per GPU")
    t2, b = _t2(), solution2()
    value = number(answer)
    if value is None:
        return Verdict(False, f"expected a number of samples, got {answer!r}")
    if value == b:
        return Verdict(True, f"{b} samples per GPU: from there on, computing the gradients "
                             f"takes at least as long as the ring ({t2 * 1e3:.0f} ms)")
    if abs(value - b) < 1:
        return Verdict(False, f"{value:g} is the exact crossing; the question asks for the smallest "
                              "whole batch at or above it (round up)")
    flat = t2 * PEAK_TFLOPS * 1e12 * EFFICIENCY / FLOPS_PER_SAMPLE
    if abs(value - flat) <= 1:
        return Verdict(False, f"{value:g} ignores the efficiency curve: with e(b) = e_max b / (b + b_half), "
                              "t1(b) = F (b + b_half) / (P e_max)")
    return Verdict(False, f"{value:g} is not it. Hint: t1(b) = F (b + b_half) / (P e_max); "
                          "solve t1(b) = t2 for b and round up.")


def exercise3(answer) -> Verdict:
    """Weak or strong scaling?"""
    if answer is None:
        return pending('"weak" or "strong"')
    before = EX3_BEFORE["gpus"] * EX3_BEFORE["batch_per_gpu"]
    after = EX3_AFTER["gpus"] * EX3_AFTER["batch_per_gpu"]
    return choice(answer, solution3(), ["weak", "strong"],
                  hint=f"The global batch was {before} and is {after}: compare the total work per step, "
                       "not the work per GPU.")


# ------------------------------------------------------------------ worked solutions (teacher)

def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed from the constants above
    (course.check.worked(1) prints them)."""
    from . import Worked
    t1, t2 = _t1(BATCH, EFFICIENCY), _t2()
    n, m, b_half = GPUS, GRADIENT_BYTES, HALF_BATCH
    one = Worked(
        1, "iteration time with overlap (ms)", solution1(), f"{solution1():.4g} ms", (
            f"t1 = F b / (P e) = {FLOPS_PER_SAMPLE / 1e9:g} GFLOP x {BATCH} / ({PEAK_TFLOPS:g} TFLOP/s x "
            f"{EFFICIENCY:g}) = {t1 * 1e3:.1f} ms",
            f"t2 = 2 (n-1)/n m / B = 2 x {n - 1}/{n} x {m / 1e6:g} MB / {NETWORK_GBS:g} GB/s = {t2 * 1e3:.1f} ms "
            "(the ring over the 10 GbE link between the two machines paces every step)",
            f"with overlap T = max(t1, t2) = {max(t1, t2) * 1e3:.1f} ms: communication is the slower part, "
            "so the GPUs wait for the network",
            f"the bracketed question: without overlap T = t1 + t2 = {(t1 + t2) * 1e3:.1f} ms"),
        wrong=((round((t1 + t2) * 1e3, 1), "adds the two costs: knows both formulas, not what overlap means"),
               (round(t1 * 1e3, 1), "took compute as the bottleneck without computing t2"),
               (round(2 * m / (NETWORK_GBS * 1e9) * 1e3, 1), "used 2 m / B: forgot the ring's (n-1)/n")),
        rubric=(f"{solution1():.4g} ms with t1 and t2 both shown and max() named; the no-overlap "
                f"figure {(t1 + t2) * 1e3:.1f} ms given too",
                "t1 and t2 right but combined wrongly (the sum), or one of them off by the (n-1)/n "
                "factor with the rule applied correctly",
                "a number without t1 and t2, or t2 computed for the PCIe links instead of the network"),
        rel=0.02)
    exact = t2 * PEAK_TFLOPS * 1e12 * EFFICIENCY / FLOPS_PER_SAMPLE - b_half
    two = Worked(
        2, "smallest whole batch per GPU with t1(b) >= t2", solution2(), f"{solution2()} samples per GPU", (
            f"with the curve, t1(b) = F b / (P e_max b / (b + b_half)) = F (b + b_half) / (P e_max): "
            f"a fixed cost of {b_half} samples' worth plus a cost per sample",
            f"t2 = {t2 * 1e3:.1f} ms as in exercise 1 (it does not depend on b)",
            f"t1(b) >= t2  <=>  b >= t2 P e_max / F - b_half = {exact + b_half:.2f} - {b_half} = {exact:.2f}",
            f"the smallest whole batch at or above it: {solution2()}"),
        wrong=((round(exact, 2), "the exact crossing, not rounded up: t1 is still just below t2 at that batch"),
               (round(exact + b_half), "ignored the efficiency curve (took e fixed at e_max)")),
        rubric=(f"{solution2()}, with t1(b) written as F (b + b_half) / (P e_max) and rounded up",
                f"the crossing {exact:.1f} without rounding up, or the right method with an arithmetic slip",
                "an answer that keeps e fixed, or one without the inequality"))
    before = EX3_BEFORE["gpus"] * EX3_BEFORE["batch_per_gpu"]
    after = EX3_AFTER["gpus"] * EX3_AFTER["batch_per_gpu"]
    three = Worked(
        3, "weak or strong scaling", solution3(), f"{solution3()!r}", (
            f"global batch before: {EX3_BEFORE['gpus']} GPUs x {EX3_BEFORE['batch_per_gpu']} = {before}; "
            f"after: {EX3_AFTER['gpus']} x {EX3_AFTER['batch_per_gpu']} = {after}",
            "the same global batch spread over more GPUs is strong scaling (weak scaling keeps the "
            "batch per GPU)",
            f"what to expect: each GPU's batch falls {EX3_BEFORE['batch_per_gpu'] // EX3_AFTER['batch_per_gpu']}-fold, "
            f"so t1 shrinks (and e(b) drops) while t2 does not: the speed-up stays well below "
            f"{EX3_AFTER['gpus'] // EX3_BEFORE['gpus']}x"),
        wrong=(("weak", "looked at the per-GPU work or the GPU count, not at the global batch"),),
        rubric=("'strong', with both global batches and the expectation that communication takes over",
                "'strong' without the expectation, or the right expectation under the wrong name",
                "'weak'"))
    return [one, two, three]
