"""`dpsim show NAME > my.toml && dpsim run my.toml` gives what `dpsim run NAME` gives: the file
`show` prints is valid TOML that loads to the same scenario, for every built-in scenario and
every node preset."""
import tomllib

import pytest

from dpsim import config, hardware, simulate
from dpsim.cli import main

NODE_CASES = [("d2l-ps-vs-ring", {"cluster.node": node, "cluster.gpu_speed": []}) for node in hardware.NODES]
# a measured rate (compute.samples_per_s implies the efficiency) and strong scaling: show prints
# the implied figures too, and loading them back must not count them twice
NOTED = [("mxnet-vs-tf-4gpu", {"compute.samples_per_s": 2100.0, "compute.rate_batch": 128}),
         ("d2l-ps-vs-ring", {"training.global_batch": 256})]
CASES = [(name, {}) for name in config.builtin_names()] + NODE_CASES + NOTED


def shown(capsys, name, sets):
    argv = ["show", name] + [f"--set={k}={v!r}".replace("'", '"') for k, v in sets.items() if v != []]
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("name,sets", CASES, ids=[f"{n}-{'-'.join(map(str, s.values()))}" for n, s in CASES])
def test_show_prints_a_file_that_loads_to_the_same_scenario(tmp_path, capsys, name, sets):
    text = shown(capsys, name, sets)
    tomllib.loads(text)                                   # valid TOML, not just text that looks like it
    path = tmp_path / "my.toml"
    path.write_text(text)
    original = config.load_scenario(name, {k: v for k, v in sets.items() if v != []})
    again = config.load_scenario(path)
    assert again == original
    assert simulate(again).to_dict() == simulate(original).to_dict()


@pytest.mark.parametrize("name,sets", NOTED)
def test_show_keeps_the_notes_as_comments(capsys, name, sets):
    notes = config.notes(config.load_scenario(name, sets))
    assert notes
    text = shown(capsys, name, sets)
    comments = [line[len("# note: "):] for line in text.splitlines() if line.startswith("# note: ")]
    assert comments == notes


def test_dpsim_run_reads_what_show_wrote(tmp_path, capsys):
    path = tmp_path / "my.toml"
    path.write_text(shown(capsys, "cntk-1bit-k80", {}))
    assert main(["run", str(path), "--json"]) == 0
    from_file = capsys.readouterr().out
    assert main(["run", "cntk-1bit-k80", "--json"]) == 0
    assert from_file == capsys.readouterr().out
