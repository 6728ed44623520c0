"""Predict stored runs again: a profile rebuilt from a stored calibration, set against the
measurements of stored compares, without measuring anything.

    python -m course.repredict course/measured/2026-11-25-quiet/profile.measured.json \
        course/measured/2026-11-25-quiet/compare1.json [more compare JSONs]

The profile is calibrate.profile_dict of the sidecar (so it follows the fits of the code as it
is now), each range at its value; every row of each compare JSON is simulated again from it
(compare.scenario_for: the configuration, the run's batch) and set against the row's measured
median iteration time and speed-ups, as compare does. The measurements never enter the
profile: they were taken after the calibration, and the fits read only the sidecar. This is
how a change to dpsim or to calibrate's fits is checked against runs already on disk; a
new compare is still the test of a prediction.
"""
import argparse
import json
import statistics

from course import calibrate, compare, spread


def profile_from_sidecar(path, ranges=False):
    """The profile calibrate would write from the sidecar at `path` today (profile_of)."""
    with open(path) as f:
        return profile_of(json.load(f), ranges)


def profile_of(m, ranges=False):
    """The profile calibrate would write from the sidecar `m` today: each range at its value,
    or (ranges=True) with the {value, low, high} ranges of its rounds (course.spread)."""
    prof = calibrate.profile_dict(m)
    if not ranges:
        return spread.values(prof)
    allowed = spread.dpsim_allows(compare.scenario_for(prof, 2, "ring", "none"))
    fits = spread.round_fits(m, calibrate.profile_dict)
    spreads = spread.figure_spreads(m, prof, calibrate.profile_dict, allowed, fits)
    return spread.with_ranges(prof, spreads, spread.samples(fits, spreads))


def coverage(ranged, result, batch):
    """The share of the compare's rows whose measured median falls in the band dpsim predicts
    from the ranged profile (compare.predicted_bands), and the widest band (below, above)."""
    import dpsim
    configs = [(r["ranks"], r["sync"], r["compress"]) for r in result["rows"]]
    predicted = {c: dpsim.simulate(compare.scenario_for(spread.values(ranged), *c, batch=batch)) for c in configs}
    bands, _ = compare.predicted_bands(ranged, configs, predicted, batch)
    inside, below, above = [], 0.0, 0.0
    for c, row in zip(configs, result["rows"]):
        band, value = bands[c]["iteration_time_s"], predicted[c].iteration_time_s
        inside.append(band["low"] <= row["measured_iteration_s"] <= band["high"])
        below, above = max(below, 1 - band["low"] / value), max(above, band["high"] / value - 1)
    return sum(inside) / len(inside), (below, above)


def repredict(prof, result, batch):
    """[(row, predicted iteration s, error, speed-up error or None)] for a compare JSON's rows."""
    import dpsim
    out, base = [], None
    for row in result["rows"]:
        predicted = dpsim.simulate(compare.scenario_for(prof, row["ranks"], row["sync"], row["compress"],
                                                        batch=batch)).iteration_time_s
        if row["ranks"] == 1:
            base = (predicted, row["measured_iteration_s"])
        error = predicted / row["measured_iteration_s"] - 1
        speedup_error = None
        if row["ranks"] > 1 and base:
            predicted_speedup = row["ranks"] * base[0] / predicted
            speedup_error = predicted_speedup / row["measured_speedup"] - 1
        out.append((row, predicted, error, speedup_error))
    return out


def summary(rows):
    """(median |error|, worst |error|, median |speed-up error|) of repredict's rows."""
    errors = [abs(e) for _, _, e, _ in rows]
    speedups = [abs(s) for _, _, _, s in rows if s is not None]
    return statistics.median(errors), max(errors), statistics.median(speedups) if speedups else None


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course.repredict", description=__doc__.split("\n")[0])
    parser.add_argument("sidecar", help="a calibration's profile.measured.json")
    parser.add_argument("compares", nargs="+", help="compare --json files measured after it")
    parser.add_argument("--batch", type=int, default=None, help="samples per rank (default: the calibration's)")
    parser.add_argument("--bands", action="store_true", help="also the band of each prediction from the "
                                                             "calibration's rounds, and the coverage")
    args = parser.parse_args(argv)
    with open(args.sidecar) as f:
        m = json.load(f)
    batch = args.batch or m["batch"]
    ranged = profile_of(m, ranges=True) if args.bands else None
    prof = profile_of(m) if ranged is None else spread.values(ranged)     # the same fits, once
    for path in args.compares:
        with open(path) as f:
            result = json.load(f)
        rows = repredict(prof, result, batch)
        for row, predicted, error, speedup_error in rows:
            name = compare.name_of(row["ranks"], row["sync"], row["compress"])
            print(f"  {name:28s} {predicted * 1e3:7.2f} / {row['measured_iteration_s'] * 1e3:7.2f} ms "
                  f"{error:+7.1%}" + (f"   speed-up {speedup_error:+7.1%}" if speedup_error is not None else ""))
        median, worst, speedup = summary(rows)
        print(f"{path}: median |error| {median:.1%}, worst {worst:.1%}, speed-up median {speedup:.1%}")
        if ranged is not None:
            share, (below, above) = coverage(ranged, result, batch)
            print(f"  coverage {share:.0%} of rows in their predicted band (the widest: -{below:.1%} / +{above:.1%})")


if __name__ == "__main__":
    main()
