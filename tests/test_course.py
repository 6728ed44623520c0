"""course/: calibration writes a scenario dpsim accepts, the fits recover known values,
compare prints both columns and a plot, and the diagnosis names the right phase."""
import json
import os
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

import dpsim
from dpsim import vocabulary
from dpsim import compute
from dpsim.engine import Engine
from course import calibrate, compare, fit, spread

ROOT = Path(__file__).resolve().parents[1]


def run_course(*args, cwd, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "course", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """A real calibration of a small MLP (the model the compare test runs)."""
    out = tmp_path_factory.mktemp("cal") / "profile.toml"
    done = run_course("calibrate", "-o", str(out), "--width", "64", "--depth", "1", "--batch", "16", "--rounds", "5",
                      "--accept-noisy", cwd=out.parent)           # a busy test machine still gives a profile
    assert done.returncode == 0, done.stderr
    assert "e_max" in done.stdout and "kernel_launch_us" in done.stdout
    return out


@pytest.mark.parametrize("e_max, b_half", [(0.4, 8.0), (0.9, 0.0), (0.05, 100.0)])
def test_fit_compute_recovers_the_closed_form(e_max, b_half):
    flops, peak_tflops = 6.7e6, 0.29
    points = [(b, compute.compute_time_s(flops, b, peak_tflops, e_max, b_half)) for b in (16, 64)]
    got = calibrate.fit_compute(points, flops, peak_tflops * 1e12)
    assert got == pytest.approx((e_max, b_half), rel=1e-6, abs=1e-9)


def test_calibrate_writes_a_fragment_dpsim_accepts(profile):
    frag = spread.values(tomllib.loads(profile.read_text()))      # each range at its value
    assert frag["cluster"]["gpu"]["name"] == "this-cpu"
    assert {"bandwidth_gbs", "latency_us"} <= set(frag["cluster"]["intra"])
    assert 0 < frag["compute"]["efficiency"] <= 1
    assert 0 < frag["cluster"]["devices_per_node"] <= frag["cluster"]["cpu_cores"]
    assert frag["cluster"]["shared_memory_messages"] and frag["sync"]["busy_poll"]
    assert frag["compute"]["codec_gbs"] > 0 and frag["compute"]["kernel_launch_us"] >= 0
    assert frag["cluster"]["timeslice_overhead"] >= 0 and frag["compute"]["shared_jitter"] >= 0   # 4 ranks, 2 cores
    sc = dpsim.load_scenario(profile)                          # the file on its own
    assert sc.model.params == frag["model"]["params"]
    merged = dpsim.load_scenario("cntk-1bit-k80")               # merged into a base scenario
    data = merged.to_dict()
    for section in ("cluster", "model", "compute", "sync"):
        data[section] = {**data[section], **frag[section]}
    data["model"]["preset"] = "custom"
    res = dpsim.simulate(data)
    assert res.iteration_time_s > 0 and res.gpus == 4
    side = json.loads(calibrate.sidecar(profile).read_text())
    assert set(side["probes"]) == {"1", "2", "4"} and all(len(v) == 5 for v in side["probes"].values())   # --rounds 5
    samples = tomllib.loads(profile.read_text())["samples"]
    assert 0 < len(samples) <= 5 and len(dpsim.bands.split(tomllib.loads(profile.read_text())).samples) == len(samples)
    for two in side["probes"]["2"]:                              # the codec is timed every round
        assert len(two["onebit_s"]) == 2 and two["onebit_s"][0] > two["codec_s"][0] > 0
        assert list(two["blocks"]) == ["ring", "1bit"]          # and in the loop's rhythm
        assert np.mean(two["blocks"]["1bit"]["codec_steps_s"]) > 0
        assert two["lowrank"][0] == calibrate.LOWRANK and two["lowrank"][1] > 0     # PowerSGD's products
    assert frag["compute"]["powersgd_gflops"] > 0


def test_overhead_is_the_median_of_the_sweep_and_the_one_rank_probes():
    def probe(load, scale):
        steps = {part: [[v] * 4] for part, v in (("load", load), ("scale", scale), ("compute", 5e-3),
                                                   ("update", 1e-3), ("sync", 0.0), ("codec", 0.0))}
        return {"ranks": 1, "blocks": {"none": {"steps_s": steps, "sync_steps_s": []}},
                "sizes_bytes": [], "one_way_s": []}
    m = {"load_s": 1e-4, "scale_s": 1e-4,                          # the sweep: 0.2 ms
         "probes": {"1": [probe(3e-4, 1e-4), probe(1e-4, 2e-4), probe(2e-4, 3e-4)]}}   # 0.4, 0.3, 0.5
    assert calibrate.overhead_s(m) == pytest.approx(0.35e-3)     # median of 0.2, 0.4, 0.3, 0.5


def test_codec_probe_takes_each_size_median_over_the_rounds():
    rounds = [{"codec_values": [800, 100], "onebit_s": [1.0, 0.5]},
              {"codec_values": [800, 100], "onebit_s": [3.0, 0.1]},
              {"one_way_s": [1e-6]},                               # a round without 1-bit calls
              {"codec_values": [800, 100], "onebit_s": [2.0, 0.3]}]
    assert calibrate.codec_probe(rounds) == {"codec_values": [800, 100], "onebit_s": [2.0, 0.3]}


def test_compare_prints_both_columns_and_a_plot(profile, tmp_path):
    done = run_course("compare", "--profile", str(profile), "--ranks", "1,2", "--sync", "ring",
                      "--compress", "none,1bit", "--width", "64", "--depth", "1", "--batch", "16",
                      "--samples", "640", "--epochs", "2", "--json", "c.json", "--plot", "c.png",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    head = done.stdout.splitlines()[0]
    assert "iteration ms" in head and "speed-up" in head
    assert "2 ranks 1bit" in done.stdout and "median |error| of the iteration time" in done.stdout
    assert "[9/9] 2 ranks 1bit" in done.stderr                 # progress: 3 runs of each
    result = json.loads((tmp_path / "c.json").read_text())
    rows = result["rows"]
    assert [(r["ranks"], r["sync"], r["compress"]) for r in rows] == [
        (1, "ring", "none"), (2, "ring", "none"), (2, "ring", "1bit")]
    ones = [x["measured_samples_per_s"] for x in rows[0]["runs"]]     # the 1-rank run of each round
    for r in rows:
        times = [x["measured_iteration_s"] for x in r["runs"]]
        assert len(times) == 3 and r["measured_iteration_s"] == statistics.median(times)
        assert r["error"] == pytest.approx(r["predicted_iteration_s"] / r["measured_iteration_s"] - 1)
        within = [x["measured_samples_per_s"] / one for x, one in zip(r["runs"], ones)]
        assert r["measured_speedup"] == pytest.approx(statistics.median(within))
        assert r["probe"] is None                               # no --probe: nothing re-measured
    assert rows[0]["predicted_speedup"] == 1.0
    assert result["median_abs_speedup_error"] == pytest.approx(
        statistics.median(abs(r["speedup_error"]) for r in rows[1:]))
    png = (tmp_path / "c.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_compare_with_probe_says_which_part_moved(profile, tmp_path):
    done = run_course("compare", "--profile", str(profile), "--ranks", "2", "--sync", "ps",
                      "--compress", "none", "--width", "64", "--depth", "1", "--batch", "16",
                      "--samples", "640", "--epochs", "2", "--repeats", "1", "--probe", "--json", "c.json",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "predicted from the profile" in done.stdout
    result = json.loads((tmp_path / "c.json").read_text())
    row = result["rows"][0]
    assert result["predicted_from"] == "the profile" and len(row["runs"]) == 1
    assert row["probe"]["moved"] in ("compute", "update", "sync") and row["probe"]["probe_s"]["sync"] > 0


def test_compare_refuses_a_profile_of_another_model(profile, tmp_path):
    done = run_course("compare", "--profile", str(profile), "--ranks", "1", "--width", "128",
                      cwd=tmp_path)
    assert done.returncode == 2 and "calibrated for" in done.stderr


def test_compare_warns_when_runs_spread_too_far_to_conclude(tmp_path):
    def row(ranks, spread):
        return {"ranks": ranks, "sync": "ring", "compress": "none", "predicted_iteration_s": 0.01,
                "measured_iteration_s": 0.01, "error": 0.0, "spread": spread, "diagnosis": None,
                "predicted_speedup": 1.0, "measured_speedup": 1.0, "speedup_error": 0.0,
                "runs": [{"measured_iteration_s": 0.01, "measured_speedup": 1.0}]}
    quiet = {"rows": [row(1, 0.05), row(2, 0.1)], "median_abs_error": 0.0, "worst_abs_error": 0.0,
             "median_abs_speedup_error": 0.0}
    assert "WARNING" not in compare.table(quiet)
    busy = {**quiet, "rows": [row(1, 0.05), row(2, 0.6)]}
    assert "WARNING: 1 of 2 configurations" in compare.table(busy) and "2 ranks ring" in compare.table(busy)
    compare.plot(busy, tmp_path / "busy.png")                   # the title says so too (drawn without error)


def test_diagnosis_names_the_phase_that_differs_most():
    pred = {"compute": 5e-3, "data_wait": 0.0, "exposed_comm": 1e-3, "compression": 2e-3, "update": 1e-3}
    meas = {"compute": 5.2e-3, "data_wait": 0.1e-3, "exposed_comm": 6e-3, "compression": 2.5e-3,
            "update": 1e-3, "other": 0.2e-3}
    d = compare.diagnose(sum(pred.values()), sum(meas.values()), pred, meas)
    assert d["phase"] == "exposed_comm"
    assert d["predicted_s"] == 1e-3 and d["measured_s"] == 6e-3
    meas2 = dict(pred, compute=9e-3)                          # compute now the culprit
    assert compare.diagnose(sum(pred.values()), sum(meas2.values()), pred, meas2)["phase"] == "compute"
    assert compare.diagnose(1.0, 1.1, pred, meas) is None      # within 15%: nothing to explain
    onebit = compare.diagnose(sum(pred.values()), sum(meas.values()), pred, meas, onebit=True)
    assert onebit["phase"] == "exposed_comm+compression" and onebit["measured_s"] == pytest.approx(8.5e-3)


def test_measured_phases_are_the_breakdown_parts_and_other():
    parts = {"compute": 0.004, "data_wait": 0.0005, "exposed_comm": 0.001, "compression": 0.003,
             "straggler_wait": 0.0002, "update": 0.001, "other": 0.0003}
    result = {"iteration_time_s": 0.010, "breakdown_s": parts, "work_s": {"load": 0.0005, "communication": 0.001}}
    got = compare.measured_phases(result)
    assert got == parts and list(got) == [*vocabulary.BREAKDOWN, vocabulary.OTHER]
    assert sum(got.values()) == pytest.approx(0.010)
    assert set(compare.predicted_phases({"compute": 0.004})) == set(got)


def test_oversubscribed_ranks_run_slower_in_the_scenario():
    prof = {"cluster": {"gpu": {"fp32_tflops": 0.3, "mem_bw_gbs": 20.0},
                        "intra": {"bandwidth_gbs": 5.0, "latency_us": 1.0},
                        "host_link": {"bandwidth_gbs": 5.0, "latency_us": 1.0}, "cpu_cores": 2,
                        "devices_per_node": 2.0},
            "model": {"params": 100000, "flops_per_sample": 6e5, "layers": 2},
            "compute": {"kernel_launch_us": 10.0}}
    two = compare.scenario_for(prof, 2, "ring", "none")
    four = compare.scenario_for(prof, 4, "mpi", "1bit")
    assert four["sync"]["strategy"] == "mpi" and four["sync"]["compression"] == "1bit"
    assert four["cluster"]["gpus_per_node"] == 4 and four["cluster"]["devices_per_node"] == 2.0
    c2, c4 = (dpsim.simulate(d).breakdown_s["compute"] for d in (two, four))
    assert c4 == pytest.approx(2 * c2, rel=0.01)                 # 4 ranks on 2 cores: half speed each


# ------------------------------------------------------------------ probes onto dpsim

PROF = {"cluster": {"gpu": {"fp32_tflops": 0.3, "mem_bw_gbs": 20.0},
                    "intra": {"bandwidth_gbs": 5.0, "latency_us": 1.0, "kind": "pcie"},
                    "host_link": {"bandwidth_gbs": 5.0, "latency_us": 1.0}, "cpu_cores": 2},
        "model": {"params": 1_000_000, "flops_per_sample": 6e6, "layers": 2},
        "compute": {"efficiency": 0.5, "half_batch": 20.0, "kernel_launch_us": 10.0},
        "sync": {"message_overhead_us": 2.0}, "training": {"batch_per_gpu": 64}}


def fake_probe(ranks, compute_s, syncs=None, steps=4, update_s=1.5e-3):
    """course.probe's JSON with constant step times; a 1bit block computes 1 ms slower."""
    const = lambda v: [[v] * steps for _ in range(ranks)]
    blocks = {}
    for algo, sync in (syncs or {"none": None}).items():
        slower = 1e-3 if algo == "1bit" else 0.0
        blocks[algo] = {"steps_s": {"compute": const(compute_s + slower), "update": const(update_s),
                                    "load": const(1e-4), "scale": const(2e-4)},
                        "sync_steps_s": [sync] * steps if sync else [],
                        "codec_steps_s": [5e-3] * steps if algo == "1bit" else []}
    return {"ranks": ranks, "blocks": blocks, "sizes_bytes": [8, 1024, 65536, 1 << 20, 4 << 20],
            "one_way_s": [2e-6 + s / 10e9 for s in [8, 1024, 65536, 1 << 20, 4 << 20]] if ranks > 1 else []}


def test_summarise_pools_the_steps_of_several_probes():
    a, b = fake_probe(2, 4e-3, {"ring": 1e-3}), fake_probe(2, 10e-3, {"ring": 4e-3}, steps=2)
    b["one_way_s"] = [2 * t for t in b["one_way_s"]]
    s = fit.summarise([a, b])
    # means over all 6 steps (what a training run's iteration time is), not medians (4 ms, 1 ms)
    assert s["compute_s"] == pytest.approx([6e-3, 6e-3]) and s["sync_s"]["ring"] == pytest.approx(2e-3)
    assert s["steps"] == 6 and s["one_way_s"] == a["one_way_s"]          # the best ping-pong


def test_configurations_run_1bit_once_per_rank_count():
    configs = compare.configurations([1, 2, 4], ["ring", "ps"], ["none", "1bit"])
    assert configs == [(1, "ring", "none"), (2, "ring", "none"), (2, "ring", "1bit"), (2, "ps", "none"),
                       (4, "ring", "none"), (4, "ring", "1bit"), (4, "ps", "none")]


def test_schedule_runs_round_after_round_with_a_probe_before_each_run():
    configs = compare.configurations([1, 2, 4], ["ring", "ps"], ["none", "1bit"])
    assert compare.schedule(configs, 2) == [("run", c) for c in configs] * 2
    items = compare.schedule(configs, repeats=2, probe=True)
    assert [it[1] for it in items if it[0] == "run"] == configs * 2
    for k, it in enumerate(items):
        if it[0] == "run":
            n, sync, comp = it[1]
            assert items[k - 1] == ("probe", n, () if n == 1 else ("1bit" if comp == "1bit" else sync,))


def test_median_run_is_the_middle_iteration_time():
    runs = [{"iteration_time_s": t} for t in (0.3, 0.1, 0.2)]
    assert compare.median_run(runs)["iteration_time_s"] == 0.2
    assert compare.median_run(runs[:2])["iteration_time_s"] == 0.1


# ------------------------------------------------------------------ the fits recover known figures

def test_fit_capacity_recovers_the_devices_worth():
    # 2 ranks at 1.6 cores' worth each take 2 / 1.6 of one rank's time; 3 of 8 cores at full speed
    assert fit.fit_capacity(0.010, [0.0125, 0.0125], 2) == pytest.approx(1.6)
    assert fit.fit_capacity(0.010, [0.010] * 3, 8) == pytest.approx(8.0)
    assert fit.fit_capacity(0.010, [0.005, 0.005], 2) == 2.0                # never more than N


@pytest.mark.parametrize("jitter", [0.03, 0.1])
def test_fit_jitter_recovers_the_spread_of_random_draws(jitter):
    # two ranks, each step's compute drawn independently with a known spread: the mean wait
    # of the faster for the slower gives that spread back (a sampling oracle, not the formula)
    t = 0.008 * (1 + jitter * np.random.default_rng(1).standard_normal((2, 200_000)))
    wait = float(np.mean(t.max(axis=0) - t.mean(axis=0)))
    assert fit.fit_jitter(wait, 0.008) == pytest.approx(jitter, rel=0.02)


def test_dpsim_jitter_makes_the_straggler_wait_fit_jitter_reads():
    # the other direction, through dpsim's engine: 2 ranks with jitter 0.08 wait, on average
    # over many iterations, what fit_jitter turns back into about 0.08
    r = dpsim.simulate("d2l-ps-vs-ring", {"cluster.gpus_per_node": 2, "cluster.gpus_per_pcie_switch": 2,
                                          "compute.jitter": 0.08, "training.iterations": 400,
                                          "sync.overlap": False, "sync.bucket_mib": 0.0})
    compute = r.breakdown_s["compute"]
    assert fit.fit_jitter(r.breakdown_s["straggler_wait"], compute) == pytest.approx(0.08, rel=0.15)


@pytest.mark.parametrize("node_gbs, capacity", [(30.0, 2.0), (30.0, 1.8), (12.0, 2.0)])
def test_fit_memory_recovers_the_node_bandwidth_from_dpsims_update(node_gbs, capacity):
    # dpsim's update of 2 ranks on a bus of node_gbs (each device alone: 25 GB/s), read back
    d = {"cluster": {"nodes": 1, "gpus_per_node": 2, "gpus_per_pcie_switch": 2, "devices_per_node": capacity,
                     "node_mem_bw_gbs": node_gbs, "gpu": {"fp32_tflops": 0.1, "mem_bw_gbs": 25.0}},
         "model": {"params": 1_000_000, "flops_per_sample": 1e6, "layers": 2},
         "training": {"iterations": 2, "warmup_iterations": 1}}
    update = dpsim.simulate(d).breakdown_s["update"]
    expected = min(node_gbs, 2 * 25.0)             # above 2 x 25 the bus is not what limits
    assert fit.fit_memory(update, 1_000_000, 2, capacity) == pytest.approx(expected, rel=1e-6)


def test_calibrate_warns_when_the_machine_changed_while_it_measured():
    def probe(ms):
        steps = {part: [[0.0] * 4] for part in ("load", "scale", "update")}
        return {"ranks": 1, "sizes_bytes": [], "one_way_s": [],
                "blocks": {"none": {"steps_s": {**steps, "compute": [[ms / 1e3] * 4]}, "sync_steps_s": []}}}
    m = {"batch": 64, "compute_s": [[32, 0.004], [64, 0.007]], "probes": {"1": [probe(7.1), probe(6.9), probe(7.2)]}}
    assert calibrate.unsteady(m) == []
    m["probes"]["1"][1] = probe(9.5)                                   # a busy moment: 9.5 / 6.9 > 1.3
    (warning,) = calibrate.unsteady(m)
    assert "7.00 to 9.50 ms" in warning


def test_calibrate_measures_again_when_the_machine_changed(monkeypatch, tmp_path):
    calls, said = [], []
    def fake_measure(progress=None, **kw):
        calls.append(kw)
        return {"n": len(calls)}
    spread = {1: 2.0, 2: 1.05}                           # the first measurement unsteady, the second not
    monkeypatch.setattr(calibrate, "measure", fake_measure)
    monkeypatch.setattr(calibrate, "compute_spread", lambda m: spread[m["n"]])
    monkeypatch.setattr(calibrate, "unsteady", lambda m: ["moved"] if spread[m["n"]] > 1.3 else [])
    monkeypatch.setattr(calibrate, "profile_dict", lambda m: {"name": f"measurement {m['n']}"})
    prof, m = calibrate.calibrate(str(tmp_path / "p.toml"), progress=said.append, model="mlp")
    assert len(calls) == 2 and m["n"] == 2 and "measuring once more" in said[0]
    spread[1] = 1.1                                      # steady at once: measured once
    calls.clear()
    calibrate.calibrate(str(tmp_path / "p.toml"), model="mlp")
    assert len(calls) == 1


@pytest.mark.parametrize("slice_us", [400.0, 2500.0])
def test_fit_timeslice_in_loop_recovers_the_slice_of_a_simulated_ring(slice_us):
    # 4 busy-polling ranks on 2 devices: dpsim's ring at a known slice, read back
    d = compare.scenario_for({**PROF, "cluster": {**PROF["cluster"], "devices_per_node": 2.0},
                              "sync": {**PROF["sync"], "busy_poll": True}}, 4, "ring", "none")
    ring_s = dpsim.simulate({**d, "cluster": {**d["cluster"], "timeslice_us": slice_us}}).sync_time_s
    assert fit.fit_timeslice_in_loop(d, ring_s) == pytest.approx(slice_us, rel=1e-6)
    assert fit.fit_timeslice_in_loop({**d, "sync": {**d["sync"], "busy_poll": False}}, ring_s) is None


@pytest.mark.parametrize("launch_us, gbs", [(12.0, 2.5), (0.0, 8.0)])
def test_fit_codec_recovers_launch_and_bandwidth_from_dpsims_own_kernels(launch_us, gbs):
    values, seconds = [1_000_000, 125_000], []
    for v in values:                                      # what dpsim's 1-bit kernels cost on 2 ranks
        data = {"cluster": {"gpus_per_node": 2, "gpus_per_pcie_switch": 2},
                "model": {"params": v, "flops_per_sample": 1.0},
                "compute": {"kernel_launch_us": launch_us, "codec_gbs": gbs},
                "sync": {"strategy": "ring", "compression": "1bit", "bucket_mib": 0}}
        eng = Engine(dpsim.load_scenario(data))
        eng.sync_alone()
        seconds.append(eng.machine.codec_s)
    got = fit.fit_codec(values, seconds, 2)
    assert got == pytest.approx((launch_us, gbs), rel=1e-6, abs=1e-6)


def test_fit_latency_recovers_the_latency_of_a_simulated_ring():
    d = compare.scenario_for(PROF, 2, "ring", "none")
    for key in ("intra", "host_link"):
        d["cluster"][key] = dict(d["cluster"][key], latency_us=123.0)
    ring_s = dpsim.simulate(d).sync_time_s
    assert fit.fit_latency(compare.scenario_for(PROF, 2, "ring", "none"), ring_s) == pytest.approx(123.0, rel=1e-6)


def test_straggler_is_the_slowest_minus_the_mean_per_step():
    probe = {"blocks": {"ring": {"steps_s": {"compute": [[1.0, 2.0], [3.0, 2.0]]}}}}
    assert fit.straggler_s(probe, "ring") == pytest.approx((1.0 + 0.0) / 2)


def test_onebit_in_loop_is_the_blocks_sync_less_its_wait_for_the_slower_rank():
    from course.measurements import Probe, onebit_in_loop
    p = fake_probe(2, 4e-3, {"ring": 1e-3, "1bit": 9e-3})
    c = p["blocks"]["1bit"]["steps_s"]["compute"]
    c[1] = [v + 2e-3 for v in c[1]]                 # rank 1 computes 2 ms slower: the wait is 1 ms
    assert onebit_in_loop(p) == pytest.approx(9e-3 - 1e-3)
    p.update(one_way_median_s=p["one_way_s"], one_way_mean_s=p["one_way_s"])
    assert Probe.from_json(p).onebit_loop_s == pytest.approx(8e-3)
    assert onebit_in_loop(fake_probe(2, 4e-3, {"ring": 1e-3})) is None          # an older sidecar


@pytest.mark.parametrize("launch_us, gbs", [(0.0, 2.5), (20.0, 6.0)])
def test_fit_codec_keys_takes_the_gradients_call_from_the_loop(launch_us, gbs):
    """Calls made of dpsim's own messages and kernels at (launch_us, gbs): the fit recovers
    them from the loop's call of the gradient, not from the call timed alone (made 30%
    faster here, as the 2-core machine ran it)."""
    from course.measurements import Measurements
    machine = {**PROF, "cluster": {**PROF["cluster"], "devices_per_node": 2.0}}
    values = [PROF["model"]["params"], PROF["model"]["params"] // 8]

    def call_s(v, launch, bw):
        d = compare.scenario_for(machine, 2, "ring", "1bit")
        d["compute"].update(kernel_launch_us=launch, codec_gbs=bw)
        return fit.collective_seconds(d, 4 * v, "ring", "1bit")
    seconds = [call_s(v, launch_us, gbs) for v in values]
    alone = [0.7 * seconds[0], seconds[1]]
    m = Measurements(model=PROF["model"], batch=64, device="cpu", devices=2, cores=2, peak_flops=1e11,
                     sweep=[], update_s=1e-3, overhead_s=0.0, copy_gbs=10.0, sharing_ranks=2, probes={},
                     codec_values=values, onebit_s=alone, onebit_loop_s=seconds[0])
    assert calibrate.fit_codec_keys(m, machine) == pytest.approx((launch_us, gbs), rel=1e-3, abs=1e-3)
    older = Measurements(**{**m.__dict__, "onebit_loop_s": None})            # no loop block: the calls alone
    assert calibrate.fit_codec_keys(older, machine)[1] > 1.2 * gbs
