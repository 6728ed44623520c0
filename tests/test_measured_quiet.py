"""course/README.md's "Measured after the change": the stored calibration and compares of
2026-11-26 (course/measured/2026-11-26-quiet). The stored profile gives back every prediction
the compares made (so they were made by this code from that profile, before the runs), and
every figure the README states is the stored files'."""
import json
import tomllib

import pytest

import dpsim
from course import compare, spread
from doc_text import ROOT, flat, passage

STORED = ROOT / "course/measured/2026-11-26-quiet"
RING_PS = [json.loads((STORED / f"compare{i}.json").read_text()) for i in (1, 2, 3)]
ZERO = json.loads((STORED / "compare-zero-powersgd.json").read_text())
BEFORE = [json.loads((ROOT / f"course/measured/2026-11-25-quiet/compare{i}.json").read_text()) for i in (1, 2, 3)]
PROFILE = tomllib.loads((STORED / "profile.toml").read_text())
SECTION = "### Measured after the change"


def pct(x):
    return f"{x:.1%}"


@pytest.mark.parametrize("result", RING_PS + [ZERO], ids=["compare1", "compare2", "compare3", "zero-powersgd"])
def test_the_stored_profile_gives_back_every_prediction(result):
    prof = spread.values(PROFILE)
    for row in result["rows"]:
        sc = compare.scenario_for(prof, row["ranks"], row["sync"], row["compress"], batch=PROFILE["training"]["batch_per_gpu"])
        assert dpsim.simulate(sc).iteration_time_s == pytest.approx(row["predicted_iteration_s"], rel=1e-9)


def test_readme_table_is_the_stored_compares():
    text = flat(passage("course/README.md", SECTION))
    for name, result in [("1", RING_PS[0]), ("2", RING_PS[1]), ("3", RING_PS[2]), ("ZeRO, PowerSGD", ZERO)]:
        worst = max(result["rows"], key=lambda r: abs(r["error"]))
        onebit = ", ".join(f"{r['error']:+.1%}".replace("+", "") for r in result["rows"] if r["compress"] == "1bit")
        band = result["widest_band"]
        row = (f"| {name} | {pct(result['median_abs_error'])} | {pct(result['worst_abs_error'])} "
               f"({compare.name_of(worst['ranks'], worst['sync'], worst['compress'])}) | "
               f"{pct(result['median_abs_speedup_error'])} | {onebit} | {result['coverage']:.0%} | "
               f"-{pct(band['below'])} / +{pct(band['above'])} |")
        assert flat(row).replace("|  |", "| |") in text, row
        assert result["machine_load"]["others_cores"]["mean"] < 0.015        # "0.01 cores on average"


def test_readme_prose_is_the_stored_files():
    text = flat(passage("course/README.md", SECTION))
    medians = sorted(r["median_abs_error"] for r in BEFORE)
    worsts = sorted(r["worst_abs_error"] for r in BEFORE)
    assert f"median {medians[0]:.1%}-{medians[-1]:.1%} (worst {worsts[0]:.1%}-{worsts[-1]:.1%})".replace("%-", "-") in text
    onebit = [r["error"] for c in RING_PS for r in c["rows"] if r["compress"] == "1bit"]
    assert f"every 1-bit row is still {-max(onebit) * 100:.0f}-{-min(onebit) * 100:.0f}% slow" in text
    slice_us = PROFILE["cluster"]["timeslice_us"]
    assert f"ranged {slice_us['low']:.0f}-{slice_us['high']:,.0f} us" in text
    two = next(r for r in ZERO["rows"] if r["ranks"] == 2 and r["compress"] == "powersgd")
    measured, predicted = two["measured_phases_s"]["compression"], two["predicted_phases_s"]["compression"]
    assert f"ran {measured / predicted:.1f}x what dpsim predicts ({measured * 1e3:.2f} ms against {predicted * 1e3:.2f}" in text
    zero1 = [abs(r["error"]) for r in ZERO["rows"] if r["sync"] == "zero1"]
    zero3 = [-r["error"] for r in ZERO["rows"] if r["sync"] == "zero3"]
    assert max(zero1) < 0.06 and "ZeRO-1 is within 6%" in text
    assert f"ZeRO-3 {min(zero3) * 100:.0f}-{max(zero3) * 100:.0f}% slow" in text
