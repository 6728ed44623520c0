"""Grade a folder of submitted lecture notebooks with the same checkers the students ran.

    python -m course grade submissions/ -o grades.csv

For every exercise cell (one that calls `lectureN.exerciseK(answer, ...)`) of every notebook,
the last `answer = ...` line of the cell is read, never executed: a number, a string, None, or
arithmetic on numbers (`32 / 500 * 1e3`); anything else is "unreadable". Lectures 01-05 are
checked again here. Lecture 06's answers depend on the student's own measurement, which the
notebook does not carry, so its verdict is the one the student's run printed (column
`checked`: "from the notebook's output"); rerun that notebook to check it again.

One CSV row per exercise: notebook, lecture, exercise, answer, result (correct, wrong,
unanswered, unreadable), checked, message. The summary printed is one line per notebook.
"""
import ast
import csv
import json
import operator
import re
from pathlib import Path

from course import check

CALL = re.compile(r"lecture(\d)\.exercise(\d)\(")
ANSWER = re.compile(r"^\s*answer\s*=\s*(.+?)\s*(#.*)?$")
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}
FIELDS = ("notebook", "lecture", "exercise", "answer", "result", "checked", "message")


class Unreadable(ValueError):
    pass


def value_of(text):
    """The answer written in `text`: a literal, or arithmetic on numbers; never anything run."""
    def walk(node):
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (int, float, str))):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](number(walk(node.operand)))
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            left, right = number(walk(node.left)), number(walk(node.right))
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise Unreadable("an exponent above 100")
            return OPERATORS[type(node.op)](left, right)
        raise Unreadable(f"not a number or a string: {text!r}")

    def number(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Unreadable(f"arithmetic on something that is not a number: {text!r}")
        return v
    try:
        return walk(ast.parse(text, mode="eval").body)
    except (SyntaxError, ZeroDivisionError, OverflowError) as e:
        raise Unreadable(f"{text!r}: {e}") from None


def exercises(notebook):
    """(lecture, exercise, answer text or None, printed verdict or None) for each exercise cell."""
    nb = json.loads(Path(notebook).read_text())
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", []))
        call = CALL.search(source)
        if not call:
            continue
        answers = [m.group(1) for m in map(ANSWER.match, source.splitlines()) if m]
        printed = None
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/plain", out.get("text", [])))
            if text.startswith(("correct:", "not yet:")):
                printed = text.strip()
        yield int(call.group(1)), int(call.group(2)), (answers[-1] if answers else None), printed


def grade_one(lecture, exercise, text, printed):
    """The CSV fields after notebook: lecture, exercise, answer, result, checked, message."""
    row = {"lecture": lecture, "exercise": exercise, "answer": text if text is not None else ""}
    try:
        value = value_of(text) if text is not None else None
    except Unreadable as e:
        return {**row, "result": "unreadable", "checked": "", "message": str(e)}
    if value is None:
        return {**row, "result": "unanswered", "checked": "", "message": ""}
    if lecture == 6:
        result = "correct" if printed and printed.startswith("correct:") else "wrong" if printed else "unanswered"
        return {**row, "result": result, "checked": "from the notebook's output", "message": printed or "not run"}
    verdict = getattr(check.lecture(lecture), f"exercise{exercise}")(value)
    return {**row, "result": "correct" if verdict.ok else "wrong", "checked": "again, here",
            "message": verdict.message}


def grade(folder, out_csv):
    """Grade every .ipynb under `folder`; write the CSV; return {notebook: (correct, exercises)}."""
    notebooks = sorted(Path(folder).rglob("*.ipynb"))
    scores = {}
    with open(out_csv, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        for nb in notebooks:
            name = str(nb.relative_to(folder))
            try:
                rows = [grade_one(*ex) for ex in exercises(nb)]
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                rows = [{"lecture": "", "exercise": "", "answer": "", "result": "unreadable", "checked": "",
                         "message": f"not a notebook: {e}"}]
            for row in rows:
                writer.writerow({"notebook": name, **row})
            scores[name] = (sum(r["result"] == "correct" for r in rows), len(rows))
    return scores
