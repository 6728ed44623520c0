"""Checkers for lecture 02: parameter server, ring, recursive doubling, halving-doubling.

    from course.check import lecture2
    lecture2.exercise1(answer)

The exercises' data are the constants below; the notebook states the same numbers. Right
answers come from dpsim.analytic's closed forms (exercises 1 and 2) and from dpsim runs
(exercise 3), never from copied output.
"""
import math

import dpsim
from dpsim import analytic

from . import Verdict, choice, close, number, pending

# d2l.ai "Parameter Servers": 160 MB of gradients, PCIe at 16 GB/s; here 8 GPUs.
GPUS = 8
GRADIENT_BYTES = 160e6
LINK_GBS = 16.0
# Exercise 2: one message GPU -> PCIe switch -> GPU crosses two hops of 1 us each.
ALPHA_S = 2e-6
# Exercise 3: the d2l scenario on 8 GPUs behind one PCIe switch.
EX3_STRATEGIES = ("ps", "sharded-ps", "ring", "recursive-doubling", "halving-doubling")
EX3_OVERRIDES = {"cluster.gpus_per_node": GPUS, "cluster.gpus_per_pcie_switch": GPUS,
                 "training.iterations": 1, "training.warmup_iterations": 0}


def solution1() -> float:
    """Exercise 1's answer: the parameter server's sync in ms."""
    return analytic.ps(GPUS, GRADIENT_BYTES, 0.0, 1 / (LINK_GBS * 1e9)) * 1e3


def solution2() -> float:
    """Exercise 2's answer: the crossover in KB."""
    return crossover_bytes() / 1e3


def bytes_sent():
    return {s: dpsim.simulate("d2l-ps-vs-ring", {**EX3_OVERRIDES, "sync.strategy": s}).bytes_sent_per_gpu
            for s in EX3_STRATEGIES}


def solution3(sent=None) -> str:
    """Exercise 3's answer: the strategy that sends the most bytes per GPU (`sent`: bytes_sent())."""
    sent = sent or bytes_sent()
    return max(sent, key=sent.get)


def exercise1(answer) -> Verdict:
    """Parameter server on GPU 0, 8 GPUs, 160 MB, 16 GB/s, latency and adds ignored: ms."""
    if answer is None:
        return pending("the sync time in ms")
    beta = 1 / (LINK_GBS * 1e9)
    expected_ms = solution1()
    verdict = close(answer, expected_ms, rel=0.02, unit=" ms")
    value = number(answer)
    if verdict.ok or value is None:
        return verdict
    one_way = (GPUS - 1) * GRADIENT_BYTES * beta * 1e3
    if math.isclose(value, one_way, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} ms is only the gather. The sum must also go back out to "
                              f"{GPUS - 1} GPUs through the same link.")
    if math.isclose(value, 2 * GPUS * GRADIENT_BYTES * beta * 1e3, rel_tol=0.02):
        return Verdict(False, f"{value:.4g} ms counts GPU 0 sending to itself: it has n - 1 partners.")
    return Verdict(False, verdict.message + " Hint: every byte in and out of GPU 0 crosses its one link.")


def crossover_bytes(n=GPUS, alpha=ALPHA_S, bandwidth_gbs=LINK_GBS):
    """Message size where a ring and recursive doubling cost the same (adds ignored)."""
    beta = 1 / (bandwidth_gbs * 1e9)

    def ring_minus_doubling(m):
        return analytic.ring(n, m, alpha, beta) - analytic.recursive_doubling(n, m, alpha, beta)

    lo, hi = 1.0, 1e12         # ring is slower at 1 byte (more steps), faster at 1 TB
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if ring_minus_doubling(mid) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def exercise2(answer) -> Verdict:
    """The gradient size in KB (1 KB = 1,000 bytes) at which ring and recursive doubling cost the same."""
    if answer is None:
        return pending("a size in KB")
    expected_kb = solution2()
    verdict = close(answer, expected_kb, rel=0.05, unit=" KB")
    value = number(answer)
    if value is not None and math.isclose(value, expected_kb * 1e3, rel_tol=0.05):
        return Verdict(False, f"{value:.4g} looks like bytes; give the size in KB (1 KB = 1,000 bytes)")
    if verdict.ok:
        return Verdict(True, verdict.message + ": below it recursive doubling's few steps win, above it the ring's few bytes")
    return Verdict(False, verdict.message + " Hint: write both costs for n = 8, set them equal, solve for m.")


def exercise3(answer) -> Verdict:
    """Which strategy sends the most bytes per GPU (mean over the GPUs) per iteration?"""
    if answer is None:
        return pending(f"one of {', '.join(EX3_STRATEGIES)}")
    sent = bytes_sent()
    expected = solution3(sent)
    verdict = choice(answer, expected, list(EX3_STRATEGIES),
                     hint="Count the bytes each GPU sends in every step, times the steps; "
                          "for the parameter server, average GPU 0 with the others.")
    if verdict.ok:
        table = ", ".join(f"{s} {b / 1e6:.0f} MB" for s, b in sent.items())
        return Verdict(True, f"{expected} ({table})")
    return verdict


# ------------------------------------------------------------------ worked solutions (teacher)

def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed from the constants above
    and dpsim.analytic (course.check.worked(2) prints them)."""
    from . import Worked
    n, m, beta = GPUS, GRADIENT_BYTES, 1 / (LINK_GBS * 1e9)
    gather = (n - 1) * m * beta
    one = Worked(
        1, "parameter server on GPU 0 (ms)", solution1(), f"{solution1():.4g} ms", (
            f"the other {n - 1} GPUs send their {m / 1e6:g} MB to GPU 0 through its one incoming link: "
            f"(n-1) m / B = {n - 1} x {m / 1e6:g} MB / {LINK_GBS:g} GB/s = {gather * 1e3:.1f} ms",
            f"GPU 0 sends the sum back to the {n - 1} through its one outgoing link: another {gather * 1e3:.1f} ms",
            f"T_ps = 2 (n-1) m / B = {2 * gather * 1e3:.1f} ms (latency and the adds ignored, as asked)"),
        wrong=((round(gather * 1e3, 1), "counted the gather only, not the broadcast of the sum"),
               (round(2 * n * m * beta * 1e3, 1), "counted GPU 0 as its own partner (n instead of n-1)")),
        rubric=(f"{solution1():.4g} ms, with both directions through GPU 0's link named",
                "one direction only, or n instead of n-1, with the link bottleneck understood",
                "a ring or sharded figure (2 (n-1)/n m / B), which misses that one link carries everything"),
        rel=0.02)
    steps_ring, steps_rd = 2 * (n - 1), math.log2(n)
    bytes_ring, bytes_rd = 2 * (n - 1) / n, math.log2(n)
    m_star = (steps_ring - steps_rd) * ALPHA_S / ((bytes_rd - bytes_ring) * beta)
    two = Worked(
        2, "ring against recursive doubling: the crossover (KB)", solution2(), f"{solution2():.4g} KB", (
            f"ring: 2(n-1) alpha + 2 (n-1)/n m beta = {steps_ring:g} alpha + {bytes_ring:g} m beta",
            f"recursive doubling: log2(n) (alpha + m beta) = {steps_rd:g} alpha + {bytes_rd:g} m beta",
            f"equal when ({steps_ring:g} - {steps_rd:g}) alpha = ({bytes_rd:g} - {bytes_ring:g}) m beta, so "
            f"m = {steps_ring - steps_rd:g} alpha B / {bytes_rd - bytes_ring:g} = {steps_ring - steps_rd:g} x "
            f"{ALPHA_S * 1e6:g} us x {LINK_GBS:g} GB/s / {bytes_rd - bytes_ring:g} = {m_star:,.0f} bytes "
            f"= {m_star / 1e3:.4g} KB",
            "below it recursive doubling's few steps win, above it the ring's few bytes"),
        wrong=((round(m_star), "the right size in bytes: the unit asked for is KB (1 KB = 1,000 bytes)"),),
        rubric=(f"{solution2():.4g} KB from both formulas written for n = {n} and set equal",
                "both formulas right but a slip solving them, or the answer in bytes or KiB",
                "a formula for either algorithm wrong (e.g. recursive doubling with the ring's bytes)"),
        rel=0.05)
    sent = bytes_sent()
    table = ", ".join(f"{s} {b / 1e6:.0f} MB" for s, b in sent.items())
    three = Worked(
        3, "which strategy sends the most bytes per GPU", solution3(sent), f"{solution3(sent)!r}", (
            f"ring, sharded ps and halving-doubling: every GPU sends 2 (n-1)/n m = {2 * (n - 1) / n * m / 1e6:.0f} MB",
            f"ps on GPU 0: GPU 0 sends (n-1) m = {(n - 1) * m / 1e6:.0f} MB, each other GPU m = {m / 1e6:.0f} MB; "
            f"the mean, 2 (n-1) m / n, is the ring's {2 * (n - 1) * m / n / 1e6:.0f} MB",
            f"recursive doubling: log2(n) steps of the whole m = {math.log2(n) * m / 1e6:.0f} MB, the most",
            f"dpsim's bytes_sent_per_gpu agrees: {table}"),
        wrong=(("ps", "looked at GPU 0's bytes, not the mean over the GPUs (the question asks for the mean)"),
               ("ring", "thinks more steps means more bytes")),
        rubric=(f"{solution3(sent)!r}, with the count m log2 n against 2 (n-1)/n m",
                "the right name without a count, or the counts right but the mean of ps misread",
                "any other strategy without a byte count"))
    return [one, two, three]
