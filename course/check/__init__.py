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


LECTURES = range(1, 7)


def lecture(n: int):
    """The checker module of lecture n (1-6)."""
    import importlib
    if n not in LECTURES:
        raise ValueError(f"lectures are numbered 1 to 6, got {n}")
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
