"""course/README.md's "Bands from 19 rounds": the stored calibrations and compares of
course/measured/2026-11-26-rounds and -rounds2. Each stored profile gives back every prediction
and every band its compares made (made by this code from that profile, before the runs), and
every figure the README states is the stored files'."""
import pytest

import dpsim
from course import compare, measurements
from doc_text import COMPARES, flat, gives_back_every_prediction, passage, says_the_stored_table, stored

TEXT = flat(passage("course/README.md", "### Bands from 19 rounds"))
FIRST_PROFILE, _, FIRST_COMPARES = stored("2026-11-26-rounds")
SECOND_PROFILE, _, SECOND_COMPARES = stored("2026-11-26-rounds2")
FIRST, SECOND = (FIRST_PROFILE, FIRST_COMPARES), (SECOND_PROFILE, SECOND_COMPARES)
CASES = [(prof, result) for prof, results in (FIRST, SECOND) for result in results]
IDS = [f"{folder}-{n}" for folder in ("rounds", "rounds2") for n in COMPARES]


@pytest.mark.parametrize("profile, result", CASES, ids=IDS)
def test_the_stored_profile_gives_back_every_prediction(profile, result):
    gives_back_every_prediction(profile, result)


@pytest.mark.parametrize("profile, result", CASES, ids=IDS)
def test_the_stored_profile_gives_back_every_band_from_its_19_samples(profile, result):
    assert len(profile["samples"]) == measurements.ROUNDS == 19
    assert result["band_method"].startswith("19 runs of each configuration: the 19 measured samples")
    batch = profile["training"]["batch_per_gpu"]
    configs = [(r["ranks"], r["sync"], r["compress"]) for r in result["rows"]]
    prof = dpsim.bands.split(profile).data
    predicted = {c: dpsim.simulate(compare.scenario_for(prof, *c, batch=batch)) for c in configs}
    bands, _ = compare.predicted_bands(profile, configs, predicted, batch)
    for c, row in zip(configs, result["rows"]):
        band = bands[c]["iteration_time_s"]
        assert band["low"] == pytest.approx(row["predicted_band_s"]["low"], rel=1e-9)
        assert band["high"] == pytest.approx(row["predicted_band_s"]["high"], rel=1e-9)
        assert row["in_band"] == (band["low"] <= row["measured_iteration_s"] <= band["high"])


def test_readme_tables_are_the_stored_compares():
    for _, results in (FIRST, SECOND):
        says_the_stored_table(TEXT, results)


def name(r):
    return compare.name_of(r["ranks"], r["sync"], r["compress"])


def test_readme_says_which_rows_missed_their_band():
    results = FIRST[1]
    missed = [(i, r) for i, result in enumerate(results) for r in result["rows"] if not r["in_band"]]
    assert all(r["ranks"] == 4 for _, r in missed)                         # "every row out of its band is a 4-rank row"
    assert [name(r) for i, r in missed if i == 0] == ["4 ranks ring", "4 ranks ps"]
    assert all(r["error"] < 0 for r in results[0]["rows"])                 # the whole first compare ran slower
    later = [(name(r), r["error"] > 0) for i, r in missed if i > 0]
    assert later == [("4 ranks ps", False), ("4 ranks ring", True), ("4 ranks zero1", True),
                     ("4 ranks ring+powersgd", True)]                      # slower once, faster three times
    ring4 = next(r for r in results[0]["rows"] if name(r) == "4 ranks ring")
    runs = ring4["measured_range_s"]
    assert f"took {runs['low'] * 1e3:.2f}-{runs['high'] * 1e3:.2f} ms" in TEXT


def test_readme_says_what_the_second_calibration_missed():
    ring_ps = SECOND[1][:3]
    for result in ring_ps:
        missed = [r for r in result["rows"] if not r["in_band"]]
        assert len(missed) == 1 and missed[0]["sync"] == "ps" and missed[0]["error"] > 0   # "one miss, a ps row"
    faster = [r["error"] for _, results in (FIRST, SECOND) for r in results[3]["rows"]
              if r["ranks"] in (3, 4) and (r["sync"], r["compress"]) in (("zero1", "none"), ("ring", "powersgd"))]
    assert min(faster) > 0 and f"(by {min(faster) * 100:.1f}-{max(faster):.1%})" in TEXT
    assert SECOND[1][3]["coverage"] == 0.5 and "PowerSGD compare covers half its rows" in TEXT
