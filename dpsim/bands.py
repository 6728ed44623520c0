"""Bands: a prediction that says how sure it is, from ranges on the scenario's numbers.

Any numeric key of a scenario, inside an inline table too (cluster.gpu, cluster.intra), may be
written as a range:

    [cluster]
    intra = {bandwidth_gbs = {value = 12.5, low = 11, high = 13}, latency_us = 5, kind = "pcie"}

    dpsim run my.toml --set compute.efficiency='{value = 0.5, low = 0.45, high = 0.55}'

Loading takes the ranges out (`split`): the scenario holds the values, so everything that
reads a scenario reads it as before, and the ranges are kept beside it (`Ranged`).
`propagate` then evaluates the scenario at points of the box the ranges span and gives, for
each result, its band: the least and the most of the iteration time, throughput and
speed-up over the points evaluated, the nominal run included.

A scenario may also carry the joint points its ranges were measured at, one table per
measurement (course calibrate writes one per round, each round's own fit of every figure):

    [[samples]]
    cluster.timeslice_us = 5230.0
    compute.jitter = 0.031

Every key of a sample must be a ranged key; the keys a sample leaves out stay at their values.

Which points, and why:
  samples given                   each sample, its keys together (n runs): the figures of one
                                  measurement moved together, so their ends are not put
                                  together where no measurement put them. Where the samples
                                  and a new run are exchangeable (drawn alike from the same
                                  machine), the new run's time falls outside the range of the
                                  n samples' with probability 2/(n+1): n = 19 makes the band a
                                  distribution-free 90% prediction interval (Wilks, Ann. Math.
                                  Statist. 12(1), 1941). A compare's run is only like one
                                  more round where the machine has not drifted since, and the
                                  band carries none of the model's own error.
  few ranged keys (at most FEW)   every corner: each key at its low or its high end, 2^k runs
  more                            each key alone at either end (2k runs), which shows which
                                  end of each key is the slow one; then the two corners of
                                  every key at its slow end and every key at its fast end; and
                                  DRAWS points drawn uniformly from the box (seed SEED, the
                                  same on every run) as a check on that reading
The bounds are exact where the iteration time is monotone in each key, one direction for the
whole box: more bandwidth, FLOP/s or efficiency is never slower, more latency or per-message
cost never faster. That is the assumption, not a theorem: a key whose effect turns round
inside its range (a bucket size, a key that changes which link is the bottleneck) can put the
slowest point inside the box, and the band then covers only the points evaluated. The
speed-up is a ratio of two runs at the same point; its band is its least and most over the
points, with no such guarantee.
"""
import copy
import itertools
import math
import random
from dataclasses import dataclass

from .errors import ScenarioError

RANGE_KEYS = ("value", "low", "high")
FEW = 3                  # at most 2^3 = 8 corners; more keys take 2k + 2 + DRAWS runs instead
DRAWS = 8
SEED = 0
QUANTITIES = ("iteration_time_s", "throughput_samples_per_s", "speedup")
EXAMPLE = "{value = 12.5, low = 11, high = 13}"


def is_range(v) -> bool:
    """A table of only value, low and high (some may be missing: that is an error, not a table)."""
    return isinstance(v, dict) and bool(v) and set(v) <= set(RANGE_KEYS)


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def checked_range(key: str, r: dict) -> tuple:
    """(low, value, high) of a range, or ScenarioError naming the key."""
    missing = [k for k in RANGE_KEYS if k not in r]
    if missing:
        raise ScenarioError(key, f"a range needs value, low and high (missing {', '.join(missing)}), e.g. {EXAMPLE}")
    for k in RANGE_KEYS:
        if not _number(r[k]):
            raise ScenarioError(key, f"{k} of a range must be a number, got {r[k]!r}")
        if not math.isfinite(r[k]):
            raise ScenarioError(key, f"{k} of a range must be finite, got {r[k]!r}")
    low, value, high = (r[k] for k in ("low", "value", "high"))
    if not low <= value <= high:
        raise ScenarioError(key, f"a range needs low <= value <= high, got low = {low:g}, value = {value:g}, "
                            f"high = {high:g}")
    return low, value, high


@dataclass(frozen=True)
class Ranged:
    """A scenario's dict with its ranges apart: `data` holds every ranged key at its value,
    `ranges` {dotted key: (low, value, high)}, e.g. {"cluster.intra.bandwidth_gbs": (11, 12.5, 13)},
    `samples` the joint points measured, each {dotted key: value} of ranged keys."""
    data: dict
    ranges: dict
    samples: tuple = ()

    def at(self, point: dict) -> dict:
        """A copy of data with the dotted keys of `point` set to its values."""
        out = copy.deepcopy(self.data)
        for key, value in point.items():
            put(out, key, value)
        return out

    def without(self, keys) -> "Ranged":
        """The same, with every range and sample value at or under one of `keys` left out (the
        keys a sweep varies): they take the values given them instead."""
        ranges = {k: r for k, r in self.ranges.items() if not under(k, keys)}
        kept = tuple(p for s in self.samples if (p := {k: v for k, v in s.items() if k in ranges}))
        return Ranged(self.data, ranges, kept)

    def to_dict(self) -> dict:
        """The ranges as --json prints them: {key: {value, low, high}}."""
        return {k: {"value": v, "low": lo, "high": hi} for k, (lo, v, hi) in self.ranges.items()}


def under(key: str, tables) -> bool:
    """Whether the dotted key is one of `tables` or inside one of them."""
    return any(key == t or key.startswith(f"{t}.") for t in tables)


def put(table: dict, key: str, value):
    """Set the dotted key in a nested table, in place, making the tables on its path."""
    *path, last = key.split(".")
    for part in path:
        table = table.setdefault(part, {})
    table[last] = value


def dotted(table: dict, prefix="") -> dict:
    """{dotted key: value} of a nested table's leaves."""
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def checked_samples(samples, ranges, given=()) -> tuple:
    """The [[samples]] tables as ({dotted key: value}, ...), or ScenarioError naming the sample.
    A key the scenario gives a plain value (`given`: an override, --set, a preset in place of the
    table above it) keeps that value: it leaves every sample."""
    if not isinstance(samples, list) or not all(isinstance(t, dict) for t in samples):
        raise ScenarioError("samples", f"expected a list of tables ([[samples]]), got {samples!r}")
    out = []
    for i, table in enumerate(samples):
        point = {k: v for k, v in dotted(table).items() if k in ranges or not under(k, given)}
        for key, v in point.items():
            if key not in ranges:
                raise ScenarioError(f"samples[{i}].{key}", "a sample may set only ranged keys ({value, low, high}); "
                                    f"ranged here: {', '.join(ranges) or 'none'}")
            if not _number(v) or not math.isfinite(v):
                raise ScenarioError(f"samples[{i}].{key}", f"expected a finite number, got {v!r}")
        out.append(point)
    return tuple(out)


def split(data: dict) -> Ranged:
    """Take every range (any depth) and the samples out of a scenario dict, checking each."""
    ranges = {}

    def walk(table, prefix):
        out = {}
        for k, v in table.items():
            key = f"{prefix}{k}"
            if is_range(v):
                ranges[key] = checked_range(key, v)
                out[k] = ranges[key][1]
            elif isinstance(v, dict):
                out[k] = walk(v, f"{key}.")
            else:
                out[k] = v
        return out
    if not isinstance(data, dict):
        return Ranged(data, ranges)
    rest = walk({k: v for k, v in data.items() if k != "samples"}, "")
    if "samples" not in data:
        return Ranged(rest, ranges)
    given = [k for k in dotted(rest) if k not in ranges]
    return Ranged(rest, ranges, checked_samples(data["samples"], ranges, given))


def check_ends(ranged: Ranged, build):
    """Each key at its low end and at its high end, the others at their values, must be a
    scenario `build` (dpsim.config.from_dict) accepts: a bandwidth's low end must be positive
    as the bandwidth must. The error names the key and the end."""
    for key, (low, _, high) in ranged.ranges.items():
        for name, end in (("low", low), ("high", high)):
            try:
                build(ranged.at({key: end}))
            except ScenarioError as e:
                why = str(e).removeprefix(f"{e.key}: ") if e.key else str(e)
                raise ScenarioError(key, f"the range's {name} end {end:g} is not allowed: {why}") from None
    for i, point in enumerate(ranged.samples):
        try:
            build(ranged.at(point))
        except ScenarioError as e:
            raise ScenarioError(f"samples[{i}]", f"not allowed: {e}") from None


# ------------------------------------------------------------------ propagation

def _draw(rng, low, value, high):
    """A uniform draw from [low, high]; whole numbers stay whole."""
    if all(isinstance(x, int) for x in (low, value, high)):
        return rng.randint(low, high)
    return rng.uniform(low, high)


def corners(ranges: dict) -> list:
    """Every key at its low or high end: 2^k points."""
    keys = list(ranges)
    return [dict(zip(keys, ends)) for ends in itertools.product(*((ranges[k][0], ranges[k][2]) for k in keys))]


def draws(ranges: dict, n=DRAWS, seed=SEED) -> list:
    rng = random.Random(seed)
    return [{k: _draw(rng, *r) for k, r in ranges.items()} for _ in range(n)]


def propagate(ranged: Ranged, evaluate, nominal: list) -> dict:
    """The band of every result. evaluate(dict) -> a list of results (one per row: a run gives
    one, a sweep its rows), each with iteration_time_s, throughput_samples_per_s and speedup;
    `nominal`: that list at the values. Returns {"bands": [{quantity: {low, high}} per row],
    "method", "points"} (see the module docstring for which points and why)."""
    r = ranged.ranges
    if ranged.samples:
        outcomes = [evaluate(ranged.at(p)) for p in ranged.samples]
        method = f"the {len(outcomes)} measured samples, each with its keys together"
    elif len(r) <= FEW:
        outcomes, method = [evaluate(ranged.at(p)) for p in corners(r)], "corners"
    else:
        ends = {k: (lo, hi) for k, (lo, _, hi) in r.items()}
        alone = {(k, e): evaluate(ranged.at({k: e})) for k, pair in ends.items() for e in pair}
        total = {key: sum(x.iteration_time_s for x in out) for key, out in alone.items()}
        slow = {k: lo if total[(k, lo)] >= total[(k, hi)] else hi for k, (lo, hi) in ends.items()}
        fast = {k: hi if slow[k] == lo else lo for k, (lo, hi) in ends.items()}
        outcomes = [*alone.values(), evaluate(ranged.at(slow)), evaluate(ranged.at(fast)),
                    *(evaluate(ranged.at(p)) for p in draws(r))]
        method = "each key at either end, the slowest and fastest corners, and seeded draws from the box"
    bands = []
    for i, mid in enumerate(nominal):
        seen = [mid] + [out[i] for out in outcomes]
        bands.append({q: {"low": min(getattr(x, q) for x in seen), "high": max(getattr(x, q) for x in seen)}
                      for q in QUANTITIES})
    return {"bands": bands, "method": method, "points": len(outcomes)}


# ------------------------------------------------------------------ printing

def json_keys(ranged, band, row=0) -> dict:
    """--json's keys for one row: "bands" {quantity: {low, high}}, "ranges" {key: {value, low,
    high}} and "band_method"; {} without ranges, so such output is as it always was."""
    if not band:
        return {}
    return {"bands": band["bands"][row], "ranges": ranged.to_dict(),
            "band_method": f"{band['points']} runs: {band['method']} (dpsim/bands.py)"}


def describe(ranged: Ranged, band: dict) -> str:
    keys = ", ".join(ranged.ranges)
    return f"band over {len(ranged.ranges)} ranged keys ({keys}): {band['points']} runs, {band['method']}"


def run_lines(res, band: dict) -> list:
    """`dpsim run`'s lines: the value, then its band."""
    b = band["bands"][0]
    it, tp, sp = (b[q] for q in QUANTITIES)
    return [f"  iteration      {res.iteration_time_s * 1e3:10.3f} ms         band {it['low'] * 1e3:.3f} - "
            f"{it['high'] * 1e3:.3f} ms",
            f"  throughput     {res.throughput_samples_per_s:10,.0f} samples/s  band {tp['low']:,.0f} - "
            f"{tp['high']:,.0f} samples/s",
            f"  speed-up       {res.speedup:10.2f} x          band {sp['low']:.2f} - {sp['high']:.2f} x"]


def sweep_lines(rows, band: dict, label) -> list:
    """`dpsim sweep`'s band table: one line per row, label(settings, result) naming it."""
    out = [f"{'row':<32} {'iteration ms (band)':>28} {'samples/s (band)':>30} {'speed-up (band)':>22}"]
    for (settings, r), b in zip(rows, band["bands"]):
        it, tp, sp = (b[q] for q in QUANTITIES)
        ms = f"{r.iteration_time_s * 1e3:.3f} ({it['low'] * 1e3:.3f}-{it['high'] * 1e3:.3f})"
        rate = f"{r.throughput_samples_per_s:,.0f} ({tp['low']:,.0f}-{tp['high']:,.0f})"
        speedup = f"{r.speedup:.2f} ({sp['low']:.2f}-{sp['high']:.2f})"
        out.append(f"{label(settings, r):<32} {ms:>28} {rate:>30} {speedup:>22}")
    return out
