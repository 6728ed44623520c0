"""The answer checkers of lecture 07 (sharding and compression), and its notebook as graded.

Right answers are worked out here by hand from the exercise statements (the ZeRO paper's 2 + 2 + K
bytes per parameter, the H100's 80 GB from its datasheet, 1-bit's 1/8 + 4/256 bytes per value), so a
checker that drifts from its own statement fails."""
import csv
import json
import math
from pathlib import Path

import pytest

from course import check
from course.__main__ import main
from course.check import Verdict, lecture7
from test_grade import submit

NOTEBOOK = Path(__file__).resolve().parents[1] / "lectures" / "07_sharding_and_compression.ipynb"
ALL = [lecture7.exercise1, lecture7.exercise2, lecture7.exercise3]

# Exercise 1: 13 B parameters, ZeRO-2 on 8 GPUs: 2 bytes whole, (2 + 12) bytes divided by 8.
EX1_GB = 2 * 13 + (2 + 12) * 13 / 8
# Exercise 2: 26 + 182 / N + 10 <= 80 on H100s (80 GB, NVIDIA H100 datasheet, SXM5).
EX2_CROSSING = 182 / (80 - 10 - 26)
# Exercise 3: 4 (4096 + 4096) r <= 4096 * 4096 * (1/8 + 4/256).
EX3_CROSSING = 4096 * 4096 * (1 / 8 + 4 / 256) / (4 * (4096 + 4096))


@pytest.mark.parametrize("check_", ALL, ids=lambda f: f.__name__)
def test_no_answer_yet_is_not_ok_and_says_what_to_give(check_):
    v = check_(None)
    assert isinstance(v, Verdict) and not v
    assert str(v).startswith("not yet: set `answer`")


@pytest.mark.parametrize("check_", ALL, ids=lambda f: f.__name__)
def test_nonsense_is_not_ok_and_does_not_raise(check_):
    assert not check_("banana")
    assert not check_([1, 2])


def test_exercise1_zero2_model_states():
    assert EX1_GB == 48.75
    assert lecture7.exercise1(EX1_GB) and lecture7.exercise1(48.8)          # rounding is fine
    assert "ZeRO-1" in lecture7.exercise1(2 * 13 + 2 * 13 + 12 * 13 / 8).message
    assert "ZeRO-3" in lecture7.exercise1(16 * 13 / 8).message
    assert "one GPU" in lecture7.exercise1(16 * 13).message
    assert not lecture7.exercise1(EX1_GB * 1.05)


def test_exercise2_fewest_gpus_rounded_up():
    assert 4 < EX2_CROSSING < 5
    assert lecture7.exercise2(5)
    assert "round up" in lecture7.exercise2(4).message
    assert "round up" in lecture7.exercise2(round(EX2_CROSSING, 2)).message
    assert "ZeRO-3" in lecture7.exercise2(math.ceil(16 * 13 / 70)).message         # 208 / N + 10 <= 80
    assert "ZeRO-1" in lecture7.exercise2(math.ceil(12 * 13 / (80 - 10 - 52))).message
    assert not lecture7.exercise2(6)


def test_exercise3_powersgd_rank_against_one_bit():
    assert EX3_CROSSING == 72.0                     # equal bytes at 72: "no more" includes it
    assert lecture7.exercise3(72)
    assert not lecture7.exercise3(73) and not lecture7.exercise3(71)
    assert "scales" in lecture7.exercise3(4096 * 4096 / 8 / (4 * 8192)).message     # 64
    assert "one factor" in lecture7.exercise3(2 * EX3_CROSSING).message
    assert "bytes" in lecture7.exercise3(4 * EX3_CROSSING).message


def test_the_setting_is_dpsims_presets():
    """The checker reads the matrix and the GPU's memory from dpsim's presets; they must be
    what the exercises state (AlexNet's 4096 x 4096 classifier.4, the H100's 80 GB)."""
    assert lecture7._matrix() == (4096, 4096)
    assert lecture7._capacity_gb() == 80.0


def test_the_notebook_states_the_checkers_constants():
    text = " ".join("".join(c["source"]) for c in json.loads(NOTEBOOK.read_text())["cells"]
                    if c["cell_type"] == "markdown")
    text = " ".join(text.split())
    for phrase in ("13 billion parameters", "**ZeRO-2 on 8 GPUs**", "(80 GB each, `dpsim`'s `h100` preset)",
                   "Activations and buffers take 10 GB per GPU", "`classifier.4` weight is a 4096 x 4096 matrix"):
        assert phrase in text, phrase


def test_a_lecture7_notebook_is_graded_by_its_checkers(tmp_path, capsys):
    sol = check.solutions(7)
    subs = tmp_path / "subs"
    subs.mkdir()
    submit(NOTEBOOK, subs, "alice.ipynb", {1: sol[1], 2: sol[2], 3: sol[3]})
    submit(NOTEBOOK, subs, "bob.ipynb", {1: "16 * 13", 2: "4"})
    assert main(["grade", str(subs), "-o", str(tmp_path / "grades.csv")]) == 0
    rows = {(r["notebook"], r["exercise"]): r for r in csv.DictReader(open(tmp_path / "grades.csv"))}
    assert all(rows[("alice.ipynb", k)]["lecture"] == "7" for k in "123")
    assert [rows[("alice.ipynb", k)]["result"] for k in "123"] == ["correct"] * 3
    assert [rows[("bob.ipynb", k)]["result"] for k in "123"] == ["wrong", "wrong", "unanswered"]
    assert "alice.ipynb: 3 of 3 exercises correct" in capsys.readouterr().out


def test_worked_figures_as_derived_by_hand():
    from test_worked_solutions import blocks, stated_answer
    text = blocks(check.worked(7))
    assert "2 x 13 + (2 + 12) x 13 / 8 = 26 + 22.75 = 48.75 GB" in text[1]
    assert f"N >= 182 / 44 = {EX2_CROSSING:.2f}" in text[2] and "ZeRO-1 needs 9, ZeRO-3 3" in text[2]
    assert "32,768 r <= 2,359,296" in text[3] and f"r <= {EX3_CROSSING:.2f}" in text[3]
    assert [stated_answer(text[k]) for k in (1, 2, 3)] == [EX1_GB, 5, 72]


def test_worked_figures_follow_the_constants(monkeypatch):
    """The ZeRO paper's Figure 1 setting (7.5 B parameters, 64 GPUs): ZeRO-2 holds
    2 x 7.5 + 14 x 7.5 / 64 = 16.64 GB (the figure prints 16.6)."""
    monkeypatch.setattr(lecture7, "PARAMS", 7.5e9)
    monkeypatch.setattr(lecture7, "EX1_GPUS", 64)
    assert lecture7.solution1() == pytest.approx(2 * 7.5 + 14 * 7.5 / 64)
    assert f"{2 * 7.5 + 14 * 7.5 / 64:.4g} GB" in check.worked(7)
