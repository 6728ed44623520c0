"""Answer checkers for the lecture exercises: `from course.check import lecture1`.

Each lecture has one module here; each exercise one function that takes the student's
answer, computes the right one independently (a closed form, or a dpsim run), and returns
a Verdict that prints as one line. Checkers never raise on a wrong answer: they say how far
off it is and give a hint.
"""
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Verdict:
    ok: bool
    message: str

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return ("correct: " if self.ok else "not yet: ") + self.message

    __str__ = __repr__


def pending(what) -> Verdict:
    """The verdict for an exercise cell the student has not filled in yet."""
    return Verdict(False, f"set `answer` to {what} and run this cell again")


def number(answer):
    """The answer as a finite float, or None if it is not one."""
    try:
        value = float(answer)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def close(answer, expected, rel=0.05, hint="", unit="") -> Verdict:
    """Numeric answer within `rel` (relative) of the expected value."""
    value = number(answer)
    if value is None:
        return Verdict(False, f"expected a number, got {answer!r}")
    off = abs(value - expected) / max(abs(expected), 1e-300)
    if off <= rel:
        return Verdict(True, f"{value:.4g}{unit} (expected {expected:.4g}{unit})")
    return Verdict(False, f"{value:.4g}{unit} is {off:.0%} away from the answer. {hint}".strip())


def choice(answer, expected, options, hint="") -> Verdict:
    """Answer is one of `options` (case-insensitive strings)."""
    given = str(answer).strip().lower()
    allowed = [o.lower() for o in options]
    if given not in allowed:
        return Verdict(False, f"answer one of {', '.join(options)}; got {answer!r}")
    if given == expected.lower():
        return Verdict(True, f"{expected}")
    return Verdict(False, f"not {answer!r}. {hint}".strip())


LECTURES = range(1, 8)


def lecture(n: int):
    """The checker module of lecture n (1-7)."""
    import importlib
    if n not in LECTURES:
        raise ValueError(f"lectures are numbered 1 to 7, got {n}")
    return importlib.import_module(f"course.check.lecture{n}")


def solutions(n: int, result=None) -> dict:
    """The right answers of lecture n's exercises, computed as the checkers compute them (for
    the teacher; course/TEACHING.md). Lecture 6's depend on a comparison: pass `result` (what
    `course.compare.compare` returns, or the JSON `course compare --json` wrote, loaded)."""
    module = lecture(n)
    if n == 6 and result is None:
        return {k: "depends on the student's own comparison: solutions(6, result), result being that "
                   "comparison (the JSON of course compare --json, loaded)" for k in (1, 2, 3)}
    args = (result,) if n == 6 else ()
    return {k: getattr(module, f"solution{k}")(*args) for k in (1, 2, 3)}


# ------------------------------------------------------------------ worked solutions (teacher)

@dataclass(frozen=True)
class Worked:
    """One exercise's worked solution: the answer (what solutionK returns), the reasoning with
    its intermediate figures (computed, never typed in), the wrong answers the checker
    recognises with what each reveals, and a rubric. `rel` / `abs_tol`: the checker's
    tolerance around the answer, if it has one."""
    exercise: int
    title: str
    answer: object
    shown: str                                  # the answer as the text states it, with its unit
    steps: tuple                                # the reasoning, one figure-filled line a step
    wrong: tuple = ()                           # (a wrong answer, what it reveals)
    rubric: tuple = ("", "", "")                # (full, partial, no credit): what earns each
    rel: float | None = None
    abs_tol: float | None = None
    tol_unit: str = ""                          # abs_tol's unit, e.g. "percentage points"


def accepts(w: Worked) -> str:
    """The checker's tolerance in words."""
    if w.rel is not None:
        return f"within {w.rel:.0%} of it"
    if w.abs_tol is not None:
        return f"within {w.abs_tol:g} {w.tol_unit} of it".replace("  ", " ")
    return "exactly this"


def worked(n: int, result=None) -> str:
    """Lecture n's worked solutions as text, for the teacher (course/TEACHING.md):
    `python -c "from course.check import worked; print(worked(1))"`. Every figure in it is
    computed by the checker's own code; every wrong answer's line quotes the checker's
    verdict on it. Lecture 6 takes the student's comparison (the dict or the path of the
    compare.json file), as solutions(6, result) does; without it, the method."""
    module = lecture(n)
    entries = module.worked_solutions(result)
    lines = [f"Lecture {n}: worked solutions (teacher's copy; answers computed by course/check/lecture{n}.py)"]
    for w in entries:
        check = getattr(module, f"exercise{w.exercise}")
        verdict = (lambda a: check(a)) if n != 6 else (lambda a: check(a, result))
        lines += ["", f"Exercise {w.exercise}: {w.title}"]
        if w.answer is None:
            lines.append(f"  Answer: {w.shown}")
        else:
            lines.append(f"  Answer: {w.shown}   (solution{w.exercise}(); the checker accepts {accepts(w)})")
        lines.append("  Reasoning:")
        lines += [f"    {i}. {s}" for i, s in enumerate(w.steps, start=1)]
        if w.wrong:
            lines.append("  Common wrong answers (the checker's verdict, then what the answer reveals):")
            for answer, reveals in w.wrong:
                lines.append(f"    - {answer!r}: {verdict(answer)}")
                lines.append(f"      reveals: {reveals}")
        full, partial, none = w.rubric
        lines += ["  Rubric:", f"    full credit: {full}", f"    partial credit: {partial}",
                  f"    no credit: {none}"]
    return "\n".join(lines)
