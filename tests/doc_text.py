"""The text of the docs, for the tests that hold their figures (test_doc_figures*.py,
test_doc_measured.py): whitespace collapsed, so that a figure still matches where a line wraps."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
WORDS = {2: "Two", 4: "Four", 5: "Five", 8: "Eight"}


def flat(text):
    return " ".join(text.split())


def cells(number, kind="markdown"):
    """The sources of lecture `number`'s cells of `kind` ("markdown" or "code")."""
    path = next((ROOT / "lectures").glob(f"0{number}_*.ipynb"))
    return ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == kind]


def lecture(number, kind="markdown"):
    """Every `kind` cell of lecture `number`, flat."""
    return flat("\n".join(cells(number, kind)))


def doc(name):
    """The texts of `name`: a lecture's markdown cells ("lecture N") or a file's text, as a list."""
    return cells(int(name.split()[1])) if name.startswith("lecture") else [(ROOT / name).read_text()]


def says(text, *phrases):
    """Assert that `text` (flat) says each phrase, a figure printed at the doc's own precision."""
    for phrase in phrases:
        assert flat(phrase) in text, f"the text no longer says: {flat(phrase)!r}"


def passage(name, anchor):
    """The part of `name` that holds `anchor`: from the heading above it to the next heading
    (inside one markdown cell, for a lecture), flat."""
    for text in doc(name):
        for section in re.split(r"\n(?=#{1,4} )", text):
            if flat(anchor) in flat(section):
                return flat(section)
    raise AssertionError(f"{name} no longer says {anchor!r}")


def compare_row(name, result):
    """The row a course/README.md table of measured compares gives a compare's JSON: median and
    worst |error|, the speed-up's, the 1-bit rows, coverage and the widest band (flat)."""
    from course.compare import name_of
    pct = lambda x: f"{x:.1%}"
    worst = max(result["rows"], key=lambda r: abs(r["error"]))
    onebit = ", ".join(f"{r['error']:.1%}" for r in result["rows"] if r["compress"] == "1bit")
    band = result["widest_band"]
    row = (f"| {name} | {pct(result['median_abs_error'])} | {pct(result['worst_abs_error'])} "
           f"({name_of(worst['ranks'], worst['sync'], worst['compress'])}) | "
           f"{pct(result['median_abs_speedup_error'])} | {onebit} | {result['coverage']:.0%} | "
           f"-{pct(band['below'])} / +{pct(band['above'])} |")
    return flat(row).replace("|  |", "| |")


COMPARES = ("compare1", "compare2", "compare3", "compare-zero-powersgd")
TABLE_NAMES = ("1", "2", "3", "ZeRO, PowerSGD")       # their rows in course/README.md's tables


def stored(folder):
    """A calibration stored in course/measured/<folder>: (its profile TOML, its sidecar, its
    compares: the three ring/ps ones, then the ZeRO/PowerSGD one)."""
    import tomllib
    path = ROOT / "course/measured" / folder
    return (tomllib.loads((path / "profile.toml").read_text()),
            json.loads((path / "profile.measured.json").read_text()),
            [json.loads((path / f"{name}.json").read_text()) for name in COMPARES])


def says_the_stored_table(text, results):
    """Assert that `text` holds the table of a stored calibration's compares (compare_row, in
    the order of COMPARES), each measured while other programs used 0.01 cores on average."""
    for name, result in zip(TABLE_NAMES, results):
        assert compare_row(name, result) in text, compare_row(name, result)
        assert result["machine_load"]["others_cores"]["mean"] < 0.015


def gives_back_every_prediction(profile, result):
    """Assert that the stored profile (TOML, ranges at their values) predicts every row of a
    stored compare's JSON as that compare did, to 1e-9: the prediction came from this code and
    that profile, before the runs."""
    import pytest
    import dpsim
    from course import compare, spread
    prof = spread.values(profile)
    for row in result["rows"]:
        sc = compare.scenario_for(prof, row["ranks"], row["sync"], row["compress"],
                                  batch=profile["training"]["batch_per_gpu"])
        assert dpsim.simulate(sc).iteration_time_s == pytest.approx(row["predicted_iteration_s"], rel=1e-9)
