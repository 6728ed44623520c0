"""course/README.md's "Measured again, with the code as it is now": the stored calibration and
compares of course/measured/2026-11-26-night. The stored profile gives back every prediction
the compares made (made by this code from that profile, before the runs), and every figure
the README states is the stored files'."""

import pytest

import dpsim
from course import compare
from doc_text import COMPARES, ROOT, flat, gives_back_every_prediction, passage, says_the_stored_table, stored

STORED = ROOT / "course/measured/2026-11-26-night"
PROFILE, SIDECAR, ALL = stored("2026-11-26-night")
RING_PS, ZERO = ALL[:3], ALL[3]
TEXT = flat(passage("course/README.md", "### Measured again, with the code as it is now"))


@pytest.mark.parametrize("result", ALL, ids=COMPARES)
def test_the_stored_profile_gives_back_every_prediction(result):
    gives_back_every_prediction(PROFILE, result)


def test_readme_table_is_the_stored_compares():
    says_the_stored_table(TEXT, ALL)


def test_readme_says_what_the_bands_reach_and_why():
    onebit = [abs(r["error"]) for res in RING_PS for r in res["rows"] if r["compress"] == "1bit"]
    assert f"Every 1-bit row is within {max(onebit):.1%}" in TEXT
    coverage = sorted(r["coverage"] for r in RING_PS)
    assert f"cover {coverage[0]:.0%}-{coverage[-1]:.0%}".replace("%-", "-") + " of the rows" in TEXT
    widest = max(RING_PS[0]["rows"], key=lambda r: r["predicted_band_s"]["high"] / r["predicted_iteration_s"])
    above = widest["predicted_band_s"]["high"] / widest["predicted_iteration_s"] - 1
    assert f"reach {above:.1%} above their prediction ({compare.name_of(widest['ranks'], widest['sync'], widest['compress'])})" in TEXT
    peak = SIDECAR["spread"]["cluster.gpu.fp32_tflops"]
    assert PROFILE["compute"]["efficiency"] == 1.0
    assert f"{min(peak['rounds']):.3f}-{max(peak['rounds']):.3f} TFLOP/s against {peak['value']:.3f}" in TEXT
    assert max(peak["rounds"]) < peak["value"]                  # every round's own fit below the value


def repredicted(samples):
    """(coverage of each compare, widest below, widest above) of the stored calibration's bands
    as the code makes them now: from the rounds' samples, or (samples=False) every figure's
    range alone, at its slow end at once."""
    from course import repredict
    ranged = repredict.profile_from_sidecar(STORED / "profile.measured.json", ranges=True)
    if not samples:
        ranged = {k: v for k, v in ranged.items() if k != "samples"}
    found = [repredict.coverage(ranged, c, SIDECAR["batch"]) for c in RING_PS]
    return [f"{share:.0%}" for share, _ in found], max(b for _, (b, _) in found), max(a for _, (_, a) in found)


def test_readme_repredicted_bands_are_what_the_code_gives_now():
    shares, below, above = repredicted(samples=True)
    assert f"they cover {shares[0]}, {shares[1]} and {shares[2]} of the rows" in TEXT
    assert f"reaching {below:.1%} below and {above:.1%} above its prediction." in TEXT
    shares, below, above = repredicted(samples=False)
    assert f"at once as the bands were then made, cover {shares[0]}, {shares[1]} and {shares[2]} of the rows" in TEXT
    assert f"reaching {below:.1%} below and {above:.1%} above its prediction. The" in TEXT
    assert f"4 ranks ring's +{above:.1%}" in TEXT


def test_readme_slow_ends_of_the_widest_band_are_each_figure_alone():
    """Each ranged figure alone at its slow end, the others at their values: what it adds to
    4 ranks ring's prediction (dpsim.bands takes them all at once)."""
    from course import repredict
    from dpsim import bands
    ranged = bands.split({k: v for k, v in repredict.profile_from_sidecar(STORED / "profile.measured.json",
                                                                          ranges=True).items() if k != "samples"})
    at = lambda p: dpsim.simulate(compare.scenario_for(p, 4, "ring", "none", batch=SIDECAR["batch"])).iteration_time_s
    nominal = at(ranged.data)
    slow = {k: max(at(ranged.at({k: lo})), at(ranged.at({k: hi}))) / nominal - 1
            for k, (lo, _, hi) in ranged.ranges.items()}
    moving = sorted((x for x in slow.values() if x >= 0.0055), reverse=True)
    assert len(moving) == 8 and f"eight figures of {moving[-1] * 100:.1f}-{moving[0]:.1%} each" in TEXT
    for key, words in [("cluster.timeslice_us", "the time slice"), ("cluster.gpu.fp32_tflops", "the compute rate"),
                       ("compute.shared_jitter", "the jitter of shared cores"),
                       ("cluster.timeslice_overhead", "their overhead")]:
        assert f"{words} {slow[key]:.1%}" in TEXT, key
