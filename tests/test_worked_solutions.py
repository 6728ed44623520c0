"""course.check.worked(n): the teacher's worked solutions. Every exercise of lectures 1-7 has
one with reasoning and a rubric; the answer it states is the checker's own solution and passes
the checker; the tolerance it states is the checker's; every wrong answer it lists fails the
checker and is quoted with the checker's verdict; and its figures follow the exercise's
constants (a number typed into the text would not)."""
import json
import math
import re

import pytest

from course import check
from course.check import lecture1, lecture2, lecture6, worked
from test_checks_lectures_b import RESULT          # a made-up comparison, as compare --json writes it

LECTURES = [1, 2, 3, 4, 5, 6, 7]
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")


def result_of(n):
    return RESULT if n == 6 else None


def entries(n):
    return check.lecture(n).worked_solutions(result_of(n))


def checker(n, k):
    f = getattr(check.lecture(n), f"exercise{k}")
    return (lambda a: f(a, RESULT)) if n == 6 else f


def blocks(text):
    """{exercise number: its block of text} of worked()'s output."""
    parts = re.split(r"^Exercise (\d+): ", text, flags=re.M)
    return {int(k): body for k, body in zip(parts[1::2], parts[2::2])}


def stated_answer(block):
    """The answer as its 'Answer:' line states it: a number (commas dropped) or a quoted string."""
    line = re.search(r"^  Answer: (.*)$", block, flags=re.M).group(1)
    quoted = re.match(r"'([^']*)'", line)
    if quoted:
        return quoted.group(1)
    return float(NUMBER.match(line).group(0).replace(",", ""))


@pytest.mark.parametrize("n", LECTURES)
def test_every_exercise_has_a_worked_solution_with_reasoning_and_a_rubric(n):
    found = entries(n)
    assert [w.exercise for w in found] == [1, 2, 3]
    for w in found:
        assert w.title and w.steps and all(s.strip() for s in w.steps)
        assert len(w.rubric) == 3 and all(r.strip() for r in w.rubric)
    text = worked(n, result_of(n))
    assert sorted(blocks(text)) == [1, 2, 3]
    for body in blocks(text).values():
        assert "  Reasoning:\n    1. " in body
        assert all(f"    {c} credit: " in body for c in ("full", "partial", "no"))


@pytest.mark.parametrize("n", LECTURES)
def test_the_worked_answer_is_the_checkers_solution_and_passes_its_checker(n):
    solutions = check.solutions(n, result_of(n))
    for w in entries(n):
        expected = solutions[w.exercise]
        if isinstance(expected, str):
            assert w.answer == expected
        else:
            assert w.answer == pytest.approx(expected, rel=1e-12)
        assert checker(n, w.exercise)(w.answer), (n, w.exercise, w.answer)


@pytest.mark.parametrize("n", LECTURES)
def test_the_answer_the_text_states_is_the_solution(n):
    solutions = check.solutions(n, result_of(n))
    for k, body in blocks(worked(n, result_of(n))).items():
        stated, expected = stated_answer(body), solutions[k]
        if isinstance(expected, str):
            assert stated == expected
        else:       # stated to 4 significant digits (lecture 6's percent to 2 decimals)
            assert stated == pytest.approx(expected, rel=5e-4, abs=5e-3), (n, k)
            assert checker(n, k)(stated), (n, k, stated)     # the figure as printed passes too


@pytest.mark.parametrize("n", LECTURES)
def test_the_stated_tolerance_is_the_checkers(n):
    for w in entries(n):
        ok = checker(n, w.exercise)
        if isinstance(w.answer, str):
            continue
        if w.rel is not None:
            assert f"within {w.rel:.0%}" in worked(n, result_of(n))
            for sign in (1, -1):
                assert ok(w.answer * (1 + sign * 0.9 * w.rel)), (n, w.exercise)
                assert not ok(w.answer * (1 + sign * 1.1 * w.rel)), (n, w.exercise)
        elif w.abs_tol is not None:
            for sign in (1, -1):
                assert ok(w.answer + sign * 0.9 * w.abs_tol) and not ok(w.answer + sign * 1.1 * w.abs_tol)
        else:       # "exactly this": a whole number, one off is wrong
            assert not ok(w.answer + 1) and not ok(w.answer - 1), (n, w.exercise)


@pytest.mark.parametrize("n", LECTURES)
def test_every_listed_wrong_answer_fails_and_is_quoted_with_the_checkers_verdict(n):
    text = worked(n, result_of(n))
    listed = 0
    for w in entries(n):
        for answer, reveals in w.wrong:
            verdict = checker(n, w.exercise)(answer)
            assert not verdict, (n, w.exercise, answer)
            assert f"- {answer!r}: {verdict}\n      reveals: {reveals}" in text
            listed += 1
    assert listed >= 3, "each lecture lists its common wrong answers"


def test_wrong_answers_are_the_ones_the_checkers_recognise():
    """Where a checker has a message of its own for a wrong answer (no generic 'Hint:'), the
    worked solution's wrong answers are those: each gets the checker's own explanation."""
    for n, k in [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2), (4, 3), (5, 1), (5, 2), (6, 2), (7, 1), (7, 2), (7, 3)]:
        w = entries(n)[k - 1]
        assert w.wrong and all("Hint:" not in str(checker(n, k)(a)) for a, _ in w.wrong), (n, k)


def test_figures_are_computed_from_the_constants_not_typed(monkeypatch):
    """Change lecture 1's setting: the worked text follows (t1, t2 and the answer recomputed by
    plain arithmetic here), as a number typed into the text would not."""
    monkeypatch.setattr(lecture1, "BATCH", 256)
    monkeypatch.setattr(lecture1, "NETWORK_GBS", 12.5)
    t1 = 12.3e9 * 256 / (15.7e12 * 0.35)
    t2 = 2 * 7 / 8 * 160e6 / 12.5e9
    body = blocks(worked(1))[1]
    assert f"= {t1 * 1e3:.1f} ms" in body and f"= {t2 * 1e3:.1f} ms" in body
    assert stated_answer(body) == pytest.approx(max(t1, t2) * 1e3, rel=5e-4)
    assert f"without overlap T = t1 + t2 = {(t1 + t2) * 1e3:.1f} ms" in body
    monkeypatch.setattr(lecture2, "GRADIENT_BYTES", 80e6)
    assert stated_answer(blocks(worked(2))[1]) == pytest.approx(2 * 7 * 80e6 / 16e9 * 1e3, rel=5e-4)


def test_intermediate_figures_as_the_lectures_derive_them():
    """Lecture 1, exercises 1 and 2, and lecture 2, exercise 2, worked by hand here."""
    text = blocks(worked(1))
    assert "= 143.3 ms" in text[1] and "= 224.0 ms" in text[1] and "= 367.3 ms" in text[1]
    assert "b >= t2 P e_max / F - b_half = 100.07 - 8 = 92.07" in text[2]
    crossing = 11 * 2e-6 * 16e9 / 1.25        # (14 - 3) alpha = (3 - 1.75) m beta
    assert f"= {crossing:,.0f} bytes" in blocks(worked(2))[2]
    assert crossing / 1e3 == pytest.approx(lecture2.solution2(), rel=1e-6)


def test_lecture6_figures_are_the_comparisons_own():
    body = blocks(worked(6, RESULT))
    two, one, onebit = (next(r for r in RESULT["rows"] if (r["ranks"], r["compress"]) == key)
                        for key in ((2, "none"), (1, "none"), (2, "1bit")))
    assert (f"predicted {two['predicted_iteration_s'] * 1e3:.3f} ms, measured "
            f"{two['measured_iteration_s'] * 1e3:.3f} ms") in body[1]
    assert f"{two['measured_samples_per_s']:,.1f} / {one['measured_samples_per_s']:,.1f}" in body[2]
    for phase, seconds in onebit["measured_phases_s"].items():
        assert f"{phase} {onebit['predicted_phases_s'][phase] * 1e3:.2f} / {seconds * 1e3:.2f} / " in body[3]


def test_lecture6_without_a_comparison_explains_the_method_and_what_to_pass():
    text = worked(6)
    assert "worked(6, 'compare.json')" in text and text.count("  Reasoning:") == 3
    assert all(w.answer is None for w in lecture6.worked_solutions())


def test_lecture6_takes_the_path_of_compare_json(tmp_path):
    path = tmp_path / "compare.json"
    path.write_text(json.dumps(RESULT))
    assert worked(6, str(path)) == worked(6, RESULT)


def test_no_lecture_outside_1_to_7():
    for n in (0, 8):
        with pytest.raises(ValueError):
            worked(n)
