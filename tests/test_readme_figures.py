"""Every figure README.md states that dpsim computes, recomputed (issue 17): the stories'
table, the 1-bit verdict, and `dpsim validate`'s printout. The speed tables in "Simulation
speed" are CPU seconds of `python -m dpsim.bench` on one machine: a measurement, not checked here."""
import re
from pathlib import Path

import pytest

from dpsim import simulate, sweep, validate
from dpsim.engine import Engine
from dpsim import load_scenario

from dpsim_helpers import d2l_transfers_only
from test_stories import SYNTHETIC, TF_AFTER, TF_BEFORE

README = (Path(__file__).parent.parent / "README.md").read_text()


def story_row(scenario):
    """The 'simulated' cell of the stories' table row for `scenario`."""
    row = next(line for line in README.splitlines() if line.startswith(f"| `{scenario}` |"))
    return row.strip("|").split("|")[-1].strip()


def numbers(text):
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*\.?\d*", text)]


def test_cntk_row():
    plain = simulate("cntk-1bit-k80").throughput_samples_per_s
    onebit = simulate("cntk-1bit-k80", {"sync.compression": "1bit"}).throughput_samples_per_s
    assert story_row("cntk-1bit-k80") == f"{plain:,.0f}; 1-bit {onebit:,.0f} (and slower)"
    assert onebit < plain


def test_onebit_wins_row():
    sc = load_scenario("onebit-wins-ethernet")
    onebit = simulate(sc).throughput_samples_per_s
    plain = simulate(sc, {"sync.compression": "none"}).throughput_samples_per_s
    assert story_row("onebit-wins-ethernet") == \
        f"1-bit {onebit:,.0f} vs {plain:,.0f} samples/s on {sc.gpus} GPUs over 10 GbE"
    assert sc.cluster.inter == "10gbe"


D2L_SYNCS = ({"sync.ps_location": "gpu0"}, {"sync.ps_location": "cpu"}, {"sync.strategy": "sharded-ps"})


def test_d2l_row():
    # As lecture 2 and test_analytic count: latency zero, additions practically free; and as shipped.
    transfers = [Engine(d2l_transfers_only().with_overrides(o)).sync_alone() * 1e3 for o in D2L_SYNCS]
    shipped = [Engine(load_scenario("d2l-ps-vs-ring").with_overrides(o)).sync_alone() * 1e3 for o in D2L_SYNCS]
    row = story_row("d2l-ps-vs-ring")
    assert row.startswith(" / ".join(f"{x:.0f}" for x in transfers) + " ms counting transfers only")
    assert "; " + " / ".join(f"{x:.0f}" for x in shipped) + " ms as shipped" in row




def test_mxnet_vs_tf_row():
    runs = [sweep("mxnet-vs-tf-4gpu", gpus=[1, 4], overrides=o) for o in
            ({}, TF_AFTER, {**TF_AFTER, **SYNTHETIC}, {**TF_BEFORE, **SYNTHETIC})]
    pairs = [f"{one.throughput_samples_per_s:,.0f} / {four.throughput_samples_per_s:,.0f}" for one, four in runs]
    assert story_row("mxnet-vs-tf-4gpu") == f"{pairs[0]}; {pairs[1]}, {pairs[2]}, {pairs[3]}"


def test_dataparallel_row():
    starving = simulate("pytorch-dataparallel-4gpu", {"data.workers": 0}).speedup
    fed = simulate("pytorch-dataparallel-4gpu").speedup
    assert story_row("pytorch-dataparallel-4gpu") == f"{starving:.2f}x, {fed:.2f}x"


def test_the_1bit_verdict_sentence():
    r = simulate("cntk-1bit-k80", {"sync.compression": "1bit"})
    sentence = re.search(r"1-bit sends (\d+) KB\s+instead of ([\d.]+) MB per GPU.*?and ([\d.]+) ms of", README, re.S)
    assert sentence, "README's 1-bit verdict sentence moved"
    kb, mb, codec_ms = (float(x) for x in sentence.groups())
    assert kb == round(r.bytes_sent_per_gpu / 1e3)
    assert mb == round(r.uncompressed.bytes_sent_per_gpu / 1e6, 1)
    assert codec_ms == round(r.breakdown_s["compression"] * 1e3, 1)


def test_validate_printout_is_todays(validated):
    block = README.split("Today it prints:\n\n```\n")[1].split("```")[0]
    rows = validated
    expected = validate.table(rows) + [validate.summary(rows), "sources and assumptions: dpsim validate --verbose"]
    assert block.rstrip("\n").splitlines() == expected


@pytest.fixture(scope="module")
def validated():
    return validate.validate()


@pytest.mark.parametrize("word, within, count", [("Sixty-two predicted cases land within tolerance", True, 62),
                                                 ("nine do not", False, 9)])
def test_validate_counts_in_prose(validated, word, within, count):
    rows = [r for r in validated if r.role == "predicted"]
    assert word in README
    assert sum(r.within is within for r in rows) == count


def test_the_dpsim_run_printout_is_todays():
    import subprocess
    import sys
    block = README.split("`dpsim run d2l-ps-vs-ring` prints:\n\n```\n")[1].split("```")[0]
    proc = subprocess.run([sys.executable, "-m", "dpsim", "run", "d2l-ps-vs-ring"], capture_output=True, text=True)
    assert proc.returncode == 0 and [line.rstrip() for line in proc.stdout.splitlines()] == block.splitlines()


def dpsim_command_lines():
    """Every line of README's command blocks that starts with `dpsim ` (comments cut)."""
    lines = []
    for block in re.findall(r"```\n(.*?)```", README, flags=re.S):
        lines += [line.split("  #")[0].split(" > ")[0].strip() for line in block.splitlines() if line.startswith("dpsim ")]
    return lines


@pytest.mark.parametrize("line", dpsim_command_lines())
def test_every_dpsim_command_line_runs(line, tmp_path, monkeypatch):
    """As a user would type it, in an empty folder where my.toml is README's scenario example."""
    import shlex
    from dpsim_helpers import run_dpsim
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.toml").write_text(re.findall(r"```toml\n(.*?)```", README, flags=re.S)[0])
    code, out, err = run_dpsim(*shlex.split(line)[1:])
    assert code == 0, err


def mpiexec_lines():
    """The `mpiexec -n N python -m mpi_impl...` lines of README's mpi_impl block (comments cut)."""
    block = README.split("## The real thing: mpi_impl\n\n```\n")[1].split("```")[0]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("mpiexec")]


@pytest.mark.parametrize("line", mpiexec_lines())
def test_readmes_mpi_impl_lines_run_as_typed(line, tmp_path):
    import os
    import shlex
    import subprocess
    import sys

    from mpirun import ROOT, mpiexec
    words = shlex.split(line)
    assert words[:3] == ["mpiexec", "-n", "4"] and words[3] == "python"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([mpiexec(), *words[1:3], sys.executable, *words[4:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if "--json" in words:
        assert (tmp_path / words[words.index("--json") + 1]).exists()
