"""Grade a folder of submitted lecture notebooks with the same checkers the students ran.

    python -m course grade submissions/ -o grades.csv

For every exercise cell (one that calls `lectureN.exerciseK(answer, ...)`) of every notebook,
the last `answer = ...` line of the cell is read, never executed: a number, a string, None, or
arithmetic on numbers (`32 / 500 * 1e3`); anything else is "unreadable". The arithmetic is
bounded: at most MAX_ANSWER_CHARS characters, MAX_DEPTH nested operations and integers of
MAX_INT_BITS bits, so no answer can make the grader compute for long.

Lectures 01-05 are checked again here (column `checked`: "re-checked by course grade").
Lecture 06's answers depend on the student's own measurement, which the notebook does not
carry, so its verdict is the one the student's run printed (`checked`: "from the notebook's
output"); rerun that notebook to check it again. A notebook that cannot be read (not JSON, not
a notebook, an exercise of a lecture that does not exist) gets one row saying why, and the
others are graded all the same.

One CSV row per exercise: notebook, lecture, exercise, answer, result (correct, wrong,
unanswered, unreadable), checked, message. The summary printed is one line per notebook.
"""
import ast
import csv
import json
import math
import operator
import re
from pathlib import Path

from course import check

CALL = re.compile(r"lecture(\d)\.exercise(\d)\(")
ANSWER = re.compile(r"^\s*answer\s*=\s*(.+?)\s*(#.*)?$")
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
FIELDS = ("notebook", "lecture", "exercise", "answer", "result", "checked", "message")
RECHECKED, FROM_OUTPUT = "re-checked by course grade", "from the notebook's output"
MAX_ANSWER_CHARS = 1000          # an answer line longer than this is not read
MAX_DEPTH = 32                   # nested operations in one answer
MAX_INT_BITS = 1024              # integers past 2**1024 (about 1.8e308, float's range) are refused
MAX_NOTEBOOK_BYTES = 50 * 2**20  # a submitted notebook larger than this is not read


class Unreadable(ValueError):
    pass


def value_of(text):
    """The answer written in `text`: a literal, or bounded arithmetic on numbers; never anything run."""
    def walk(node, depth):
        if depth > MAX_DEPTH:
            raise Unreadable(f"more than {MAX_DEPTH} nested operations")
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float, str))):
            return bounded(node.value)
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return bounded(OPERATORS[type(node.op)](number(walk(node.operand, depth + 1))))
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            left, right = number(walk(node.left, depth + 1)), number(walk(node.right, depth + 1))
            if isinstance(node.op, ast.Pow):
                power_is_bounded(left, right)
            return bounded(OPERATORS[type(node.op)](left, right))
        raise Unreadable(f"not a number or a string: {text!r}")

    def number(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unreadable(f"arithmetic on something that is not a number: {text!r}")
        return v

    if len(text) > MAX_ANSWER_CHARS:
        raise Unreadable(f"an answer longer than {MAX_ANSWER_CHARS} characters")
    try:
        return walk(ast.parse(text, mode="eval").body, 0)
    except (SyntaxError, ZeroDivisionError, OverflowError, RecursionError, MemoryError, ValueError) as e:
        raise Unreadable(f"{text[:80]!r}: {type(e).__name__}: {str(e)[:80]}") from None


def bounded(v):
    """v, unless it is an integer too large to be an answer (complex results are not numbers)."""
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > MAX_INT_BITS:
        raise Unreadable(f"an integer of more than {MAX_INT_BITS} bits")
    if isinstance(v, complex):
        raise Unreadable("a complex number")
    return v


def power_is_bounded(base, exponent):
    """Refuse a power before computing it when its result would be past MAX_INT_BITS (or an
    exponent above 100 on any base), so `((9**99)**99)**99` costs nothing."""
    if abs(exponent) > 100:
        raise Unreadable("an exponent above 100")
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 \
            and abs(base) > 1 and math.log2(abs(base)) * exponent > MAX_INT_BITS:
        raise Unreadable(f"a power of more than {MAX_INT_BITS} bits")


class NotANotebook(ValueError):
    pass


def read_notebook(path):
    """The notebook's JSON object, or NotANotebook saying why not (a regular file of at most
    MAX_NOTEBOOK_BYTES, read by dpsim.files.read_regular: never blocks on a FIFO)."""
    from dpsim.errors import ScenarioError
    from dpsim.files import read_regular
    try:
        data = read_regular(path, "notebook", MAX_NOTEBOOK_BYTES)
    except ScenarioError as e:
        raise NotANotebook(str(e)) from None
    try:
        nb = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise NotANotebook(f"not JSON: {str(e)[:80]}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells", []), list):
        raise NotANotebook("not a notebook: no list of cells")
    return nb


def text_of(value):
    """A notebook field that is a string or a list of strings, as one string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return ""


def exercises(notebook):
    """(lecture, exercise, answer text or None, printed verdict or None) for each exercise cell."""
    for cell in read_notebook(notebook).get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = text_of(cell.get("source", ""))
        call = CALL.search(source)
        if not call:
            continue
        answers = [m.group(1) for m in map(ANSWER.match, source.splitlines()) if m]
        printed = None
        outputs = cell.get("outputs", [])
        for out in outputs if isinstance(outputs, list) else []:
            if not isinstance(out, dict):
                continue
            data = out.get("data", {})
            text = text_of(data.get("text/plain", out.get("text")) if isinstance(data, dict) else out.get("text"))
            if text.startswith(("correct:", "not yet:")):
                printed = text.strip()
        yield int(call.group(1)), int(call.group(2)), (answers[-1] if answers else None), printed


def grade_one(lecture, exercise, text, printed):
    """The CSV fields after notebook: lecture, exercise, answer, result, checked, message."""
    row = {"lecture": lecture, "exercise": exercise, "answer": text if text is not None else ""}
    checker = getattr(check.lecture(lecture), f"exercise{exercise}", None) if lecture in check.LECTURES else None
    if checker is None:
        return {**row, "result": "unreadable", "checked": "",
                "message": f"lecture {lecture} has no exercise {exercise}"}
    try:
        value = value_of(text) if text is not None else None
    except Unreadable as e:
        return {**row, "result": "unreadable", "checked": "", "message": str(e)}
    if value is None:
        return {**row, "result": "unanswered", "checked": "", "message": ""}
    if lecture == 6:
        result = "correct" if printed and printed.startswith("correct:") else "wrong" if printed else "unanswered"
        return {**row, "result": result, "checked": FROM_OUTPUT, "message": printed or "not run"}
    verdict = checker(value)
    return {**row, "result": "correct" if verdict.ok else "wrong", "checked": RECHECKED, "message": verdict.message}


def rows_of(notebook):
    """The CSV rows of one notebook: one per exercise, or one saying why it could not be read."""
    try:
        return [grade_one(*ex) for ex in exercises(notebook)]
    except (NotANotebook, OSError) as e:
        why = e if isinstance(e, NotANotebook) else f"cannot read it: {e.strerror or e}"
        return [{"lecture": "", "exercise": "", "answer": "", "result": "unreadable", "checked": "",
                 "message": f"{why}"}]


def grade(folder, out_csv):
    """Grade every .ipynb under `folder`; write the CSV (under a temporary name, renamed when
    complete: dpsim.files.writing); return {notebook: (correct, exercises)}."""
    from dpsim.files import writing
    notebooks = sorted(Path(folder).rglob("*.ipynb"))
    scores = {}
    with writing(out_csv, "w", "-o") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for nb in notebooks:
            name = str(nb.relative_to(folder))
            rows = rows_of(nb)
            for row in rows:
                writer.writerow({"notebook": name, **row})
            scores[name] = (sum(r["result"] == "correct" for r in rows), len(rows))
    return scores
