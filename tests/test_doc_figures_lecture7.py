"""The figures lecture 07's markdown states, computed again: from dpsim.memory's bytes per
parameter, dpsim.analytic's closed forms, presets, and dpsim runs made the way the lecture's code
cells make them. (Its two-rank run's figures are measured and change from machine to machine;
its code prints them beside the closed forms.)"""
import pytest

import dpsim
from dpsim import analytic, hardware, memory
from dpsim.vocabulary import ONEBIT_BLOCK

from doc_text import lecture, says

T = {"training.iterations": 2, "training.warmup_iterations": 1}
ONEBIT = 1 / 8 + 4 / ONEBIT_BLOCK


def test_memory_per_gpu_figures():
    text = lecture(7)
    states = memory.model_states(1.5e9, 1, "fp16", "adam")              # GPT-2, ZeRO section 3.1
    assert sum(states.values()) == pytest.approx(16 * 1.5e9)
    says(text, f"GPT-2 with 1.5 B parameters needs at least {sum(states.values()) / 1e9:.0f} GB",
         f"its FP16 parameters are {states['parameters'] / 1e9:.0f} GB",
         f"ZeRO-1 flattens out at the 4 bytes per parameter it never divides ({4 * 1.5:g} GB here), ZeRO-2 at 2 "
         f"({2 * 1.5:g} GB)")
    assert sum(memory.model_states(1.5e9, 1 << 20, "fp16", "adam", "zero1").values()) / 1e9 == pytest.approx(6, abs=0.02)
    figure1 = [sum(memory.model_states(7.5e9, 64, "fp16", "adam", s).values()) / 1e9
               for s in ("ring", "zero1", "zero2", "zero3")]
    says(text, f"7.5 B parameters on 64 GPUs: {figure1[0]:.0f}, {figure1[1]:.1f}, {figure1[2]:.1f} and "
               f"{figure1[3]:.1f} GB")
    says(text, f"eight P100s with {hardware.GPUS['p100'].memory_gb:.0f} GB each",
         f"the model states alone need {16 * 1.5:.0f} GB")


def test_sharding_bytes_are_the_closed_forms():
    n, m = 4, 1e9
    assert analytic.sharded_bytes_per_gpu(n, m, 1) == pytest.approx(2 * (n - 1) / n * m)
    assert analytic.sharded_bytes_per_gpu(n, m, 3) / analytic.sharded_bytes_per_gpu(n, m, 2) == pytest.approx(1.5)
    says(lecture(7), "$3\\,\\frac{N-1}{N}\\,m$, 1.5 times an all-reduce")


def test_powersgd_against_one_bit_figures():
    text = lecture(7)
    per_value = 4 * (4096 + 4096) * 1 / (4096 * 4096)
    says(text, f"$\\frac18 + \\frac{{4}}{{256}} = {ONEBIT:.4f}$ bytes per value",
         f"for a 4096 x 4096 layer at rank 1, {per_value:.3f} bytes, {ONEBIT / per_value:.0f} times fewer than 1-bit")
    slow = {c: dpsim.simulate("onebit-wins-ethernet", {**T, "sync.compression": c}) for c in ("1bit", "powersgd")}
    ratio = slow["1bit"].bytes_sent_per_gpu / slow["powersgd"].bytes_sent_per_gpu
    says(text, f"it sends {ratio:.0f} times fewer bytes than 1-bit")
    assert slow["powersgd"].iteration_time_s < slow["1bit"].iteration_time_s           # "wins by a hair"
    assert slow["powersgd"].breakdown_s["compression"] > slow["1bit"].breakdown_s["compression"]
    gbs = hardware.LINKS["10gbe"].achievable_gbs
    mb = slow["powersgd"].bytes_sent_per_gpu / 1e6
    says(text, f"({mb:.2f} MB take {mb / 1e3 / gbs * 1e3:.1f} ms at 10 GbE's {gbs:.2f} GB/s)")
    box = {c: dpsim.simulate("cntk-1bit-k80", {**T, "sync.compression": c}) for c in ("none", "1bit", "powersgd")}
    assert box["none"].iteration_time_s < box["powersgd"].iteration_time_s < box["1bit"].iteration_time_s
    says(text, f"(compression {box['powersgd'].breakdown_s['compression'] * 1e3:.2f} ms against 1-bit's "
               f"{box['1bit'].breakdown_s['compression'] * 1e3:.2f})")


def test_the_two_rank_runs_closed_forms():
    layers = [(64, 256), (256, 256), (256, 10)]
    params = sum(i * o + o for i, o in layers)
    says(lecture(7), f"10 classes: {params:,} parameters")
    ring = 2 * (2 - 1) / 2 * 4 * params
    powersgd = 2 * (2 - 1) / 2 * 4 * (sum(i + o for i, o in layers) + sum(o for _, o in layers))
    onebit = 2 * (2 - 1) / 2 * params * ONEBIT
    says(lecture(7), f"PowerSGD at rank 1 {ring / powersgd:.0f} times less, 1-bit {ring / onebit:.0f} times")
