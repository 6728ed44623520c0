"""course.repredict on the stored quiet-machine compares (course/measured/2026-11-25-quiet):
the stored calibration rebuilds the predictions compare made then, and course/README.md's
figures about them are what the stored files and repredict give."""
import json
import re
import statistics

import numpy as np
import pytest

from course import compare, repredict
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
    """With the time-slicing keys the calibration now adds set to 0, the model as it was:
    every stored row's prediction again, to rounding."""
    before = {**prof, "cluster": {**prof["cluster"], "timeslice_overhead": 0.0},
              "compute": {**prof["compute"], "shared_jitter": 0.0}}
    for result in COMPARES:
        for row, predicted, _, _ in repredict.repredict(before, result, SIDECAR["batch"]):
            assert predicted == pytest.approx(row["predicted_iteration_s"], rel=1e-9), compare.name_of(
                row["ranks"], row["sync"], row["compress"])


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


def test_readme_says_what_is_left_as_the_stored_runs_show(prof):
    import dpsim
    text = flat(passage("course/README.md", SECTION))
    rings = [r for c in COMPARES for r in c["rows"] if r["ranks"] > 2 and r["sync"] == "ring" and r["compress"] == "none"]
    measured = [r["measured_phases_s"]["exposed_comm"] for r in rings]
    predicted = [dpsim.simulate(compare.scenario_for(prof, n, "ring", "none", batch=SIDECAR["batch"]))
                 .breakdown_s["exposed_comm"] for n in (3, 4)]
    assert f"({min(measured) * 1e3:.1f}-{max(measured) * 1e3:.1f} ms measured against " \
           f"{min(predicted) * 1e3:.1f}-{max(predicted) * 1e3:.1f} predicted)" in text
    for c in COMPARES:
        four = {(r["sync"], r["compress"]): r["measured_phases_s"]["compute"] for r in c["rows"] if r["ranks"] == 4}
        assert four[("ring", "none")] < four[("ps", "none")] <= 1.2 * four[("ring", "none")]
        assert four[("ring", "none")] < four[("ring", "1bit")] <= 1.2 * four[("ring", "none")]
        assert all(abs(r["error"]) <= 0.081 for r in c["rows"] if r["ranks"] <= 2 and r["compress"] == "none")
    assert "4-rank ps and 1-bit compute up to 20% slower than the 4-rank ring" in text
    assert "while ranks 1 and 2 without 1-bit stayed within 8.1%" in text
