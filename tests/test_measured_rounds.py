"""course/README.md's "Bands from 19 rounds": the stored calibration and compares of
course/measured/2026-11-26-rounds. The stored profile gives back every prediction and every
band the compares made (made by this code from that profile, before the runs), and every
figure the README states is the stored files'."""
import json
import tomllib

import pytest

import dpsim
from course import compare, measurements
from doc_text import ROOT, compare_row, flat, gives_back_every_prediction, passage

STORED = ROOT / "course/measured/2026-11-26-rounds"
RING_PS = [json.loads((STORED / f"compare{i}.json").read_text()) for i in (1, 2, 3)]
ZERO = json.loads((STORED / "compare-zero-powersgd.json").read_text())
PROFILE = tomllib.loads((STORED / "profile.toml").read_text())
TEXT = flat(passage("course/README.md", "### Bands from 19 rounds"))
ALL = RING_PS + [ZERO]
IDS = ["compare1", "compare2", "compare3", "zero-powersgd"]


@pytest.mark.parametrize("result", ALL, ids=IDS)
def test_the_stored_profile_gives_back_every_prediction(result):
    gives_back_every_prediction(PROFILE, result)


@pytest.mark.parametrize("result", ALL, ids=IDS)
def test_the_stored_profile_gives_back_every_band_from_its_19_samples(result):
    assert len(PROFILE["samples"]) == measurements.ROUNDS == 19
    assert result["band_method"].startswith("19 runs of each configuration: the 19 measured samples")
    batch = PROFILE["training"]["batch_per_gpu"]
    configs = [(r["ranks"], r["sync"], r["compress"]) for r in result["rows"]]
    prof = dpsim.bands.split(PROFILE).data
    predicted = {c: dpsim.simulate(compare.scenario_for(prof, *c, batch=batch)) for c in configs}
    bands, _ = compare.predicted_bands(PROFILE, configs, predicted, batch)
    for c, row in zip(configs, result["rows"]):
        band = bands[c]["iteration_time_s"]
        assert band["low"] == pytest.approx(row["predicted_band_s"]["low"], rel=1e-9)
        assert band["high"] == pytest.approx(row["predicted_band_s"]["high"], rel=1e-9)
        assert row["in_band"] == (band["low"] <= row["measured_iteration_s"] <= band["high"])


def test_readme_table_is_the_stored_compares():
    for name, result in [("1", RING_PS[0]), ("2", RING_PS[1]), ("3", RING_PS[2]), ("ZeRO, PowerSGD", ZERO)]:
        assert compare_row(name, result) in TEXT, compare_row(name, result)
        assert result["machine_load"]["others_cores"]["mean"] < 0.015        # "0.01 cores on average"


def test_readme_says_which_rows_missed_their_band():
    missed = [(i, r) for i, result in enumerate(ALL) for r in result["rows"] if not r["in_band"]]
    assert all(r["ranks"] == 4 for _, r in missed)                         # "every row out of its band is a 4-rank row"
    first = [compare.name_of(r["ranks"], r["sync"], r["compress"]) for i, r in missed if i == 0]
    assert first == ["4 ranks ring", "4 ranks ps"] and all(r["error"] < 0 for r in RING_PS[0]["rows"])
    later = [(compare.name_of(r["ranks"], r["sync"], r["compress"]), r["error"] > 0) for i, r in missed if i > 0]
    assert later == [("4 ranks ps", False), ("4 ranks ring", True), ("4 ranks zero1", True),
                     ("4 ranks ring+powersgd", True)]                      # slower once, faster three times
    ring4 = next(r for r in RING_PS[0]["rows"] if (r["ranks"], r["sync"], r["compress"]) == (4, "ring", "none"))
    runs = ring4["measured_range_s"]
    assert f"took {runs['low'] * 1e3:.2f}-{runs['high'] * 1e3:.2f} ms" in TEXT
