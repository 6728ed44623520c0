"""Checkers for lecture 03, interconnects.

    from course.check import lecture3
    lecture3.exercise1(answer)

The exercises' data are the constants below; the notebook states the same numbers. Right
answers come from dpsim.hardware's presets with dpsim.analytic (exercise 1) and from dpsim
runs (exercises 2 and 3), never from copied output.
"""
import dpsim
from dpsim import analytic, hardware

from . import Verdict, choice, close, pending

# Exercise 1: ring all-reduce of ResNet-50's FP32 gradient on the 8 GPUs of one NVSwitch box.
EX1_GPUS = 8
EX1_LINK = "nvswitch"
EX1_MODEL = "resnet50"

# Exercise 2: 4 nodes of 8 A100s (NVSwitch inside, 100 GbE between), a 1 MB gradient.
EX2_GRADIENT_BYTES = 1e6
EX2_SCENARIO = {
    "name": "lecture3-exercise2",
    "cluster": {"nodes": 4, "gpus_per_node": 8, "gpu": "a100", "intra": "nvswitch",
                "host_link": "pcie4", "inter": "100gbe"},
    "model": {"params": int(EX2_GRADIENT_BYTES / 4), "flops_per_sample": 1e9, "layers": 1},
    "sync": {"bucket_mib": 0},
    "training": {"iterations": 1, "warmup_iterations": 0},
}

# Exercise 3: 2 nodes of 4 V100s on PCIe 3, 10 GbE between, ResNet-50 at 32 per GPU, ring.
EX3_SCENARIO = {
    "name": "lecture3-exercise3",
    "cluster": {"nodes": 2, "gpus_per_node": 4, "gpu": "v100", "intra": "pcie3",
                "host_link": "pcie3", "inter": "10gbe"},
    "model": {"preset": "resnet50"},
    "training": {"batch_per_gpu": 32, "iterations": 1, "warmup_iterations": 0},
    "sync": {"strategy": "ring"},
}
EX3_UPGRADES = {"inside": {"cluster.intra": "nvlink2"}, "network": {"cluster.inter": "100gbe"}}


def resnet50_gradient_bytes():
    return 4 * dpsim.load_scenario({"model": {"preset": EX1_MODEL}}).model_spec().params


def solution1() -> float:
    """Exercise 1's answer: the ring over the preset link at its achievable rate, in ms."""
    link = hardware.LINKS[EX1_LINK]
    alpha = 2 * link.latency_us * 1e-6          # GPU -> NVSwitch -> GPU: two hops
    return analytic.ring(EX1_GPUS, resnet50_gradient_bytes(), alpha, 1 / (link.achievable_gbs * 1e9)) * 1e3


def solution2(t=None) -> float:
    """Exercise 2's answer: flat ring over hierarchical (`t`: ex2_sync_times())."""
    t = t or ex2_sync_times()
    return t["ring"] / t["hierarchical"]


def upgrade_rates():
    return {k: dpsim.simulate(EX3_SCENARIO, ov).throughput_samples_per_s for k, ov in EX3_UPGRADES.items()}


def solution3(rate=None) -> str:
    """Exercise 3's answer: the upgrade that buys more samples/s (`rate`: upgrade_rates())."""
    rate = rate or upgrade_rates()
    return max(rate, key=rate.get)


def exercise1(answer) -> Verdict:
    """Ring all-reduce time in ms from the preset's figures (adds ignored)."""
    if answer is None:
        return pending("the sync time in ms")
    link = hardware.LINKS[EX1_LINK]
    expected_ms = solution1()
    verdict = close(answer, expected_ms, rel=0.03, unit=" ms")
    if verdict.ok:
        return verdict
    return Verdict(False, verdict.message + f" Hint: m = 4 bytes x ResNet-50's parameters, "
                          f"B = {link.achievable_gbs:g} GB/s per direction (achievable), alpha = 2 hops x {link.latency_us:g} us.")


def ex2_sync_times():
    return {s: dpsim.simulate(EX2_SCENARIO, {"sync.strategy": s}).sync_time_s for s in ("ring", "hierarchical")}


def exercise2(answer) -> Verdict:
    """How many times longer the flat ring takes than the hierarchical one."""
    if answer is None:
        return pending("the ratio flat / hierarchical")
    t = ex2_sync_times()
    expected = solution2(t)
    verdict = close(answer, expected, rel=0.05, unit="x")
    if verdict.ok:
        return Verdict(True, verdict.message + f": flat {t['ring'] * 1e3:.2f} ms, hierarchical "
                             f"{t['hierarchical'] * 1e3:.2f} ms; a 1 MB message is all latency")
    return Verdict(False, verdict.message + " Hint: simulate both strategies and divide the sync_time_s values.")


def exercise3(answer) -> Verdict:
    """Which single upgrade buys more throughput: "inside" the nodes or the "network"?"""
    if answer is None:
        return pending('"inside" or "network"')
    rate = upgrade_rates()
    expected = solution3(rate)
    verdict = choice(answer, expected, list(EX3_UPGRADES),
                     hint="Which link does every byte of the ring have to cross, and how fast is it?")
    if verdict.ok:
        return Verdict(True, f"{expected}: {rate[expected]:,.0f} samples/s against "
                             f"{min(rate.values()):,.0f}")
    return verdict


# ------------------------------------------------------------------ worked solutions (teacher)

def worked_solutions(result=None):
    """The three exercises worked step by step, every figure computed from the presets and dpsim
    runs above (course.check.worked(3) prints them)."""
    from . import Worked
    link, m, n = hardware.LINKS[EX1_LINK], resnet50_gradient_bytes(), EX1_GPUS
    alpha, beta = 2 * link.latency_us * 1e-6, 1 / (link.achievable_gbs * 1e9)
    latency_part, bytes_part = 2 * (n - 1) * alpha, 2 * (n - 1) / n * m * beta
    line_rate = 2 * (n - 1) / n * m / (link.bandwidth_gbs * 1e9) + latency_part
    one = Worked(
        1, "ring all-reduce of ResNet-50 on 8 NVSwitch GPUs (ms)", solution1(), f"{solution1():.4g} ms", (
            f"m = 4 bytes x {m // 4:,} parameters = {m / 1e6:.2f} MB",
            f"the preset: {link.bandwidth_gbs:g} GB/s per direction on paper, {link.achievable_gbs:g} GB/s "
            f"achievable; {link.latency_us:g} us per hop, so alpha = 2 hops = {alpha * 1e6:g} us",
            f"latency part 2 (n-1) alpha = {2 * (n - 1)} x {alpha * 1e6:g} us = {latency_part * 1e3:.3f} ms",
            f"bandwidth part 2 (n-1)/n m / B = 2 x {n - 1}/{n} x {m / 1e6:.2f} MB / {link.achievable_gbs:g} GB/s "
            f"= {bytes_part * 1e3:.3f} ms",
            f"together {(latency_part + bytes_part) * 1e3:.4g} ms: the bytes dominate, latency adds a few percent"),
        wrong=((round(line_rate * 1e3, 3), f"used the {link.bandwidth_gbs:g} GB/s on paper instead of the "
                                           "achievable rate"),),
        rubric=(f"{solution1():.4g} ms, with the achievable rate and both terms",
                "the right method with the paper bandwidth, or with one hop of latency",
                "a figure without the ring's 2 (n-1)/n, or with FP16 bytes"),
        rel=0.03)
    t = ex2_sync_times()
    c = EX2_SCENARIO["cluster"]
    nodes, g = c["nodes"], c["gpus_per_node"]
    inter = hardware.LINKS[c["inter"]]
    two = Worked(
        2, "flat ring over hierarchical all-reduce (ratio)", solution2(t), f"{solution2(t):.4g}x", (
            f"dpsim: flat ring {t['ring'] * 1e3:.3f} ms, hierarchical {t['hierarchical'] * 1e3:.3f} ms "
            f"(sync_time_s of the two runs); {t['ring'] * 1e3:.3f} / {t['hierarchical'] * 1e3:.3f} = {solution2(t):.3g}",
            f"the flat ring over all {nodes * g} GPUs takes 2 (Ng-1) = {2 * (nodes * g - 1)} steps, each as slow "
            f"as its slowest hop: the network ({inter.latency_us:g} us per message on {c['inter']})",
            f"hierarchical: a ring inside each node (2 (g-1) = {2 * (g - 1)} NVSwitch steps, about "
            f"{link.latency_us:g} us a hop), 2 (N-1) = {2 * (nodes - 1)} network steps, and the ring inside again",
            f"a {EX2_GRADIENT_BYTES / 1e6:g} MB message is all latency, so the ratio follows the network step "
            f"counts ({2 * (nodes * g - 1)} against {2 * (nodes - 1)}) more than the bytes"),
        wrong=((round(t["hierarchical"] / t["ring"], 3), "divided the other way round (hierarchical / flat)"),),
        rubric=(f"about {solution2(t):.3g}x from the two simulated times, explained by the network step counts",
                "the ratio without the step-count explanation, or the explanation with a slip in the ratio",
                "a ratio below 1, or a bandwidth explanation for a message this small"),
        rel=0.05)
    rate = upgrade_rates()
    base = dpsim.simulate(EX3_SCENARIO).throughput_samples_per_s
    three = Worked(
        3, "which upgrade buys more throughput", solution3(rate), f"{solution3(rate)!r}", (
            f"as it is: {base:,.0f} samples/s; NVLink 2 inside: {rate['inside']:,.0f}; 100 GbE between: "
            f"{rate['network']:,.0f} (dpsim runs of EX3_SCENARIO)",
            f"every byte of the ring crosses the slowest hop once per step: here {EX3_SCENARIO['cluster']['inter']} "
            f"between the nodes, far slower than {EX3_SCENARIO['cluster']['intra']} inside them",
            "speeding up the inside links leaves the slowest hop as it was: the ring's pace does not change"),
        wrong=(("inside", "thinks the ring is as fast as its average link, not its slowest"),),
        rubric=(f"{solution3(rate)!r}, reasoned from the slowest hop before running dpsim",
                f"{solution3(rate)!r} only from the simulation, without the reason",
                "'inside'"))
    return [one, two, three]
