"""compare's rows against the predicted band: does the measurement fall in it?

The profile's rounds (calibrate's [[samples]], each round's own fit of every figure,
course/spread.py) go through dpsim as a band on each configuration's iteration time and
speed-up: the least and most of the rounds' predictions (dpsim/bands.py; course/compare.py:
predicted_bands). A profile with ranges but no samples gets the band of its ranges' box. Each
row then says

    in band   the measured median falls between the band's low and high
    overlap   the band meets the runs' own range (the fastest to the slowest run)

and the summary gives the coverage, the share of rows in band, beside the median |error|: a
prediction whose error is mostly the machine's own noise has a band that covers the runs; one
whose model is wrong misses them however wide the runs spread.
"""
from course.spread import load_text


def add_band(row, band):
    """The predicted band beside the runs: whether the measured median falls in it, and whether
    it overlaps the runs' range (slowest to fastest). Nothing where the profile has no ranges."""
    if band is None:
        return
    times = [r["measured_iteration_s"] for r in row["runs"]]
    low, high = band["iteration_time_s"]["low"], band["iteration_time_s"]["high"]
    row["predicted_band_s"] = {"low": low, "high": high}
    row["measured_range_s"] = {"low": min(times), "high": max(times)}
    row["in_band"] = low <= row["measured_iteration_s"] <= high
    row["overlap"] = low <= max(times) and min(times) <= high
    if row.get("predicted_speedup") is not None:
        sp = band["speedup"]
        row["predicted_speedup_band"] = {"low": min(sp["low"], row["predicted_speedup"]),
                                         "high": max(sp["high"], row["predicted_speedup"])}


def summary(rows, method):
    """Coverage: the share of rows whose measured median falls in the predicted band; and the
    widest band, as the most it reaches below and above its prediction."""
    banded = [r for r in rows if "in_band" in r]
    if not banded:
        return {}
    below = max(1 - r["predicted_band_s"]["low"] / r["predicted_iteration_s"] for r in banded)
    above = max(r["predicted_band_s"]["high"] / r["predicted_iteration_s"] - 1 for r in banded)
    return {"coverage": sum(r["in_band"] for r in banded) / len(banded), "band_method": method,
            "widest_band": {"below": below, "above": above}}


def table(result, name_of):
    """Each row's predicted band against its runs, and the coverage beside the median error;
    nothing for a profile without ranges. Then the machine's load while the runs measured."""
    busy = load_text(result.get("machine_load"))
    if "coverage" not in result:
        return [f"  {busy}"] if busy else []
    lines = ["", f"{'configuration':<22} {'predicted ms (band)':>24} {'measured ms (runs)':>24} {'in band':>8} "
             f"{'overlap':>8}"]
    for r in result["rows"]:
        if "in_band" not in r:
            continue
        b, m = r["predicted_band_s"], r["measured_range_s"]
        pred = f"{r['predicted_iteration_s'] * 1e3:.2f} ({b['low'] * 1e3:.2f}-{b['high'] * 1e3:.2f})"
        meas = f"{r['measured_iteration_s'] * 1e3:.2f} ({m['low'] * 1e3:.2f}-{m['high'] * 1e3:.2f})"
        lines.append(f"{name_of(r['ranks'], r['sync'], r['compress']):<22} {pred:>24} {meas:>24} "
                     f"{'yes' if r['in_band'] else 'no':>8} {'yes' if r['overlap'] else 'no':>8}")
    rows, wide = [r for r in result["rows"] if "in_band" in r], result["widest_band"]
    lines.append(f"coverage {100 * result['coverage']:.0f}% ({sum(r['in_band'] for r in rows)} of {len(rows)} "
                 f"measured medians in the predicted band) beside median |error| "
                 f"{100 * result['median_abs_error']:.1f}%; the widest band reaches {100 * wide['below']:.0f}% below "
                 f"and {100 * wide['above']:.0f}% above its prediction")
    lines.append(f"  band: {result['band_method']} (dpsim/bands.py); overlap: the band meets the runs' "
                 f"slowest-to-fastest range")
    return lines + ([f"  {busy}"] if busy else [])
