"""Limits that no real study reaches but a typo does (a billion GPUs, a 1e308 bandwidth).

Each ends in one line naming the key, the limit and how to lift it; nothing is allocated
first. Set the environment variable DPSIM_NO_LIMITS=1 to lift the size limits (the range of
numbers stays: outside it the arithmetic itself breaks down).
"""
import math
import os
import sys

from .errors import ScenarioError

LIFT = "DPSIM_NO_LIMITS"

GPUS = 131_072            # the largest training clusters of 2024-25 have about 100,000 GPUs
GPUS_PER_NODE = 1_024
WORKERS = 1_024           # loader processes per training process
LAYERS = 100_000          # equal layers of a custom model
ITERATIONS = 100_000      # warm-up + measured; about a minute of simulation for a small cluster
TRACE_SPANS = 1_000_000   # about 150 MB of trace JSON
SWEEP_RUNS = 1_000        # rows of one sweep: GPU counts x every combination of --vary values
JOBS = 1_024              # --jobs; never more processes than cores are started (dpsim.sweeps)
SCENARIO_BYTES = 1 << 20  # a scenario file (the built-in ones are under 4 KB); not lifted

# Every non-zero number in a scenario, in its key's own unit (GB/s, TFLOP/s, ms, parameters):
# beyond these, products and quotients of the figures overflow or vanish.
SMALLEST, LARGEST = 1e-12, 1e30


def lifted() -> bool:
    return os.environ.get(LIFT) == "1"


def at_most(key, value, limit, what):
    if value > limit and not lifted():
        raise ScenarioError(key, f"{value:,} {what} is over the limit of {limit:,} (a guard against "
                                 f"typos; {LIFT}=1 lifts it)")


def in_range(key, value):
    """A number that the simulator's arithmetic can carry (zero allowed where the key allows it)."""
    if value and not SMALLEST <= abs(value) <= LARGEST:
        raise ScenarioError(key, f"{value!r} is outside the range dpsim computes with "
                                 f"({SMALLEST:g} to {LARGEST:g} in the key's unit)")


def check_numbers(key, value):
    """Every integer in a scenario (or a --set value) within float's range, found before any
    key's own rule converts or prints it: an integer of thousands of digits (a hex literal, say)
    is refused here without being written out. Each key's rule then applies its own range."""
    if isinstance(value, dict):
        for k, v in value.items():
            check_numbers(f"{key}.{k}" if key else str(k), v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            check_numbers(f"{key}[{i}]", v)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max:
        digits = int(value.bit_length() * math.log10(2)) + 1
        raise ScenarioError(key, f"an integer of about {digits:,} digits, past the largest number dpsim "
                                 f"computes with ({sys.float_info.max:.1e}; each key allows far less)")


def check_scenario(sc):
    c, t = sc.cluster, sc.training
    at_most("cluster.gpus_per_node", c.gpus_per_node, GPUS_PER_NODE, "GPUs per node")
    at_most("cluster.nodes", sc.gpus, GPUS, f"GPUs ({c.nodes:,} nodes x {c.gpus_per_node})")
    at_most("data.workers", sc.data.workers, WORKERS, "loader workers per training process")
    at_most("model.layers", sc.model.layers, LAYERS, "layers")
    longer = "training.iterations" if t.iterations >= t.warmup_iterations else "training.warmup_iterations"
    at_most(longer, t.iterations + t.warmup_iterations, ITERATIONS, "iterations (warm-up included)")


def check_finite(what, *values):
    """Results: a non-finite one means the figures were extreme, never a number to print."""
    if not all(math.isfinite(v) for v in values):
        raise ScenarioError(what, "the scenario's figures give a result that is not a finite number; "
                                  "look for an extreme value (a tiny bandwidth, a huge speed)")
