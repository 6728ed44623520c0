"""Sweeps over GPU counts and varied keys: dpsim.sweep_grid() and `dpsim sweep --vary`.

Serial, local processes (--jobs) and mpi4py.futures workers must give the same rows in the
same order; each distinct scenario is simulated once; mistakes end in one line and exit 2.
"""
import importlib
import json

import pytest

from dpsim import analytic, load_scenario, simulate, sweep, sweep_grid
from dpsim.cli_sweep import split_values
from dpsim.hardware import GPUS

from dpsim_helpers import star
from mpirun import run_mpi

sweeps_module = importlib.import_module("dpsim.sweeps")
V100_GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)
SMALL = ["d2l-ps-vs-ring", "--gpus", "1,2,4", "--vary", "sync.strategy=ps,ring",
         "--vary", "sync.compression=none,1bit", "--set", "training.iterations=3"]


def test_rows_come_combination_by_combination_in_the_order_given():
    vary = {"sync.strategy": ["ring", "ps"], "training.batch_per_gpu": [16, 32]}
    rows = sweep_grid("d2l-ps-vs-ring", [4, 1, 2], vary=vary, overrides={"training.iterations": 3})
    assert [(s["sync.strategy"], s["training.batch_per_gpu"], r.gpus) for s, r in rows] == [
        (strategy, batch, g) for strategy in ("ring", "ps") for batch in (16, 32) for g in (4, 1, 2)]
    for settings, r in rows:
        assert r.scenario["training"]["batch_per_gpu"] == settings["training.batch_per_gpu"]
        assert r.scenario["sync"]["strategy"] == (settings["sync.strategy"] if r.gpus > 1 else "none")


def test_the_varied_strategy_reaches_the_simulation_and_matches_the_closed_forms():
    m = 64e6
    rows = sweep_grid(star(8, 12.5, 3.0, params=int(m / 4)), [2, 4, 8], vary={"sync.strategy": ["ps", "ring"]})
    closed = {"ps": analytic.ps, "ring": analytic.ring}
    for settings, r in rows:
        formula = closed[settings["sync.strategy"]]
        assert r.sync_time_s == pytest.approx(formula(r.gpus, m, 6e-6, 1 / 12.5e9, V100_GAMMA), rel=0.01)
    at_8 = {s["sync.strategy"]: r for s, r in rows if r.gpus == 8}
    assert at_8["ps"].sync_time_s > 3 * at_8["ring"].sync_time_s     # 2(n-1)m against 2(n-1)/n m on the wire


def test_a_batch_size_changes_the_baseline_and_a_strategy_does_not():
    vary = {"training.batch_per_gpu": [16, 64], "sync.strategy": ["ps", "ring"]}
    rows = sweep_grid("d2l-ps-vs-ring", [1, 4], vary=vary, overrides={"training.iterations": 3})
    one_gpu = {(s["training.batch_per_gpu"], s["sync.strategy"]): r for s, r in rows if r.gpus == 1}
    assert one_gpu[16, "ps"].to_dict() == one_gpu[16, "ring"].to_dict()
    assert one_gpu[16, "ps"].throughput_samples_per_s < one_gpu[64, "ps"].throughput_samples_per_s
    for s, r in rows:
        base = one_gpu[s["training.batch_per_gpu"], s["sync.strategy"]]
        assert r.speedup == pytest.approx(r.throughput_samples_per_s / base.throughput_samples_per_s, rel=1e-12)


def test_each_distinct_scenario_is_simulated_once(monkeypatch):
    calls = []
    real_run = sweeps_module.Engine.run
    monkeypatch.setattr(sweeps_module.Engine, "run", lambda self: calls.append(self.sc) or real_run(self))
    totals = []
    vary = {"sync.strategy": ["ps", "ring"], "sync.compression": ["none", "1bit"]}
    rows = sweep_grid("d2l-ps-vs-ring", [1, 2, 4], vary=vary, overrides={"training.iterations": 3},
                      progress=lambda done, total: totals.append(total))
    # one-GPU baselines: without and with 1bit (strategy is 'none' on one GPU); 2 strategies x
    # 2 compressions x 2 GPU counts; the uncompressed twins of the 1bit runs are rows already.
    assert len(calls) == 2 + 8 and set(totals) == {10}
    assert len({repr(sc) for sc in calls}) == len(calls)
    assert len(rows) == 12


def test_grid_rows_equal_simulate_and_sweep_results():
    rows = sweep_grid("d2l-ps-vs-ring", [1, 4], vary={"sync.compression": ["none", "1bit"]},
                      overrides={"training.iterations": 3})
    for settings, r in rows:
        if r.gpus == 4:
            alone = simulate("d2l-ps-vs-ring", {"training.iterations": 3, **settings})
            assert r.to_dict() == alone.to_dict()         # the uncompressed twin included
    plain = [r.to_dict() for s, r in rows if s["sync.compression"] == "none"]
    assert [r.to_dict() for r in sweep(load_scenario("d2l-ps-vs-ring", {"training.iterations": 3}), [1, 4])] == plain


def test_serial_equals_local_processes_equals_mpi4py_futures(dpsim_cli):
    code, serial, _ = dpsim_cli("sweep", *SMALL, "--json")
    assert code == 0
    code, parallel, _ = dpsim_cli("sweep", *SMALL, "--json", "--jobs", "2")
    assert code == 0 and parallel == serial
    proc = run_mpi(3, ["-m", "mpi4py.futures", "-m", "dpsim", "sweep", *SMALL, "--json"], timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == json.loads(serial)
    assert len(json.loads(serial)) == 12


def test_text_table_has_a_column_per_varied_key(dpsim_cli):
    code, text, _ = dpsim_cli("sweep", *SMALL)
    code_json, out, _ = dpsim_cli("sweep", *SMALL, "--json")
    assert code == code_json == 0
    lines = text.splitlines()
    assert lines[1] == "varied: sync.strategy = ps, ring; sync.compression = none, 1bit"
    assert lines[2].split()[:3] == ["sync.strategy", "sync.compression", "GPUs"]
    runs = json.loads(out)
    table = [line.split() for line in lines[3:3 + len(runs)]]
    assert [row[:4] for row in table] == [[r["settings"]["sync.strategy"], r["settings"]["sync.compression"],
                                           str(r["gpus"]), str(r["scenario"]["cluster"]["nodes"])] for r in runs]
    assert [float(row[6]) for row in table] == pytest.approx([r["speedup"] for r in runs], abs=0.006)
    # ps and ring with 1-bit are one experiment (1-bit has its own exchange): the table says so
    notes = [line for line in lines[3 + len(runs):] if line.startswith("note:")]
    onebit = [r for r in runs if r["settings"]["sync.compression"] == "1bit" and r["gpus"] > 1]
    same = {r["gpus"] for r in onebit if sum(x["gpus"] == r["gpus"] and x["iteration_time_s"] == r["iteration_time_s"]
                                           for x in onebit) > 1}
    assert len(notes) == len(same) and all("1-bit SGD has its own exchange" in n for n in notes)


def test_progress_goes_to_stderr_only(dpsim_cli):
    code, out, err = dpsim_cli("sweep", *SMALL, "--json", "--progress")
    assert code == 0
    json.loads(out)                                        # nothing but the JSON on stdout
    assert "10/10 simulations" in err and "ETA" in err and "elapsed" in err
    code, out, err = dpsim_cli("sweep", *SMALL, "--json")
    assert code == 0 and err == ""                         # not a terminal: no bar unless asked


def test_plot_file_is_written(tmp_path, dpsim_cli):
    path = tmp_path / "scaling.png"
    code, _, err = dpsim_cli("sweep", *SMALL, "--plot", str(path))
    assert code == 0, err
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("vary, key", [
    ("colour.strategy=ps,ring", "colour.strategy"),
    ("sync.colour=ps,ring", "sync.colour"),
    ("sync.strategy=ps,gossip", "sync.strategy"),
    ("training.batch_per_gpu=32,0", "training.batch_per_gpu"),
    ("sync.strategy", "--vary"),
    ("sync.strategy=ps,,ring", "--vary"),
    ("training.iterations=2,4", "--vary"),                # also fixed by --set
    ("cluster.nodes=1,2", "cluster.nodes"),
])
def test_bad_vary_is_one_line_and_exit_2(vary, key, dpsim_cli):
    code, out, err = dpsim_cli("sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--set", "training.iterations=3",
                                "--vary", vary)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and key in err and "Traceback" not in err


def test_bad_jobs_is_one_line_and_exit_2(dpsim_cli):
    code, out, err = dpsim_cli("sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--jobs", "-1")
    assert code == 2 and out == "" and err.count("\n") == 1 and "jobs" in err


def test_values_split_at_top_level_commas_only():
    assert split_values("ps, ring") == ["ps", "ring"]
    assert split_values('{bandwidth_gbs = 10, latency_us = 5},nvlink2,"a,b",[1.0, 0.7]') == [
        "{bandwidth_gbs = 10, latency_us = 5}", "nvlink2", '"a,b"', "[1.0, 0.7]"]
