"""Checkers for lecture 06, predicted against measured.

    from course.check import lecture6
    lecture6.exercise1(answer, result)

Measurements differ from machine to machine and from minute to minute, so every exercise is
checked against the student's own comparison: `result` is what `python -m course compare
--json FILE` wrote (the dict, or the path of the file). The right answer is computed here
from that run's raw figures (iteration times, samples/s, per-phase seconds), never from the
figures compare derived from them.
"""
import json
import math
from pathlib import Path

from course.compare import name_of
from dpsim.vocabulary import BREAKDOWN, OTHER

from . import Verdict, choice, close, number, pending

EX1_ROW = (2, "ring", "none")      # ranks, sync, compress
EX2_ROW = (2, "ring", "none")
EX3_ROW = (2, "ring", "1bit")
PHASES = BREAKDOWN + (OTHER,)          # as course compare's rows hold them


def _rows(result):
    if isinstance(result, (str, Path)):
        result = json.loads(Path(result).read_text())
    if not isinstance(result, dict) or "rows" not in result:
        raise ValueError("pass the comparison: the dict (or the path of the file) that "
                         "`python -m course compare --json FILE` wrote")
    return result["rows"]


def _row(result, key):
    ranks, sync, compress = key
    for r in _rows(result):
        same_sync = r["sync"] == sync or compress == "1bit"     # 1-bit has one row per rank count
        if r["ranks"] == ranks and (ranks == 1 or (same_sync and r["compress"] == compress)):
            return r
    return Verdict(False, f"the comparison has no row '{name_of(*key)}'; run compare with --ranks 1,2 "
                          "--sync ring --compress none,1bit")


def prediction_error_percent(row) -> float:
    """100 x (predicted - measured) / measured iteration time."""
    return 100 * (row["predicted_iteration_s"] - row["measured_iteration_s"]) / row["measured_iteration_s"]


def exercise1(answer, result) -> Verdict:
    """The prediction error (%) of the 2-rank ring row, from its predicted and measured times."""
    if answer is None:
        return pending("the error in percent (negative if dpsim predicts too short a time)")
    row = _row(result, EX1_ROW)
    if isinstance(row, Verdict):
        return row
    expected = solution1(result)
    value = number(answer)
    if value is None:
        return Verdict(False, f"expected a number of percent, got {answer!r}")
    # the table prints milliseconds to two decimals: allow for that rounding
    tolerance = 0.5
    if abs(value - expected) <= tolerance:
        return Verdict(True, f"{value:+.1f}% (from the unrounded times: {expected:+.2f}%)")
    if abs(value + expected) <= tolerance and abs(expected) > tolerance:
        return Verdict(False, f"{value:+.1f}% has the wrong sign: predicted minus measured, over measured.")
    if abs(value * 100 - expected) <= tolerance and abs(expected) > tolerance:
        return Verdict(False, f"{value:g} looks like a fraction; answer in percent.")
    meas = row["measured_iteration_s"]
    pred = row["predicted_iteration_s"]
    if math.isfinite(value) and abs(value - 100 * (pred - meas) / pred) <= tolerance:
        return Verdict(False, f"{value:+.1f}% divides by the prediction; divide by the measurement.")
    return Verdict(False, f"{value:+.1f}% is not it. Hint: 100 x (predicted - measured) / measured, "
                          "with the iteration times of the row '2 ranks ring'.")


def exercise2(answer, result) -> Verdict:
    """The measured speed-up of 2 ranks (ring, no compression) over 1 rank."""
    if answer is None:
        return pending("the measured speed-up (a number like 1.7)")
    row, one = _row(result, EX2_ROW), _row(result, (1, "ring", "none"))
    for r in (row, one):
        if isinstance(r, Verdict):
            return r
    expected = solution2(result)
    verdict = close(answer, expected, rel=0.02, unit="x")
    if verdict.ok:
        return verdict
    value = number(answer)
    if value is None:
        return verdict
    if math.isclose(value, row["predicted_samples_per_s"] / one["predicted_samples_per_s"], rel_tol=0.02):
        return Verdict(False, f"{value:.3g}x is dpsim's predicted speed-up; the question asks for the measured one.")
    if math.isclose(value, expected / 2, rel_tol=0.02):
        return Verdict(False, f"{value:.3g} is the scaling efficiency (speed-up / ranks).")
    return Verdict(False, verdict.message + " Hint: measured samples/s on 2 ranks / measured samples/s on 1 rank.")


def largest_gap_phase(row) -> str:
    """The phase whose predicted and measured seconds per iteration differ most."""
    pred, meas = row["predicted_phases_s"], row["measured_phases_s"]
    phases = [p for p in PHASES if p in pred or p in meas]
    return max(phases, key=lambda p: abs(pred.get(p, 0.0) - meas.get(p, 0.0)))


def exercise3(answer, result) -> Verdict:
    """The phase of the 2-rank 1-bit row whose prediction is furthest from the measurement."""
    if answer is None:
        return pending("one of " + ", ".join(f"'{p}'" for p in PHASES))
    row = _row(result, EX3_ROW)
    if isinstance(row, Verdict):
        return row
    expected = solution3(result)
    return choice(answer, expected, PHASES,
                  hint="Compare the predicted and measured bar of each phase of '2 ranks 1bit': "
                       "which two differ by the most milliseconds?")


def solution1(result) -> float:
    """Exercise 1's answer for this comparison: the error of '2 ranks ring' in percent."""
    return prediction_error_percent(_row(result, EX1_ROW))


def solution2(result) -> float:
    """Exercise 2's answer for this comparison: measured speed-up of 2 ranks (ring) over 1."""
    return _row(result, EX2_ROW)["measured_samples_per_s"] / _row(result, (1, "ring", "none"))["measured_samples_per_s"]


def solution3(result) -> str:
    """Exercise 3's answer for this comparison: the phase of '2 ranks 1bit' furthest off."""
    return largest_gap_phase(_row(result, EX3_ROW))


# ------------------------------------------------------------------ worked solutions (teacher)

PASS_RESULT = ("depends on the student's own comparison: pass it, worked(6, 'compare.json') or "
               "worked(6, result) with the JSON that `course compare --json` wrote (the notebook writes "
               "compare.json into the folder it prints on its first line)")


RUBRICS = (
    ("within 0.5 points of the unrounded figure, with the sign right and the formula shown",
     "the right magnitude with the wrong sign, or divided by the prediction",
     "a fraction for a percentage, or another row's times"),
    ("within 2%, from the two measured samples/s",
     "the efficiency (speed-up / ranks) or the predicted speed-up, with the method right",
     "a ratio of iteration times the other way round, or no measured figure"),
    ("the phase with the largest |predicted - measured|, with the two bars' milliseconds quoted",
     "the second-largest gap when the two are within the runs' spread, with that said",
     "a phase named without comparing the bars"))


def _worked_method():
    """The method of each exercise, for a teacher without a comparison at hand."""
    from . import Worked
    method = (
        ("error of '2 ranks ring' (%)", "100 x (predicted - measured) / measured, from the row's "
         "predicted_iteration_s and measured_iteration_s"),
        ("measured speed-up of 2 ranks over 1", "measured_samples_per_s of '2 ranks ring' over that of "
         "'1 rank'"),
        ("the phase of '2 ranks 1bit' furthest off", "the phase with the largest |predicted_phases_s - "
         "measured_phases_s| of that row"))
    return [Worked(k, title, None, PASS_RESULT, (how,), rubric=r)
            for k, ((title, how), r) in enumerate(zip(method, RUBRICS), start=1)]


def worked_solutions(result=None):
    """The three exercises worked on this comparison (`result`: the dict or the path of
    compare.json), every figure taken from its rows; without it, the method
    (course.check.worked(6) prints them)."""
    from . import Worked
    if result is None:
        return _worked_method()
    row, one = _row(result, EX1_ROW), _row(result, (1, "ring", "none"))
    pred, meas = row["predicted_iteration_s"], row["measured_iteration_s"]
    e = solution1(result)
    first = Worked(
        1, "error of '2 ranks ring' (%)", e, f"{e:+.2f}%", (
            f"the row '{name_of(*EX1_ROW)}': predicted {pred * 1e3:.3f} ms, measured {meas * 1e3:.3f} ms per iteration",
            f"100 x ({pred * 1e3:.3f} - {meas * 1e3:.3f}) / {meas * 1e3:.3f} = {e:+.2f}%: "
            + ("dpsim predicts too short an iteration" if e < 0 else "dpsim predicts too long an iteration")),
        wrong=((round(-e, 2), "the sign flipped: measured minus predicted"),
               (round(e / 100, 4), "a fraction, not percent"),
               (round(100 * (pred - meas) / pred, 2), "divided by the prediction instead of the measurement")),
        rubric=RUBRICS[0], abs_tol=0.5, tol_unit="percentage points")
    s = solution2(result)
    two_row = _row(result, EX2_ROW)
    second = Worked(
        2, "measured speed-up of 2 ranks over 1", s, f"{s:.4g}x", (
            f"measured samples/s: '{name_of(*EX2_ROW)}' {two_row['measured_samples_per_s']:,.1f}, "
            f"'{name_of(1, 'ring', 'none')}' {one['measured_samples_per_s']:,.1f}",
            f"speed-up = {two_row['measured_samples_per_s']:,.1f} / {one['measured_samples_per_s']:,.1f} = {s:.3f}x "
            f"(efficiency {s / EX2_ROW[0]:.0%} of the ideal {EX2_ROW[0]}x)"),
        wrong=tuple(w for w in (
            (round(two_row["predicted_samples_per_s"] / one["predicted_samples_per_s"], 3),
             "dpsim's predicted speed-up, not the measured one")
            if "predicted_samples_per_s" in one and "predicted_samples_per_s" in two_row else None,
            (round(s / EX2_ROW[0], 3), "the scaling efficiency (speed-up / ranks)")) if w),
        rubric=RUBRICS[1], rel=0.02)
    row3 = _row(result, EX3_ROW)
    p3, m3 = row3["predicted_phases_s"], row3["measured_phases_s"]
    gaps = {p: abs(p3.get(p, 0.0) - m3.get(p, 0.0)) for p in PHASES if p in p3 or p in m3}
    ranked = sorted(gaps, key=gaps.get, reverse=True)
    answer = solution3(result)
    third = Worked(
        3, "the phase of '2 ranks 1bit' furthest off", answer, repr(answer), (
            f"the row '{name_of(*EX3_ROW)}', per phase predicted / measured / |difference| in ms: "
            + "; ".join(f"{p} {p3.get(p, 0.0) * 1e3:.2f} / {m3.get(p, 0.0) * 1e3:.2f} / {gaps[p] * 1e3:.2f}"
                        for p in ranked),
            f"the largest difference: {answer} ({gaps[answer] * 1e3:.2f} ms)",
            "for a 1-bit row judge compression and exposed_comm together: mpi_impl counts only encode and "
            "decode as compression, the waits between them as exposed_comm"),
        wrong=tuple((p, "the next-largest gap: compare the milliseconds, not the bars' shapes")
                    for p in ranked[1:2]),
        rubric=RUBRICS[2])
    return [first, second, third]
