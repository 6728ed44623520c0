"""course grade against hostile submissions: answers that would compute for minutes, and
notebooks that are not notebooks. Each gets a row saying why; every other notebook is graded."""
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course import check, grade

LECTURE1 = Path(__file__).resolve().parents[1] / "lectures" / "01_sync_data_parallel.ipynb"


@pytest.mark.parametrize("text", ["((((9**99)**99)**99)**99)", "2 ** 100 ** 100", "10 ** 400",
                                  "-" * 600 + "1", "1 + " * 400 + "1", "7" * 2000, "(-8) ** 0.5"])
def test_bombs_are_unreadable_at_once(text):
    start = time.process_time()
    with pytest.raises(grade.Unreadable):
        grade.value_of(text)
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize("text, value", [("10 ** 100 * 10 ** 100 * 10 ** 100", 10 ** 300), ("2 ** 100", 2 ** 100), ("(2 ** 10) ** 10", 2 ** 100)])
def test_large_but_reasonable_answers_still_read(text, value):
    assert grade.value_of(text) == value


def good_notebook(path):
    nb = json.loads(LECTURE1.read_text())
    sol = check.solutions(1)
    for cell in nb["cells"]:
        text = "".join(cell.get("source", []))
        if cell["cell_type"] == "code" and "lecture1.exercise1(" in text:
            cell["source"] = text.replace("answer = None", f"answer = {sol[1]}")
    path.write_text(json.dumps(nb))


def cell(source):
    return {"cell_type": "code", "source": source, "outputs": [], "metadata": {}, "execution_count": None}


def test_malformed_notebooks_get_a_row_each_and_the_rest_are_graded(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    good_notebook(subs / "alice.ipynb")
    (subs / "list.ipynb").write_text("[1, 2, 3]")
    (subs / "strings.ipynb").write_text(json.dumps({"cells": ["answer = 1", 7, None]}))
    (subs / "folder.ipynb").mkdir()
    os.mkfifo(subs / "fifo.ipynb")
    (subs / "lecture9.ipynb").write_text(json.dumps({"cells": [cell("answer = 3\nlecture9.exercise1(answer)")]}))
    (subs / "exercise7.ipynb").write_text(json.dumps({"cells": [cell(["answer = 3\n", "lecture1.exercise7(answer)"])]}))
    (subs / "outputs.ipynb").write_text(json.dumps({"cells": [{**cell("answer = 1\nlecture6.exercise1(answer)"),
                                                               "outputs": ["correct: yes", {"data": 5}]}]}))
    out = tmp_path / "grades.csv"
    done = subprocess.run([sys.executable, "-m", "course", "grade", str(subs), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {}
    for r in csv.DictReader(open(out)):
        rows.setdefault(r["notebook"], r)                       # each notebook's first row
    assert rows["alice.ipynb"]["exercise"] == "1" and rows["alice.ipynb"]["result"] == "correct"
    assert rows["alice.ipynb"]["checked"] == grade.RECHECKED
    for name, why in [("list.ipynb", "no list of cells"), ("folder.ipynb", "not a regular file"),
                      ("fifo.ipynb", "not a regular file"), ("lecture9.ipynb", "lecture 9 has no exercise 1"),
                      ("exercise7.ipynb", "lecture 1 has no exercise 7")]:
        assert rows[name]["result"] == "unreadable" and why in rows[name]["message"], (name, rows[name])
    assert rows["outputs.ipynb"]["result"] == "unanswered"      # lecture 6, no verdict printed
    assert "strings.ipynb" not in rows or rows["strings.ipynb"]["result"] != "correct"


def test_lecture6_solutions_without_a_comparison_say_what_to_pass():
    sol = check.solutions(6)
    assert set(sol) == {1, 2, 3} and all("solutions(6, result)" in v for v in sol.values())
