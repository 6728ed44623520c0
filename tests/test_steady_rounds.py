"""calibrate probes a round again when its ring loop stalled (course.measurements.steady_rounds):
the stalled round is replaced by a new probe and noted, the steady ones are kept as they were."""
import json

import pytest
from pathlib import Path

from course import measurements

STORED = Path(__file__).resolve().parents[1] / "course/measured/2026-11-26-quiet/profile.measured.json"


def fake(sync_ms, tag):
    return {"tag": tag, "blocks": {"ring": {"sync_steps_s": [sync_ms / 1e3] * 4}}}


def test_a_stalled_round_is_probed_once_more_and_noted():
    probes = {"1": [{"blocks": {}}] * 5, "4": [fake(t, f"round {i}") for i, t in enumerate([6.6, 7.2, 15.1, 7.6, 7.5])]}
    asked, said = [], []

    def reprobe(n):
        asked.append(n)
        return fake(7.0, "again")
    out = measurements.steady_rounds(probes, reprobe, said.append)
    assert asked == ["4"] and len(said) == 1 and "round 3" in said[0]
    assert [p["tag"] for p in out["4"]] == ["round 0", "round 1", "again", "round 3", "round 4"]
    assert out["4"][2]["reprobed"]["ring_loop_s"] == pytest.approx(15.1e-3)


def test_steady_rounds_are_left_alone():
    probes = {"4": [fake(t, str(i)) for i, t in enumerate([6.7, 7.8, 7.2, 6.9, 7.3])]}   # 2026-11-25's spread
    out = measurements.steady_rounds(probes, lambda n: 1 / 0, lambda s: 1 / 0)
    assert [p["tag"] for p in out["4"]] == ["0", "1", "2", "3", "4"]


def test_the_stored_stalled_round_is_one_steady_rounds_would_probe_again():
    """The 2026-11-26 calibration (measured before this check) had one: its 4-rank round 3."""
    m = json.loads(STORED.read_text())
    seen = []
    measurements.steady_rounds({n: list(r) for n, r in m["probes"].items()}, lambda n: seen.append(n) or {"blocks": {}},
                               lambda s: None)
    assert seen == ["4"]


def shrinking(m):
    """The stored sidecar with its batch sweep falling as the batch grows (a busy moment at
    the small batches), the run's batch as measured."""
    times = {b: t for b, t in m["compute_s"]}
    top = max(times.values())
    return {**m, "compute_s": [[b, top * 2 - t if b != m["batch"] else t] for b, t in m["compute_s"]]}


def test_a_sweep_that_falls_with_the_batch_is_unsteady_and_never_a_profile(monkeypatch):
    """The fit of such a sweep is an efficiency below 0 (lecture 06 met one on a busy machine):
    calibrate measures again, and if it still falls, stops with one line (Noisy, exit 3)."""
    from course import calibrate, spread
    m = json.loads(STORED.read_text())
    assert not measurements.sweep_shrinks(m) and not measurements.unsteady(m)
    bad = shrinking(m)
    assert measurements.sweep_shrinks(bad)
    assert any("did not grow with the batch" in w for w in measurements.unsteady(bad))
    calls = []
    monkeypatch.setattr(calibrate, "measured", lambda progress=None, **kw: calls.append(1) or bad)
    with pytest.raises(spread.Noisy, match="fell as the batch grew"):
        calibrate.calibrate(out="/nonexistent/p.toml")
    assert len(calls) == 2
