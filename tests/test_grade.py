"""python -m course grade: the lecture notebooks as students hand them in, graded by the same
checkers; answers are read, never run. And every solution the teacher gets passes its checker."""
import csv
import json
from pathlib import Path

import pytest

from course import check, grade
from course.__main__ import main

LECTURES = sorted((Path(__file__).resolve().parents[1] / "lectures").glob("0*.ipynb"))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7])
def test_every_solution_passes_its_checker(n):
    module = check.lecture(n)
    for k, answer in check.solutions(n).items():
        assert getattr(module, f"exercise{k}")(answer), (n, k, answer)


def test_lecture6_solutions_come_from_the_students_own_comparison():
    row = lambda ranks, comp, pred, meas, sps: {
        "ranks": ranks, "sync": "ring", "compress": comp, "predicted_iteration_s": pred,
        "measured_iteration_s": meas, "measured_samples_per_s": sps,
        "predicted_phases_s": {"compute": 0.005, "exposed_comm": 0.001},
        "measured_phases_s": {"compute": 0.005, "exposed_comm": 0.004}}
    result = {"rows": [row(1, "none", 0.008, 0.008, 8000.0), row(2, "none", 0.011, 0.010, 12800.0),
                       row(2, "1bit", 0.02, 0.02, 6400.0)]}
    sol = check.solutions(6, result)
    assert sol[1] == pytest.approx(10.0) and sol[2] == pytest.approx(1.6) and sol[3] == "exposed_comm"


def submit(source, folder, name, answers, printed=None):
    """A copy of a lecture notebook with `answer = ...` filled in per exercise (and, for
    lecture 6, the verdict its run printed)."""
    nb = json.loads(source.read_text())
    k = 0
    for cell in nb["cells"]:
        text = "".join(cell.get("source", []))
        if cell["cell_type"] == "code" and grade.CALL.search(text):
            k += 1
            if k in answers:
                cell["source"] = text.replace("answer = None", f"answer = {answers[k]}").splitlines(keepends=True)
            if printed and k in printed:
                cell["outputs"] = [{"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                                    "data": {"text/plain": [printed[k]]}}]
    (folder / name).write_text(json.dumps(nb))


def test_grading_a_folder_rechecks_answers_and_writes_one_row_per_exercise(tmp_path, capsys):
    l1, l6 = LECTURES[0], LECTURES[5]
    sol = check.solutions(1)
    subs = tmp_path / "subs"
    subs.mkdir()
    submit(l1, subs, "alice.ipynb", {1: sol[1], 2: f"{sol[2]}  # my answer", 3: '"strong"'})
    submit(l1, subs, "bob.ipynb", {1: f"{sol[1]} * 2", 2: "__import__('os').system('true')"})
    submit(l6, subs, "carol.ipynb", {1: "-3.2", 2: "1.6"},
           printed={1: "correct: -3.2%", 2: "not yet: 1.6x is not it"})
    (subs / "broken.ipynb").write_text("{not json")
    assert main(["grade", str(subs), "-o", str(tmp_path / "grades.csv")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "grades.csv")))
    by = {(r["notebook"], r["exercise"]): r for r in rows}
    assert [by[("alice.ipynb", k)]["result"] for k in "123"] == ["correct"] * 3
    assert by[("bob.ipynb", "1")]["result"] == "wrong" and "Hint" in by[("bob.ipynb", "1")]["message"]
    assert by[("bob.ipynb", "2")]["result"] == "unreadable"                      # read, never run
    assert by[("bob.ipynb", "3")]["result"] == "unanswered"
    assert [by[("carol.ipynb", k)]["result"] for k in "123"] == ["correct", "wrong", "unanswered"]
    assert by[("carol.ipynb", "1")]["checked"] == "from the notebook's output"
    assert by[("broken.ipynb", "")]["result"] == "unreadable"
    out = capsys.readouterr().out
    assert "alice.ipynb: 3 of 3 exercises correct" in out and "bob.ipynb: 0 of 3" in out


@pytest.mark.parametrize("text, value", [("224", 224), ("-3.5", -3.5), ('"ps"', "ps"), ("32 / 500 * 1e3", 64.0),
                                         ("None", None), ("2 ** 10", 1024)])
def test_answers_are_literals_or_arithmetic(text, value):
    assert grade.value_of(text) == value


@pytest.mark.parametrize("text", ["open('x')", "[1, 2]", "x + 1", "9 ** 9999", "1 / 0", "lambda: 1"])
def test_anything_else_is_unreadable(text):
    with pytest.raises(grade.Unreadable):
        grade.value_of(text)
