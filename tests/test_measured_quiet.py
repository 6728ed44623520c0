"""course/README.md's "Measured after the change": the stored calibration and compares of
2026-11-26 (course/measured/2026-11-26-steady), and the morning's they are set against
(course/measured/2026-11-26-quiet). The stored profile gives back every prediction the
compares made (so they were made by this code from that profile, before the runs), and every
figure the README states is the stored files'."""
import statistics

import numpy as np
import pytest

import dpsim
from course import calibrate, compare, spread
from course.measurements import ring_loop_s
from doc_text import COMPARES, flat, gives_back_every_prediction, passage, says_the_stored_table, stored

PROFILE, SIDECAR, ALL = stored("2026-11-26-steady")
RING_PS, ZERO = ALL[:3], ALL[3]
MORNING_PROFILE, MORNING_SIDECAR, ALL_BEFORE = stored("2026-11-26-quiet")
BEFORE, ZERO_BEFORE = ALL_BEFORE[:3], ALL_BEFORE[3]
SECTION = "### Measured after the change"
TEXT = flat(passage("course/README.md", SECTION))


def pct(x):
    return f"{x:.1%}"


def span(values, scale=100, places=0, sign=1):
    """'a-b' of the values (times scale, sign), as the README writes a range."""
    v = sorted(sign * x * scale for x in values)
    return f"{v[0]:.{places}f}-{v[-1]:.{places}f}"


def rows(results, keep):
    return [r for res in results for r in res["rows"] if keep(r)]


@pytest.mark.parametrize("result", ALL, ids=COMPARES)
def test_the_stored_profile_gives_back_every_prediction(result):
    gives_back_every_prediction(PROFILE, result)


def test_readme_table_is_the_stored_compares():
    says_the_stored_table(TEXT, ALL)


def test_readme_says_what_changed_since_the_morning():
    medians = [r["median_abs_error"] for r in BEFORE]
    onebit_then = [-r["error"] for r in rows(BEFORE, lambda r: r["compress"] == "1bit")]
    assert f"off by a median {span(medians, places=1)}% with every 1-bit row {span(onebit_then)}% slow" in TEXT
    crowded_then = [-r["error"] for r in rows(BEFORE, lambda r: r["compress"] == "1bit" and r["ranks"] > 2)]
    crowded_now = [abs(r["error"]) for r in rows(RING_PS, lambda r: r["compress"] == "1bit" and r["ranks"] > 2)]
    assert f"went from {span(crowded_then)}% slow to within 5%" in TEXT and max(crowded_now) <= 0.05
    assert f"the update ran {PROFILE['compute']['update_after_codec']['value']:.1%} slower" in TEXT


def test_readme_stalled_rounds_are_the_sidecars():
    loops = sorted(ring_loop_s(p) * 1e3 for p in MORNING_SIDECAR["probes"]["4"])
    assert f"took {loops[-1]:.1f} ms a step against {loops[0]:.1f}-{loops[-2]:.1f} in the others" in TEXT
    then = MORNING_PROFILE["cluster"]["timeslice_us"]
    assert f"range to {then['low']:.0f}-{then['high']:,.0f} us" in TEXT
    assert f"the bands to +{BEFORE[0]['widest_band']['above'] * 100:.0f}%" in TEXT
    (again,) = [p for p in SIDECAR["probes"]["4"] if "reprobed" in p]
    kept = [ring_loop_s(p) for p in SIDECAR["probes"]["4"] if "reprobed" not in p]
    middle = statistics.median(kept + [again["reprobed"]["ring_loop_s"]])      # the rounds as first probed
    assert f"({again['reprobed']['ring_loop_s'] * 1e3:.2f} ms against the rounds' median {middle * 1e3:.2f})" in TEXT
    now = PROFILE["cluster"]["timeslice_us"]
    assert f"its slice's rounds ranged {now['low']:.0f}-{now['high']:,.0f} us" in TEXT


def test_readme_powersgd_figures_are_the_stored_files():
    rate = PROFILE["compute"]["powersgd_gflops"]
    assert f"{rate['value']:.2f} GFLOP/s ({rate['low']:.2f}-{rate['high']:.2f})" in TEXT
    then = [-r["error"] for r in ZERO_BEFORE["rows"] if r["compress"] == "powersgd"]
    now = [-r["error"] for r in ZERO["rows"] if r["compress"] == "powersgd"]
    assert f"went from {span(then)}% slow to {span(now, places=1)}%" in TEXT
    said = flat(passage("course/README.md", "### PowerSGD's products"))
    errors = ", ".join(f"{r['error']:.1%}" for r in ZERO["rows"] if r["compress"] == "powersgd")
    before = ", ".join(f"{r['error']:.1%}" for r in ZERO_BEFORE["rows"] if r["compress"] == "powersgd")
    assert f"were off by {errors.rsplit(', ', 1)[0]} and {errors.rsplit(', ', 1)[1]} at 2, 3 and 4 ranks" in said
    assert f"had left them {before.rsplit(', ', 1)[0]} and {before.rsplit(', ', 1)[1]}" in said


def test_readme_says_what_stays_off():
    one = [-r["error"] for r in rows(RING_PS, lambda r: r["ranks"] == 1)]
    band = RING_PS[0]["rows"][0]["predicted_band_s"]
    p = RING_PS[0]["rows"][0]["predicted_iteration_s"]
    assert f"the 1-rank row, {span(one, places=1)}% slow in all three with a band of only " \
           f"{band['low'] / p - 1:.1%} / +{band['high'] / p - 1:.1%}" in TEXT
    ps4 = [-r["error"] for r in rows(RING_PS, lambda r: r["ranks"] == 4 and r["sync"] == "ps")]
    assert f"4 ranks ps, {span(ps4, places=1)}% slow" in TEXT
    two = rows(RING_PS, lambda r: r["ranks"] == 2 and r["compress"] == "1bit")
    assert f"2 ranks 1bit, {span([-r['error'] for r in two], places=1)}% slow" in TEXT
    phase = lambda r, side, keys: sum(r[f"{side}_phases_s"][k] for k in keys)
    compute = [phase(r, "measured", ["compute"]) - phase(r, "predicted", ["compute"]) for r in two]
    sync = [phase(r, "measured", ["exposed_comm", "compression"]) - phase(r, "predicted", ["exposed_comm", "compression"])
            for r in two]
    assert f"ran {span(compute, 1e3, 1)} ms over" in TEXT and f"messages {span(sync, 1e3, 1)} ms over" in TEXT
    zero3 = [-r["error"] for r in ZERO["rows"] if r["sync"] == "zero3"]
    assert f"ZeRO-3 {span(zero3, places=1)}% slow" in TEXT
    coverage = [r["coverage"] for r in RING_PS]
    assert f"cover {span(coverage)}% of the rows but reach {RING_PS[0]['widest_band']['above']:.1%} above" in TEXT


def test_readme_per_round_bands_are_what_the_rounds_predict():
    """The latency and slice each round fits, and what bands from each round's own profile cover."""
    latency = SIDECAR["spread"]["cluster.intra.latency_us"]["rounds"]
    slices = SIDECAR["spread"]["cluster.timeslice_us"]["rounds"]
    assert f"{span(latency, 1)} us of latency and {min(slices):.0f}-{max(slices):,.0f} us of slice" in TEXT
    prof = calibrate.profile_dict(SIDECAR)
    rounds = [calibrate.profile_dict(spread.round_sidecar(SIDECAR, r)) for r in range(spread.rounds_of(SIDECAR))]
    shares, above = [], []
    for result in RING_PS:
        inside = []
        for row in result["rows"]:
            c = (row["ranks"], row["sync"], row["compress"])
            at = lambda p: dpsim.simulate(compare.scenario_for(p, *c, batch=SIDECAR["batch"])).iteration_time_s
            each = [at(p) for p in rounds] + [at(prof)]
            t = row["measured_iteration_s"]
            inside.append(min(each) <= t <= max(each))
            if not inside[-1]:
                above.append(t > max(each))
        shares.append(np.mean(inside))
    assert f"covers only {span(shares)}% of the rows: all but one of its misses are runs slower" in TEXT
    assert len(above) - sum(above) == 1


def test_readme_zero3_table_is_the_mornings_profile_and_compare():
    """ZeRO-3 with one unit (the compare's scenario) and one unit per layer (bucket_mib = 0.001),
    from the morning's profile, beside what its compare measured."""
    said = flat(passage("course/README.md", "### ZeRO-3's gathers"))
    prof = spread.values(MORNING_PROFILE)
    for row in (r for r in ZERO_BEFORE["rows"] if r["sync"] == "zero3"):
        sc = compare.scenario_for(prof, row["ranks"], "zero3", "none", batch=prof["training"]["batch_per_gpu"])
        one = dpsim.simulate(sc).iteration_time_s
        per_layer = dpsim.simulate({**sc, "sync": {**sc["sync"], "bucket_mib": 0.001}}).iteration_time_s
        assert f"| {row['ranks']} | {one * 1e3:.2f} ms | {row['measured_iteration_s'] * 1e3:.2f} ms | " \
               f"{per_layer * 1e3:.2f} ms |" in said
