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
