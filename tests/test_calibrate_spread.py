"""course calibrate keeps each figure's spread over its rounds, and stops on a busy machine.

The verdict is checked on recorded rounds (no MPI): `measure` returns a record whose rounds
the test wrote, and the profile's fit reads one figure from them, so the per-round fits and
their 10-90% range are known by hand. The last test runs a real calibrate while a process of
the test's own burns one core for part of it."""
import functools
import math
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import dpsim
from course import __main__ as cli
from course import calibrate, spread

ROOT = Path(__file__).resolve().parents[1]
QUIET = [300.0, 310.0, 290.0, 305.0, 295.0]       # a message's cost (us) in each of 5 rounds
BUSY = [300.0, 310.0, 2600.0, 305.0, 295.0]       # one round while another program ran


def record(rounds):
    """A sidecar whose rounds carry one figure each (what the fake fit reads)."""
    return {"probes": {"1": [{"message_us": v} for v in rounds], "2": [{"message_us": v} for v in rounds]}}


def fit(m):
    """The profile from a sidecar: the message cost is the median of its rounds (as
    calibrate's fits take medians), the other figures the same in every round."""
    values = sorted(p["message_us"] for p in m["probes"]["1"])
    return {"name": "this-machine", "cluster": {"devices_per_node": 2.0, "cpu_cores": 2},
            "compute": {"efficiency": 0.5}, "sync": {"message_overhead_us": values[len(values) // 2]}}


@pytest.fixture
def recorded(monkeypatch):
    """calibrate measuring the recorded rounds in turn (the last one again if asked more)."""
    given, calls = [], []

    def measure(progress=None, **kw):
        calls.append(kw)
        return record(given[min(len(calls), len(given)) - 1])
    monkeypatch.setattr(calibrate, "measure", measure)
    monkeypatch.setattr(calibrate, "profile_dict", fit)
    monkeypatch.setattr(calibrate, "summary", lambda prof, m: "summary")
    monkeypatch.setattr(calibrate, "unsteady", lambda m: [])
    monkeypatch.setattr(calibrate, "compute_spread", lambda m: 1.0)
    return given, calls


def test_the_range_is_the_10_90_percent_of_the_rounds_own_fits():
    s = spread.figure_spreads(record(BUSY), fit(record(BUSY)), fit)
    assert set(s) == {"sync.message_overhead_us"}                 # the other figures do not move
    got = s["sync.message_overhead_us"]
    # sorted 295, 300, 305, 310, 2600: the 10th percentile 295 + 0.4 x 5, the 90th 310 + 0.6 x 2290
    assert (got["value"], got["low"], got["high"], got["median"]) == (305.0, 297.0, pytest.approx(1684.0), 305.0)
    assert spread.noisy(s) == [("sync.message_overhead_us", got)]
    assert spread.noisy(spread.figure_spreads(record(QUIET), fit(record(QUIET)), fit)) == []


def test_a_value_of_more_digits_than_the_range_keeps_stays_inside_it():
    """A fit from all rounds of 7 significant digits (5637.364 us, on a busy machine) with its
    rounds' 90th percentile below it: the range still holds the value (dpsim refuses one that
    does not), however the ends are rounded."""
    rounds = [3239.49, 4000.0, 5000.0, 5500.0, 5600.0]
    full = {**fit(record(rounds)), "sync": {"message_overhead_us": 5637.364}}
    got = spread.figure_spreads(record(rounds), full, fit)["sync.message_overhead_us"]
    assert got["low"] <= got["value"] <= got["high"]
    dpsim.bands.checked_range("sync.message_overhead_us", got | {"value": 5637.364})


def test_a_noisy_calibration_ends_in_one_line_and_exit_3(recorded, tmp_path, capsys):
    given, calls = recorded
    given += [BUSY, BUSY]
    out = tmp_path / "p.toml"
    assert cli.main(["calibrate", "-o", str(out)]) == 3
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("python -m course: calibrate: ") and "sync.message_overhead_us" in last
    assert "300, 310, 2600, 305, 295" in last and "course doctor" in last and "--accept-noisy" in last
    assert len(calls) == 2                                      # measured again before giving up
    assert not out.exists() and not calibrate.sidecar(out).exists()


def test_accept_noisy_writes_the_profile_with_its_ranges(recorded, tmp_path):
    given, _ = recorded
    given += [BUSY, BUSY]
    out = tmp_path / "p.toml"
    assert cli.main(["calibrate", "-o", str(out), "--accept-noisy"]) == 0
    text = out.read_text()
    assert "# WARNING: written with --accept-noisy" in text and "sync.message_overhead_us" in text
    prof = tomllib.loads(text)
    assert prof["sync"]["message_overhead_us"] == {"value": 305.0, "low": 297.0, "high": pytest.approx(1684.0)}
    assert prof["compute"]["efficiency"] == 0.5                  # a figure that did not move stays a number


def test_a_busy_first_measurement_quiet_second_writes_the_quiet_one(recorded, tmp_path):
    given, calls = recorded
    given += [BUSY, QUIET]
    out = tmp_path / "p.toml"
    assert cli.main(["calibrate", "-o", str(out)]) == 0
    assert len(calls) == 2 and "WARNING" not in out.read_text()
    assert tomllib.loads(out.read_text())["sync"]["message_overhead_us"]["value"] == 300.0


# ------------------------------------------------------------------ a real calibrate, one core taken

BURN = "import time\nend = time.time() + 20\nwhile time.time() < end:\n    pass\n"
CALIBRATE = "import sys\nfrom course import __main__ as cli\nsys.exit(cli.main(sys.argv[1:]))\n"


def test_calibrate_under_a_cpu_burner_stops_or_writes_ordered_finite_bands(tmp_path):
    """A process of the test's own burns one core for 20 s from 3 s into the measurement (a
    reduced calibrate: a small MLP, 3 rounds of probes). Either calibrate notices (one line,
    exit 3, nothing written), or the profile's every range is finite and ordered, and dpsim
    reads it and predicts a band that holds the prediction."""
    out = tmp_path / "p.toml"
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = subprocess.Popen([sys.executable, "-c", CALIBRATE, "calibrate", "-o", str(out), "--width", "64",
                            "--depth", "1", "--batch", "16", "--rounds", "3"], cwd=tmp_path, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(3)
    burner = subprocess.Popen([sys.executable, "-c", BURN])
    try:
        stdout, stderr = run.communicate(timeout=150)
    finally:
        burner.kill()
        burner.wait()
    print(f"calibrate under a burner: exit {run.returncode}; {stderr.strip().splitlines()[-1]}")
    if run.returncode == 3:
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("python -m course: calibrate: ") and "course doctor" in last
        assert not out.exists()
        return
    assert run.returncode == 0, stderr
    prof = tomllib.loads(out.read_text())
    ranged = dpsim.bands.split(prof)
    assert ranged.ranges, "a real calibration has figures that move between rounds"
    for key, (low, value, high) in ranged.ranges.items():
        assert all(math.isfinite(x) for x in (low, value, high)) and low <= value <= high, key
    sc, _ = dpsim.config.load_ranged(out)            # dpsim takes the profile, ranges and all
    assert sc.model.params == prof["model"]["params"]


def test_a_rounds_own_fit_times_the_loop_at_that_rounds_moment_alone():
    """The profile takes the median over 1 + R moments of the loop (the one-process sweep, then
    each round's 1-rank probe); one round's own fit must not give the shared sweep half its
    weight. The night's calibration (course/measured/2026-11-26-night) had a sweep slower than
    every probe: with the sweep in each round's fit, every round's peak fell below the
    profile's (0.178-0.190 against 0.192 TFLOP/s); on the rounds' own moments they straddle it."""
    import json
    from course import calibrate, measurements, spread
    from doc_text import ROOT
    m = json.loads((ROOT / "course/measured/2026-11-26-night/profile.measured.json").read_text())
    for r in range(spread.rounds_of(m)):
        own = spread.round_sidecar(m, r)
        assert measurements.compute_moments(own) == [measurements.compute_step(m["probes"]["1"][r])]
        assert len(measurements.loop_moments(own, lambda d: d["update_s"])) == 1
    assert len(measurements.compute_moments(m)) == 1 + spread.rounds_of(m)     # the profile's: sweep too
    value = calibrate.profile_dict(m)["cluster"]["gpu"]["fp32_tflops"]
    peaks = [calibrate.profile_dict(spread.round_sidecar(m, r))["cluster"]["gpu"]["fp32_tflops"]
             for r in range(spread.rounds_of(m))]
    assert min(peaks) < value < max(peaks)
