"""How sure calibrate is of each figure: the profile fitted from each round alone, and the
spread of those fits.

calibrate probes the machine in rounds (course/measurements.py). `calibrate.profile_dict`
fits the profile from all of them (medians over the rounds); here the same fits run on each
round alone (`round_sidecar`: that round's probes, with the one-process timings every round
shares, but its loop timed at that round's moment alone), and each figure of the profile
that moves between rounds gets a range:

    value   the fit from all rounds, as before
    low     the 10th percentile of the per-round fits (or the value, if that is lower)
    high    the 90th percentile (or the value, if that is higher)

written into the profile as {value, low, high}, which dpsim reads as a range (dpsim/bands.py).
The sidecar keeps each figure's per-round fits and their median.

The noise verdict. On a quiet machine a round's fits stay close to the others'; another
program running takes cores from some rounds and not others, and the rounds disagree. A
figure of LIMITS whose 10-90% range spans more than its limit (high / low) is noisy. The
limits are set from the quiet-machine figures we have: the compute moments of a quiet 2-core
machine stay within 1.15 of each other (course/measurements.py: unsteady), and the message
cost of quiet calibrations within 1.8x (215-387 us, issue 28); each limit leaves room above.
The other figures (jitter, half_batch, the codec's, the link's bandwidth, whose best round
is taken) move far more between rounds on any machine, or are too small for a ratio to mean
much: they get their range, not a verdict.
"""
import copy
import math

import numpy as np

from dpsim import bands

LIMITS = {
    "compute.efficiency": 1.3,              # the run's compute rate
    "cluster.devices_per_node": 1.3,        # the cores the ranks get: another program takes some
    "sync.message_overhead_us": 2.0,        # a message in the loop's rhythm
}
SECTIONS = ("cluster", "compute", "sync")    # the machine's figures; model and training are given, not measured
FIXED = ("cluster.cpu_cores",)               # counted, not timed


class Noisy(Exception):
    """Figures whose rounds still disagree after measuring again: one line saying which and what to do."""


def rounds_of(m) -> int:
    probes = m.get("probes") or {}
    return min((len(v) for v in probes.values()), default=0)


def round_sidecar(m, r):
    """The sidecar as if calibrate had probed only round r (the one-process timings kept, but
    the loop's moments at the run's batch are the round's own 1-rank probe's:
    measurements.compute_moments)."""
    return {**m, "probes": {n: [rounds[r]] for n, rounds in m["probes"].items()}, "round": r}


def numbers(d, prefix=""):
    """{dotted key: value} of every number in a profile's machine sections (not bools, not FIXED)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and (prefix or k in SECTIONS):
            out.update(numbers(v, f"{key}."))
        elif prefix and isinstance(v, (int, float)) and not isinstance(v, bool) and key not in FIXED:
            out[key] = v
    return out


def figure_spreads(m, prof, fit, allowed=None, fits=None) -> dict:
    """{dotted key: {"value", "low", "high", "median", "rounds"}} for every figure of `prof` (the
    profile from all rounds) that moves between the per-round fits, fit(sidecar) -> profile
    (`fits`: round_fits(m, fit), where the caller has them already).
    allowed(key, x): whether dpsim takes x for the key; a round whose fit it would refuse (one
    that hit a floor of 0 where the key must be above it) is left out of the range."""
    if rounds_of(m) < 2:
        return {}
    per_round = round_fits(m, fit) if fits is None else fits
    out = {}
    for key, value in numbers(prof).items():
        seen = [p[key] for p in per_round if key in p and math.isfinite(p[key])
                and (allowed is None or allowed(key, p[key]))]
        if len(seen) < 2 or min(seen) == max(seen):
            continue
        p10, p90 = np.percentile(seen, [10, 90])
        # rounded first, then held to the value: a value of more digits than _round keeps
        # (5637.364 us) must not fall outside its own range
        out[key] = {"value": value, "low": min(_round(p10), value), "high": max(_round(p90), value),
                    "median": float(np.median(seen)), "rounds": seen}
    return out


def round_fits(m, fit) -> list:
    """The numbers of each round's own profile, fit(round_sidecar) (rounds dpsim refuses left out)."""
    return [fitted for r in range(rounds_of(m)) if (fitted := _fit_round(fit, m, r)) is not None]


def samples(fits, spreads) -> list:
    """Each round's own fit of the spread figures (fits: round_fits), one {dotted key: value}
    per round: the joint points dpsim's band takes together (dpsim/bands.py, [[samples]]). A
    figure a round's fit does not give, or gives where its range leaves it out, stays at its
    value in that round."""
    out = []
    for fitted in fits:
        point = {k: fitted[k] for k, s in spreads.items() if k in fitted and fitted[k] in s["rounds"]}
        if point:
            out.append(point)
    return out


def _fit_round(fit, m, r):
    """The numbers of round r's own profile; None where dpsim refuses the machine that round
    alone describes (a time slice fitted as 0, which a later fit runs through dpsim)."""
    from dpsim.errors import ScenarioError
    try:
        return numbers(fit(round_sidecar(m, r)))
    except ScenarioError:
        return None


def dpsim_allows(scenario):
    """allowed(key, x) for figure_spreads: dpsim accepts `scenario` (a full scenario dict) with
    the dotted key set to x."""
    from dpsim.config import from_dict
    from dpsim.errors import ScenarioError
    plain = bands.Ranged(values(scenario), {})

    def allowed(key, x):
        try:
            from_dict(plain.at({key: x}))
        except (ScenarioError, KeyError, TypeError):
            return False
        return True
    return allowed


def _round(x):
    return float(f"{x:.6g}")


def noisy(spreads) -> list:
    """[(key, spread)] of the LIMITS figures whose 10-90% range spans more than their limit."""
    out = []
    for key, limit in LIMITS.items():
        s = spreads.get(key)
        if s and span(s) > limit:
            out.append((key, s))
    return out


def span(s):
    """high / low of a figure's 10-90% range (inf where low is 0 and high is not)."""
    low, high = s["low"], s["high"]
    return high / low if low > 0 else (math.inf if high > 0 else 1.0)


def with_ranges(prof, spreads, joint=()) -> dict:
    """A copy of the profile with every spread figure written {value, low, high}, and the
    rounds' joint points (`samples`) as its [[samples]] tables where given."""
    out = copy.deepcopy(prof)
    if joint:
        out["samples"] = [nested(point) for point in joint]
    for key, s in spreads.items():
        bands.put(out, key, {"value": s["value"], "low": s["low"], "high": s["high"]})
    return out


def nested(point) -> dict:
    """{dotted key: value} as nested tables, as TOML's dotted keys read back."""
    out = {}
    for key, v in point.items():
        bands.put(out, key, v)
    return out


def values(prof) -> dict:
    """The profile with every range replaced by its value (as dpsim reads it)."""
    return bands.split(prof).data


def verdict(found, load=None) -> str:
    """The one line calibrate ends with when figures still disagree after measuring twice."""
    parts = [f"{key} took {', '.join(f'{x:.4g}' for x in s['rounds'])} in its rounds (10-90% range "
             f"{span(s):.2f}x apart, the limit is {LIMITS[key]:g}x)" for key, s in found]
    busy = load_text(load)
    return ("the rounds of the measurement disagree, measured twice: " + "; ".join(parts)
            + (f"; {busy}" if busy else "") + ". Close other programs, run `python -m course doctor`, "
            "then calibrate again (--accept-noisy writes the profile anyway)")


def load_text(load) -> str:
    """Monitor.summary() in words, or '' where the load could not be read."""
    others = (load or {}).get("others_cores")
    if not others:
        return ""
    queue = load.get("run_queue")
    return (f"other programs used {others['mean']:.2f} cores on average (at most {others['max']:.2f})"
            + (f", run queue {queue['mean']:.1f} on average (at most {queue['max']:.0f})" if queue else "")
            + " while it measured")
