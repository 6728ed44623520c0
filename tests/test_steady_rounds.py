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
