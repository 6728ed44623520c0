"""Hostile and careless input to the dpsim command: one line, exit code 2, no traceback, nothing
written where not asked, and quickly (a limit refuses the input before anything is allocated)."""
import os
import subprocess
import sys
import time

import pytest

import dpsim
from dpsim.errors import ScenarioError

NESTED = "a = " + "{b = " * 500 + "1" + "}" * 500 + "\n"

# (what, argv (with {tmp} for a scratch folder), words the one line must hold)
CASES = [
    ("a vanishing bandwidth", ["run", "d2l-ps-vs-ring", "--set", "cluster.intra={bandwidth_gbs=1e-308,latency_us=1}"],
     ["cluster.intra.bandwidth_gbs", "range"]),
    ("an enormous GPU", ["run", "d2l-ps-vs-ring", "--set", "cluster.gpu={fp32_tflops=1e308,mem_bw_gbs=900}"],
     ["cluster.gpu.fp32_tflops", "range"]),
    ("a vanishing GPU speed", ["run", "d2l-ps-vs-ring", "--set", "cluster.gpu_speed=[1e-308]"],
     ["cluster.gpu_speed[0]", "range"]),
    ("a billion GPUs in a sweep", ["sweep", "d2l-ps-vs-ring", "--gpus", "1000000000"], ["131,072", "DPSIM_NO_LIMITS"]),
    ("a billion nodes", ["run", "d2l-ps-vs-ring", "--set", "cluster.nodes=1000000000"], ["cluster.nodes", "131,072"]),
    ("a billion loader workers", ["run", "d2l-ps-vs-ring", "--set", "data.workers=1e9"], ["data.workers", "1,024"]),
    ("a billion layers", ["run", "d2l-ps-vs-ring", "--set", "model.layers=1e9"], ["model.layers", "100,000"]),
    ("ten million iterations", ["run", "d2l-ps-vs-ring", "--set", "training.iterations=10000000"],
     ["training.iterations", "100,000"]),
    ("a directory as the plot", ["run", "d2l-ps-vs-ring", "--plot", "{tmp}"], ["--plot", "directory"]),
    ("a plot without an extension", ["run", "d2l-ps-vs-ring", "--plot", "{tmp}/name"], ["--plot", ".png"]),
    ("a plot of an unknown format", ["sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--plot", "{tmp}/x.gif"],
     ["--plot", ".svg"]),
    ("a directory as the trace", ["run", "d2l-ps-vs-ring", "--trace", "{tmp}"], ["--trace", "directory"]),
    ("a binary scenario file", ["run", "{tmp}/binary.toml"], ["not a text file"]),
    ("500 nested tables", ["run", "{tmp}/nested.toml"], ["nested too deeply"]),
    ("500 nested tables in --set", ["run", "d2l-ps-vs-ring", "--set", "sync.strategy=" + NESTED[4:].strip()],
     ["sync.strategy"]),
    ("a FIFO as the scenario", ["run", "{tmp}/fifo.toml"], ["not a regular file"]),
]


@pytest.fixture
def scratch(tmp_path):
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "nested.toml").write_text(NESTED)
    os.mkfifo(tmp_path / "fifo.toml")
    return tmp_path


@pytest.mark.parametrize("what, argv, words", CASES, ids=[c[0] for c in CASES])
def test_a_bad_input_ends_in_one_line(scratch, what, argv, words, dpsim_command):
    before, start = sorted(scratch.iterdir()), time.monotonic()
    p = dpsim_command(*[a.replace("{tmp}", str(scratch)) for a in argv], cwd=scratch)
    seconds = time.monotonic() - start
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpsim: error: ") and "Traceback" not in p.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert p.stdout == ""
    assert sorted(scratch.iterdir()) == before                  # nothing written, not even name.png
    assert seconds < 20


def test_the_limits_lift_with_the_environment_variable(tmp_path, dpsim_command):
    env = {**os.environ, "DPSIM_NO_LIMITS": "1"}
    p = dpsim_command("run", "d2l-ps-vs-ring", "--set", "data.workers=2000", "--json", cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stderr


def test_a_trace_too_large_is_refused_while_it_grows(monkeypatch):
    import dpsim
    from dpsim import limits
    monkeypatch.setattr(limits, "TRACE_SPANS", 500)
    with pytest.raises(dpsim.ScenarioError, match="--trace.*500 spans"):
        dpsim.simulate("d2l-ps-vs-ring", {"sync.strategy": "ring"}, trace=True)


def test_a_full_disk_on_stdout_is_one_line():
    if not os.path.exists("/dev/full"):
        pytest.fail("this test needs /dev/full (Linux)")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "dpsim", "list"], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == ["dpsim: error: cannot write the output: No space left on device"]


def test_the_iteration_limit_names_the_key_that_went_over():
    # found by test_config's fuzzing: 2 iterations after 99,999 warm-up ones is the warm-up's doing
    with pytest.raises(ScenarioError, match=r"^training\.warmup_iterations: 100,001 iterations"):
        dpsim.load_scenario("d2l-ps-vs-ring", {"training.iterations": 2, "training.warmup_iterations": 99_999})
    with pytest.raises(ScenarioError, match=r"^training\.iterations: "):
        dpsim.load_scenario("d2l-ps-vs-ring", {"training.iterations": 100_000, "training.warmup_iterations": 1})
