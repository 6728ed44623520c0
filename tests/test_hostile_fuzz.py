"""Generated hostile input (hypothesis): scenario files and --set values through `dpsim run`,
notebooks through `course grade`. Every outcome is a result, or one line on stderr with exit
code 2 (grade: a CSV row for every notebook), within a time limit per example.

The generators draw keys the scenario has and keys it has not, and values of every TOML type
with the extremes that broke the command line before (integers of thousands of digits, hex
integers past float's range, inf and nan, control and bidi characters, deep nesting).
Iterations are set small (the limits on iterations are tested in test_limits.py); sizes are
drawn small or far past their limits, never in between, so each example runs in a second.
"""
import csv
import dataclasses
import json
import os
import string
import subprocess
import sys
from datetime import timedelta

import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from dpsim.sections import SECTIONS
from test_hostile_cli import course_main, one_line, within

KEYS = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)]
DEFAULTS = {f"{name}.{f.name}": tomli_w.dumps({"v": f.default})[4:].strip()      # each key's default, as TOML
            for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)
            if f.default not in (None, dataclasses.MISSING)}
CONTROL = "\n\r\t\x1b\x00\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
SMALL_RUN = ["--set", "training.iterations=2", "--set", "training.warmup_iterations=0"]
SIZE_KEYS = {"cluster.nodes", "cluster.gpus_per_node", "model.layers", "data.workers", "cluster.cpu_cores",
             "training.batch_per_gpu", "training.global_batch", "data.prefetch_batches"}
FUZZ = dict(deadline=timedelta(seconds=20), derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

texts = st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + "._-,=[]{}\"' " + CONTROL),
                max_size=30)
huge_ints = st.sampled_from(["9" * 5000, "0x" + "f" * 3000, "-" + "9" * 4400, "1" + "0" * 40, "0x" + "f" * 30])
scalars = st.one_of(
    st.integers(-3, 8).map(str),
    huge_ints,
    st.sampled_from(["0.0", "-1.5", "1e308", "1e-308", "inf", "-inf", "nan", "2.5", "1e30", "1e31"]),
    st.sampled_from(["true", "false", '"ring"', '"ps"', '"1bit"', '"pcie3"', '"custom"', '""', "'a\\u202eb'"]),
    texts.map(json.dumps),                                        # a quoted string, escapes and all
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.dictionaries(st.sampled_from(["bandwidth_gbs", "latency_us", "kind", "fp32_tflops", "mem_bw_gbs", "x"]),
                    inner, max_size=3).map(lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items()) + "}"),
), max_leaves=6)
keys = st.one_of(*[st.sampled_from(KEYS)] * 3, texts.map(lambda t: "sync." + t), texts)     # 3 in 5 real keys


def value_for(key):
    """Values for `key`: as often its default (so a run gets past the first key) as anything."""
    return st.one_of(st.just(DEFAULTS[key]), values) if key in DEFAULTS else values


def small_or_past(key, value):
    """A size key keeps a small value or one far past its limit (no minute-long example)."""
    if key in SIZE_KEYS and value.lstrip("-").isdigit() and 8 < int(value[:30]) < 10 ** 25:
        return "3"
    return value


@st.composite
def scenario_files(draw):
    """TOML text: a few sections of keys and values, now and then with a line of garbage."""
    lines = []
    for section in draw(st.lists(st.sampled_from(list(SECTIONS) + ["bogus", "a\u202eb"]), max_size=4, unique=True)):
        lines.append(f"[{json.dumps(section)}]")
        for key in draw(st.lists(st.sampled_from([k.split(".")[1] for k in KEYS if k.startswith(section + ".")]
                                                 or ["x"]), max_size=4, unique=True)):
            lines.append(f"{key} = {small_or_past(f'{section}.{key}', draw(value_for(f'{section}.{key}')))}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(texts))
    return "\n".join(lines) + "\n"


def outcome_is_a_result_or_one_line(code, out, err):
    if code == 0:
        json.loads(out)                                   # a whole result
        return
    assert code == 2, (code, err)
    line = one_line(err)
    assert not any(c in line for c in CONTROL), line       # names escaped


@settings(max_examples=25, **FUZZ)
@given(scenario_files())
def test_generated_scenario_files(tmp_path_factory, dpsim_cli, text):
    path = tmp_path_factory.mktemp("fuzz") / "s.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with within(30):
        outcome_is_a_result_or_one_line(*dpsim_cli("run", path, "--json", *SMALL_RUN))


pairs = st.lists(keys.flatmap(lambda key: st.tuples(st.just(key), value_for(key))), min_size=1, max_size=3)


@settings(max_examples=30, **FUZZ)
@given(pairs)
def test_generated_set_values(dpsim_cli, pairs):
    sets = [a for key, value in pairs for a in ("--set", f"{key}={small_or_past(key, value)}")]
    with within(30):
        outcome_is_a_result_or_one_line(*dpsim_cli("run", "d2l-ps-vs-ring", "--json", *sets, *SMALL_RUN))


@settings(max_examples=4, **FUZZ)
@given(scenario_files(), pairs)
def test_generated_input_through_the_command(tmp_path_factory, text, pairs):
    folder = tmp_path_factory.mktemp("fuzz")
    (folder / "s.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
    sets = [a for key, value in pairs for a in ("--set", f"{key}={small_or_past(key, value)}")]
    argv = [a.replace("\x00", "") for a in ["run", "s.toml", "--json", *sets, *SMALL_RUN]]   # argv holds no NUL
    p = subprocess.run([sys.executable, "-m", "dpsim", *argv], cwd=folder, capture_output=True, text=True,
                       timeout=60)
    outcome_is_a_result_or_one_line(p.returncode, p.stdout, p.stderr)


# ------------------------------------------------------------------ notebooks

answers = st.one_of(values, st.sampled_from(["((((9**99)**99)**99)**99)", "2 ** 100 ** 100", "32 / 500 * 1e3",
                                             "(" * 200 + "1" + ")" * 200, "__import__('os')", "None", "1 / 0"]))
exercise_cells = st.builds(
    lambda lecture, exercise, answer, split: {
        "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
        "source": (lambda s: s.splitlines(True) if split else s)(
            f"answer = {answer}\nlecture{lecture}.exercise{exercise}(answer)")},
    st.integers(0, 9), st.integers(0, 9), answers, st.booleans())
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                           max_leaves=8)
notebooks = st.one_of(      # (the file's text, whether it holds an exercise cell)
    st.lists(st.one_of(exercise_cells, json_values), max_size=4).map(
        lambda cells: (json.dumps({"cells": cells}), any(isinstance(c, dict) and "execution_count" in c
                                                         and "lecture" in str(c.get("source")) for c in cells))),
    json_values.map(lambda v: (json.dumps(v), False)),
    texts.map(lambda t: (t, False)),
)


@settings(max_examples=20, **FUZZ)
@given(st.lists(notebooks, min_size=1, max_size=4))
def test_generated_notebooks_each_get_rows(tmp_path_factory, submitted):
    folder = tmp_path_factory.mktemp("subs")
    for i, (text, _) in enumerate(submitted):
        (folder / f"n{i}.ipynb").write_text(text, encoding="utf-8", errors="surrogatepass")
    out = folder.parent / f"{folder.name}.csv"
    code, err = course_main("grade", folder, "-o", out, seconds=30)
    assert code == 0, err
    with open(out, newline="") as f:
        graded = {row["notebook"] for row in csv.DictReader(f)}
    expected = {f"n{i}.ipynb" for i, (text, exercise) in enumerate(submitted) if exercise or not is_a_notebook(text)}
    assert expected <= graded, (expected, graded)
    os.unlink(out)


def is_a_notebook(text):
    try:
        nb = json.loads(text)
    except ValueError:
        return False
    return isinstance(nb, dict) and isinstance(nb.get("cells", []), list)
