"""course.repredict on the stored quiet-machine compares (course/measured/2026-11-25-quiet):
the stored calibration rebuilds the predictions compare made then, and course/README.md's
figures about them are what the stored files and repredict give."""
import json
import re
import statistics

import numpy as np
import pytest

from course import compare, repredict, spread
from course.fit import straggler_s
from course.measurements import Measurements
from doc_text import ROOT, flat, passage

STORED = ROOT / "course/measured/2026-11-25-quiet"
COMPARES = [json.loads((STORED / f"compare{i}.json").read_text()) for i in (1, 2, 3)]
SIDECAR = json.loads((STORED / "profile.measured.json").read_text())
SECTION = "### What oversubscribed and 1-bit runs pay"


@pytest.fixture(scope="module")
def prof():
    return repredict.profile_from_sidecar(STORED / "profile.measured.json")


def test_the_stored_calibration_gives_the_predictions_compare_made_then(prof):
    """The profile calibrate wrote then predicts every stored row again, to rounding; rebuilt
    from its sidecar with today's fits, it differs only in the keys the fits changed since."""
    import tomllib
    then = spread.values(tomllib.loads((STORED / "profile.toml").read_text()))
    for result in COMPARES:
        for row, predicted, _, _ in repredict.repredict(then, result, SIDECAR["batch"]):
            assert predicted == pytest.approx(row["predicted_iteration_s"], rel=1e-9), compare.name_of(
                row["ranks"], row["sync"], row["compress"])
    changed = {"cluster.timeslice_us", "cluster.timeslice_overhead", "compute.shared_jitter"}
    now, before = spread.numbers(prof), spread.numbers(then)
    assert {k for k in now.keys() | before.keys() if now.get(k) != before.get(k)} == changed


def test_readme_figures_are_the_stored_runs_and_their_reprediction(prof):
    text = passage("course/README.md", SECTION)
    before = [f"{r['median_abs_error']:.1%}" for r in COMPARES]
    assert f"were off by a median {before[0]}, {before[1]} and {before[2]}" in text
    worst = ", ".join(f"{r['worst_abs_error']:.1%}" for r in COMPARES)
    speed = ", ".join(f"{r['median_abs_speedup_error']:.1%}" for r in COMPARES)
    assert f"(worst {worst}; speed-up {speed})" in text
    for i, result in enumerate(COMPARES, start=1):
        rows = repredict.repredict(prof, result, SIDECAR["batch"])
        median, worst, speedup = repredict.summary(rows)
        row, *_ = max(rows, key=lambda r: abs(r[2]))
        name = compare.name_of(row["ranks"], row["sync"], row["compress"]).replace(" (no sync)", "")
        assert f"| {i} | {median:.1%} | {worst:.1%} ({name}) | {speedup:.1%} |" in text


def test_readme_figures_of_the_probes_are_the_stored_calibrations(prof):
    text = passage("course/README.md", SECTION)
    assert f"computed {prof['cluster']['timeslice_overhead']:.1%} slower than" in text
    assert f"`compute.shared_jitter` ({prof['compute']['shared_jitter']:.0%} for this calibration)" in text
    four = [straggler_s(p, "ring") for p in SIDECAR["probes"]["4"]]
    two = [straggler_s(p, "ring") for p in SIDECAR["probes"]["2"]]
    assert f"waited {min(four) * 1e3:.1f}-{max(four) * 1e3:.1f} ms for the slowest" in text and max(two) < 1e-4
    m = Measurements.from_sidecar(SIDECAR)
    assert f"had taken {m.onebit_s[0] * 1e3:.1f} ms" in text
    in_training = [r["measured_phases_s"]["exposed_comm"] + r["measured_phases_s"]["compression"]
                   for c in COMPARES for r in c["rows"] if r["ranks"] == 2 and r["compress"] == "1bit"]
    assert all(abs(t - 17e-3) < 0.5e-3 for t in in_training) and "about 17 ms a step on 2 ranks" in text


def test_readme_says_what_the_loop_waits_and_what_is_left(prof):
    import dpsim
    from dpsim import sharing
    text = flat(passage("course/README.md", SECTION))
    m = Measurements.from_sidecar(SIDECAR)
    alone = m.per_round(2, lambda p, _: p.message_mean_s)
    crowded = m.per_round(4, lambda p, _: p.message_mean_s)
    ring = m.per_round(4, lambda p, _: p.ring_sync_s - p.straggler_s)
    pingpong_slice_us = 2 * (crowded - alone) / (1 - 1 / sharing.ranks_per_device(4, 1.962)) * 1e6
    at_pingpong = {**prof, "cluster": {**prof["cluster"], "timeslice_us": pingpong_slice_us}}
    ring_at_pingpong = dpsim.simulate(compare.scenario_for(at_pingpong, 4, "ring", "none",
                                                           batch=SIDECAR["batch"])).sync_time_s
    assert f"waited {(crowded - alone) * 1e6:.0f} us more per message" in text
    assert f"took {ring * 1e3:.2f} ms, where dpsim's ring at that slice took {ring_at_pingpong * 1e3:.2f}" in text
    onebit = [e for c in COMPARES for r, _, e, _ in repredict.repredict(prof, c, SIDECAR["batch"])
              if r["compress"] == "1bit"]
    assert f"the 1-bit rows, {-max(onebit) * 100:.0f}-{-min(onebit) * 100:.0f}% under" in text
    over = []
    for c in COMPARES:
        four = {(r["sync"], r["compress"]): r["measured_phases_s"]["compute"] for r in c["rows"] if r["ranks"] == 4}
        assert four[("ring", "none")] < four[("ps", "none")] <= 1.2 * four[("ring", "none")]
        assert four[("ring", "none")] < four[("ring", "1bit")] <= 1.2 * four[("ring", "none")]
        assert all(abs(r["error"]) <= 0.081 for r in c["rows"] if r["ranks"] <= 2 and r["compress"] == "none")
        for r in c["rows"]:
            if r["sync"] == "ps" and r["ranks"] > 2:
                b = dpsim.simulate(compare.scenario_for(prof, r["ranks"], "ps", "none", batch=SIDECAR["batch"])).breakdown_s
                over.append(b["exposed_comm"] - r["measured_phases_s"]["exposed_comm"])
    assert f"now up to {max(over) * 1e3:.1f} ms over at 3 and 4 ranks" in text and min(over) > -0.1e-3
    assert "4-rank ps and 1-bit compute up to 20% slower than the 4-rank ring" in text
    assert "while ranks 1 and 2 without 1-bit stayed within 8.1%" in text


def test_readme_coverage_is_the_bands_of_the_stored_calibration():
    text = flat(passage("course/README.md", SECTION))
    ranged = repredict.profile_from_sidecar(STORED / "profile.measured.json", ranges=True)
    found = [repredict.coverage(ranged, c, SIDECAR["batch"]) for c in COMPARES]
    shares = [f"{share:.0%}" for share, _ in found]
    assert f"{shares[0]}, {shares[1]} and {shares[2]} of the rows fall in their predicted band" in text
    then = [f"{c['coverage']:.0%}" for c in COMPARES]
    assert f"(the compares themselves had {then[0]}, {then[1]} and {then[2]})" in text
    below, above = max(b for _, (b, _) in found), max(a for _, (_, a) in found)
    assert f"reaching {below:.1%} below and {above:.1%} above its prediction" in text
