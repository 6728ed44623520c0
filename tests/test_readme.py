"""README.md's code blocks are meant to run: the scenario example is valid TOML that dpsim
accepts, and the Python snippet runs as written."""
import re
import tomllib
from pathlib import Path

import dpsim

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_the_scenario_example_is_a_scenario_dpsim_accepts():
    (example,) = blocks("toml")
    data = tomllib.loads(example)                          # a repeated table would fail here
    sc = dpsim.load_scenario(data)
    assert sc.name == "my-cluster" and sc.gpus == data["cluster"]["nodes"] * data["cluster"]["gpus_per_node"]


def test_the_python_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (snippet,) = blocks("python")
    scope = {}
    exec(compile(snippet, "README.md", "exec"), scope)     # the repository's own README, not input
    assert scope["res"].trace is not None and (tmp_path / "trace.json").exists()
    assert [r.gpus for r in scope["runs"]] == [1, 2, 4, 8] and len(scope["rows"]) == 8
