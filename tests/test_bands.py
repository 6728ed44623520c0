"""dpsim.bands: ranges {value, low, high} on a scenario's numbers, checked on loading and
propagated to a band on the results.

The band ends are checked against closed forms (dpsim.analytic's ring all-reduce; a linear
function whose extremes over a box are known), never against dpsim's own earlier output."""
import json
import math
from types import SimpleNamespace

import pytest

from dpsim import analytic, bands, load_scenario
from dpsim.engine import Engine
from dpsim.hardware import GPUS

from dpsim_helpers import run_dpsim, star

V100_GAMMA = 3 / (GPUS["v100"].mem_bw_gbs * 1e9)


# ------------------------------------------------------------------ one line and exit 2

@pytest.mark.parametrize("value, says", [
    ("{value = 0.5, low = 0.6, high = 0.7}", "low <= value <= high"),            # low above the value
    ("{value = 0.5, low = 0.4, high = 0.3}", "low <= value <= high"),            # low > high
    ("{value = 0.5, low = -0.1, high = 0.6}", "low end -0.1 is not allowed"),     # a negative range
    ("{value = nan, low = 0.4, high = 0.6}", "must be finite"),
    ("{value = 0.5, low = 0.4, high = inf}", "must be finite"),
    ("{value = 0.5, low = 0.4}", "missing high"),
    ('{value = 0.5, low = "a", high = 0.6}', "must be a number"),
])
def test_a_bad_range_is_one_line_and_exit_2(value, says):
    code, out, err = run_dpsim("run", "d2l-ps-vs-ring", "--set", f"compute.efficiency={value}")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "compute.efficiency" in err and says in err, err


def test_a_bad_range_inside_an_inline_table_of_a_file_names_the_key(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('[cluster]\nintra = {bandwidth_gbs = {value = 12, low = -1, high = 13}, latency_us = 5}\n')
    code, _, err = run_dpsim("run", str(path))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("dpsim: error: cluster.intra.bandwidth_gbs: the range's low end -1"), err


def test_a_value_that_breaks_its_key_is_named_as_without_a_range():
    code, _, err = run_dpsim("run", "d2l-ps-vs-ring", "--set", "compute.efficiency={value = -1, low = -2, high = 0.5}")
    assert code == 2 and err.count("\n") == 1 and "compute.efficiency" in err


# ------------------------------------------------------------------ propagation against closed forms

def sync_alone(d):
    """One ring all-reduce on its own, as a result-like row (iteration time = the sync)."""
    t = Engine(load_scenario(d)).sync_alone()
    return [SimpleNamespace(iteration_time_s=t, throughput_samples_per_s=1 / t, speedup=1.0)]


def test_corners_of_a_ring_all_reduce_are_the_closed_form_at_the_two_ends():
    n, m = 8, 64e6
    d = star(n, 12.5, 3.0, params=int(m / 4))
    d["cluster"]["intra"] = {"bandwidth_gbs": {"value": 12.5, "low": 8.0, "high": 16.0},
                             "latency_us": {"value": 3.0, "low": 1.0, "high": 10.0}}
    ranged = bands.split(d)
    assert ranged.ranges == {"cluster.intra.bandwidth_gbs": (8.0, 12.5, 16.0), "cluster.intra.latency_us": (1.0, 3.0, 10.0)}
    band = bands.propagate(ranged, sync_alone, sync_alone(ranged.data))
    it = band["bands"][0]["iteration_time_s"]
    assert band["method"] == "corners" and band["points"] == 4
    # a GPU-to-GPU route is 2 hops: alpha = 2 x latency
    assert it["low"] == pytest.approx(analytic.ring(n, m, 2e-6, 1 / 16e9, V100_GAMMA), rel=0.01)
    assert it["high"] == pytest.approx(analytic.ring(n, m, 20e-6, 1 / 8e9, V100_GAMMA), rel=0.01)


def test_many_keys_find_the_extremes_of_a_monotone_function():
    """Five keys (more than FEW): each key at either end, then the slow and fast corners. For a
    linear function the extremes over the box are known: each term at its own extreme."""
    coef = {"x1": 2.0, "x2": -3.0, "x3": 0.5, "x4": -0.25, "x5": 1.0}
    box = {"x1": (1, 2, 4), "x2": (0.5, 1, 1.5), "x3": (0, 3, 5), "x4": (2, 2.5, 8), "x5": (0.1, 0.2, 0.3)}
    ranged = bands.Ranged({"a": {k: v for k, (_, v, _) in box.items()}}, {f"a.{k}": r for k, r in box.items()})

    def f(d):
        t = 10 + sum(c * d["a"][k] for k, c in coef.items())
        return [SimpleNamespace(iteration_time_s=t, throughput_samples_per_s=1 / t, speedup=1.0)]
    band = bands.propagate(ranged, f, f(ranged.data))["bands"][0]["iteration_time_s"]
    lowest = 10 + sum(min(c * box[k][0], c * box[k][2]) for k, c in coef.items())
    highest = 10 + sum(max(c * box[k][0], c * box[k][2]) for k, c in coef.items())
    assert (band["low"], band["high"]) == (pytest.approx(lowest), pytest.approx(highest))


# ------------------------------------------------------------------ without ranges, as before

def strip_band(text):
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("  band over"))
    return "\n".join(lines[:i] + lines[i + 4:]) + "\n"


def test_a_range_leaves_the_rest_of_the_output_as_it_was():
    """A range whose ends are its value: the output is the plain run's, plus the band lines
    (text) or the band keys (JSON), and the band is the value itself."""
    plain = run_dpsim("run", "d2l-ps-vs-ring")
    ranged = run_dpsim("run", "d2l-ps-vs-ring", "--set", "compute.efficiency={value = 0.35, low = 0.35, high = 0.35}")
    unranged = run_dpsim("run", "d2l-ps-vs-ring", "--set", "compute.efficiency=0.35")
    assert "band" not in plain[1] and "band" not in unranged[1]
    assert strip_band(ranged[1]) == unranged[1]
    j_plain = json.loads(run_dpsim("run", "d2l-ps-vs-ring", "--set", "compute.efficiency=0.35", "--json")[1])
    j = json.loads(run_dpsim("run", "d2l-ps-vs-ring", "--set",
                             "compute.efficiency={value = 0.35, low = 0.35, high = 0.35}", "--json")[1])
    assert "bands" not in j_plain
    assert {k: v for k, v in j.items() if k not in ("bands", "ranges", "band_method")} == j_plain
    assert j["bands"]["iteration_time_s"] == {"low": j["iteration_time_s"], "high": j["iteration_time_s"]}
    assert j["ranges"] == {"compute.efficiency": {"value": 0.35, "low": 0.35, "high": 0.35}}


def test_run_and_sweep_print_a_band_that_holds_the_value():
    eff = "compute.efficiency={value = 0.35, low = 0.3, high = 0.4}"
    j = json.loads(run_dpsim("run", "d2l-ps-vs-ring", "--set", eff, "--json")[1])
    b = j["bands"]
    assert b["iteration_time_s"]["low"] < j["iteration_time_s"] < b["iteration_time_s"]["high"]
    assert b["throughput_samples_per_s"]["low"] < j["throughput_samples_per_s"] < b["throughput_samples_per_s"]["high"]
    # compute time is inversely proportional to efficiency: compute at 0.3 is 0.35 / 0.3 of compute at 0.35
    assert math.isfinite(b["speedup"]["low"]) and b["speedup"]["low"] <= j["speedup"] <= b["speedup"]["high"]
    rows = json.loads(run_dpsim("sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--set", eff, "--json")[1])
    assert all(r["bands"]["iteration_time_s"]["low"] <= r["iteration_time_s"] <= r["bands"]["iteration_time_s"]["high"]
               for r in rows)
    code, text, _ = run_dpsim("sweep", "d2l-ps-vs-ring", "--gpus", "1,2", "--set", eff)
    assert code == 0 and "band over 1 ranged keys (compute.efficiency)" in text


# ------------------------------------------------------------------ samples: joint points taken together

def ring_with_samples(points):
    n, m = 8, 1e6                   # latency and bandwidth terms of the same order
    d = star(n, 12.5, 3.0, params=int(m / 4))
    d["cluster"]["intra"] = {"bandwidth_gbs": {"value": 12.5, "low": 8.0, "high": 16.0},
                             "latency_us": {"value": 3.0, "low": 1.0, "high": 10.0}}
    d["samples"] = [{"cluster": {"intra": p}} for p in points]
    return n, m, d


def test_samples_band_is_the_closed_form_at_the_slowest_and_fastest_sample():
    """Samples replace the box: the band is the least and most over the samples (and the value),
    never the corner no sample reached (8 GB/s with 10 us here)."""
    points = [{"bandwidth_gbs": 8.0, "latency_us": 1.0}, {"bandwidth_gbs": 16.0, "latency_us": 10.0},
              {"bandwidth_gbs": 11.0}]
    n, m, d = ring_with_samples(points)
    ranged = bands.split(d)
    assert ranged.samples == ({"cluster.intra.bandwidth_gbs": 8.0, "cluster.intra.latency_us": 1.0},
                              {"cluster.intra.bandwidth_gbs": 16.0, "cluster.intra.latency_us": 10.0},
                              {"cluster.intra.bandwidth_gbs": 11.0})
    band = bands.propagate(ranged, sync_alone, sync_alone(ranged.data))
    it = band["bands"][0]["iteration_time_s"]
    assert band["points"] == 3 and "3 measured samples" in band["method"]
    ring = lambda latency_us, gbs: analytic.ring(n, m, 2 * latency_us * 1e-6, 1 / (gbs * 1e9), V100_GAMMA)
    times = [ring(1.0, 8.0), ring(10.0, 16.0), ring(3.0, 11.0), ring(3.0, 12.5)]   # the last: the value
    assert it["low"] == pytest.approx(min(times), rel=0.01) and it["high"] == pytest.approx(max(times), rel=0.01)
    corner = ring(10.0, 8.0)
    assert it["high"] < 0.8 * corner


@pytest.mark.parametrize("points, says", [
    ([{"compute": {"jitter": 0.1}}], "samples[0].compute.jitter: a sample may set only ranged keys"),
    ([{"cluster": {"intra": {"latency_us": float("nan")}}}], "samples[0].cluster.intra.latency_us: expected a finite"),
    ([{}, {"cluster": {"intra": {"bandwidth_gbs": -1.0}}}], "samples[1]: not allowed"),
])
def test_a_bad_sample_is_one_line_and_exit_2(tmp_path, points, says):
    _, _, d = ring_with_samples([])
    d["samples"] = points
    path = tmp_path / "s.toml"
    from course.profile_file import to_toml
    path.write_text(to_toml(d))
    code, out, err = run_dpsim("run", str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and says in err, err


def test_calibrate_writes_each_round_as_a_sample_that_dpsim_reads_back():
    """The stored night calibration: the profile as calibrate writes it today, through TOML,
    gives dpsim one sample per round, each the round's own fit of every spread figure."""
    import tomllib
    from pathlib import Path
    from course import calibrate, profile_file, spread
    m = json.loads((Path(__file__).parent.parent / "course/measured/2026-11-26-night/profile.measured.json").read_text())
    prof = calibrate.profile_dict(m)
    fits = spread.round_fits(m, calibrate.profile_dict)
    spreads = spread.figure_spreads(m, prof, calibrate.profile_dict, fits=fits)
    written = profile_file.to_toml(spread.with_ranges(prof, spreads, spread.samples(fits, spreads)))
    ranged = bands.split(tomllib.loads(written))
    assert len(ranged.samples) == spread.rounds_of(m) == 5
    for r, point in enumerate(ranged.samples):
        own = spread.numbers(calibrate.profile_dict(spread.round_sidecar(m, r)))
        assert point == {k: own[k] for k in spreads}
    assert set(ranged.ranges) == set(spreads)


def test_a_key_set_to_a_plain_value_leaves_the_samples():
    """--set (or a preset in place of the table above) gives a calibrated figure a plain value:
    that value holds in every sample, and the band moves only with the other keys."""
    points = [{"bandwidth_gbs": 8.0, "latency_us": 1.0}, {"bandwidth_gbs": 16.0, "latency_us": 10.0}]
    n, m, d = ring_with_samples(points)
    d["cluster"]["intra"]["latency_us"] = 3.0                     # as --set cluster.intra.latency_us=3 leaves it
    ranged = bands.split(d)
    assert ranged.samples == ({"cluster.intra.bandwidth_gbs": 8.0}, {"cluster.intra.bandwidth_gbs": 16.0})
    it = bands.propagate(ranged, sync_alone, sync_alone(ranged.data))["bands"][0]["iteration_time_s"]
    ring = lambda gbs: analytic.ring(n, m, 2 * 3e-6, 1 / (gbs * 1e9), V100_GAMMA)
    assert it["low"] == pytest.approx(ring(16.0), rel=0.01) and it["high"] == pytest.approx(ring(8.0), rel=0.01)
    d["cluster"]["intra"] = "pcie3"                                # a preset in place of the whole table
    assert bands.split(d).samples == ({}, {})                      # each sample at the scenario's values
