"""The answer checkers of lectures 01-03 and the what-if panel.

Right answers are worked out here by hand from the exercise statements (the formulas the
lectures teach), so a checker that drifts from its own statement fails."""
import sys

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import dpsim  # noqa: E402
from course import whatif  # noqa: E402
from course.check import Verdict, lecture1, lecture2, lecture3  # noqa: E402

ALL = [lecture1.exercise1, lecture1.exercise2, lecture1.exercise3,
       lecture2.exercise1, lecture2.exercise2, lecture2.exercise3,
       lecture3.exercise1, lecture3.exercise2, lecture3.exercise3]


@pytest.mark.parametrize("check", ALL, ids=lambda f: f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}")
def test_no_answer_yet_is_not_ok_and_says_what_to_give(check):
    v = check(None)
    assert isinstance(v, Verdict) and not v
    assert str(v).startswith("not yet: set `answer`")


@pytest.mark.parametrize("check", ALL, ids=lambda f: f"{f.__module__.rsplit('.', 1)[1]}.{f.__name__}")
def test_nonsense_is_not_ok_and_does_not_raise(check):
    assert not check("banana")
    assert not check([1, 2])


# ------------------------------------------------------------------ lecture 1

T1_MS = 12.3e9 * 64 / (15.7e12 * 0.35) * 1e3           # F b / (P e)
T2_MS = 2 * 7 / 8 * 160e6 / 1.25e9 * 1e3                # ring: 2 (n-1)/n m / B


def test_lecture1_exercise1_max_rule():
    assert T2_MS > T1_MS
    assert lecture1.exercise1(T2_MS)
    assert lecture1.exercise1(round(T2_MS))
    without = lecture1.exercise1(T1_MS + T2_MS)
    assert not without and "WITHOUT overlap" in without.message
    assert not lecture1.exercise1(T1_MS)
    assert not lecture1.exercise1(256.0)                # 2m/B: forgot (n-1)/n


def test_lecture1_exercise2_break_even_batch():
    # t1(b) = F (b + b_half) / (P e_max) = t2  ->  b = t2 P e_max / F - b_half, rounded up
    exact = T2_MS / 1e3 * 15.7e12 * 0.35 / 12.3e9 - 8
    b = int(exact) + 1
    assert lecture1.exercise2(b)
    assert not lecture1.exercise2(b - 1)
    assert "round up" in lecture1.exercise2(exact).message
    assert not lecture1.exercise2(exact + 8)            # ignoring the efficiency curve
    assert not lecture1.exercise2(b + 5)


def test_lecture1_exercise3_strong_scaling():
    assert lecture1.exercise3("strong")
    assert lecture1.exercise3(" Strong ")
    assert not lecture1.exercise3("weak")


# ------------------------------------------------------------------ lecture 2

def test_lecture2_exercise1_ps_on_gpu0():
    ms = 2 * 7 * 160e6 / 16e9 * 1e3                     # n-1 gradients in, n-1 copies out
    assert lecture2.exercise1(ms)
    assert not lecture2.exercise1(ms / 2)
    assert "gather" in lecture2.exercise1(ms / 2).message
    assert not lecture2.exercise1(15.0)


def test_lecture2_exercise2_ring_recursive_doubling_crossover():
    # 14 alpha + 1.75 m beta = 3 alpha + 3 m beta  ->  m = 11 alpha / (1.25 beta)
    kb = 11 * 2e-6 * 16e9 / 1.25 / 1e3
    assert lecture2.exercise2(kb)
    assert not lecture2.exercise2(kb * 1e3)
    assert "bytes" in lecture2.exercise2(kb * 1e3).message
    assert not lecture2.exercise2(kb * 2)


def test_lecture2_exercise3_recursive_doubling_sends_most_bytes():
    # per GPU: recursive doubling log2(8) m = 3m; ring, halving-doubling and sharded 2 (n-1)/n m;
    # ps on GPU 0 averages to the same
    assert lecture2.exercise3("recursive-doubling")
    for wrong in ("ps", "ring", "sharded-ps", "halving-doubling"):
        assert not lecture2.exercise3(wrong)


# ------------------------------------------------------------------ lecture 3

def test_lecture3_exercise1_ring_on_nvswitch():
    m = 25_557_032 * 4                                  # ResNet-50, torchvision's count
    ms = (14 * 2e-6 + 2 * 7 / 8 * m / 240e9) * 1e3      # 300 GB/s nominal, 0.8 of it achievable
    assert not lecture3.exercise1((14 * 2e-6 + 2 * 7 / 8 * m / 300e9) * 1e3)     # the nominal rate
    assert lecture3.exercise1(ms)
    assert not lecture3.exercise1(2 * m / 240e9 * 1e3 * 2)
    assert not lecture3.exercise1(ms * 1.2)


def test_lecture3_exercise2_flat_over_hierarchical():
    t = {s: dpsim.simulate(lecture3.EX2_SCENARIO, {"sync.strategy": s}).sync_time_s for s in ("ring", "hierarchical")}
    ratio = t["ring"] / t["hierarchical"]
    assert ratio > 3                                     # a 1 MB message: the flat ring's 62 network steps
    assert lecture3.exercise2(ratio)
    assert not lecture3.exercise2(1.0)


def test_lecture3_exercise3_network_upgrade_wins():
    assert lecture3.exercise3("network")
    assert not lecture3.exercise3("inside")


# ------------------------------------------------------------------ the what-if panel

@pytest.fixture
def no_figures_left():
    yield
    plt.close("all")


def test_whatif_static_fallback_without_ipywidgets(monkeypatch, capsys, no_figures_left):
    monkeypatch.setitem(sys.modules, "ipywidgets", None)     # `import ipywidgets` raises ImportError
    calls = []
    real_run = whatif.run
    monkeypatch.setattr(whatif, "run", lambda *a, **k: calls.append(a) or real_run(*a, **k))
    fig = whatif.explore()
    assert "static grid" in capsys.readouterr().out
    assert isinstance(fig, matplotlib.figure.Figure)
    axes = fig.get_axes()
    assert len(axes) == 6                                # 2 bandwidths x 3 strategies
    assert all(len(ax.get_lines()) == 3 for ax in axes)   # ideal + 2 batch sizes
    assert len(calls) == 12
    assert all(ax.get_xlabel() == "GPUs" for ax in axes[3:])


def test_whatif_sliders_draw_once_and_redraw(monkeypatch, no_figures_left):
    pytest.importorskip("ipywidgets")
    drawn = []
    real_draw = whatif.draw

    def spy(**knobs):
        drawn.append(knobs)
        return real_draw(**knobs)

    monkeypatch.setattr(whatif, "draw", spy)
    panel = whatif.explore()
    assert drawn == [whatif.DEFAULTS]                    # drawn once when shown
    strategy = panel.children[1].children[1]
    strategy.value = "halving-doubling"                  # moving a knob re-simulates
    assert len(drawn) == 2 and drawn[-1]["strategy"] == "halving-doubling"


def test_whatif_draw_labels_and_numbers(no_figures_left):
    fig = whatif.draw(bandwidth_gbs=12.5, batch_per_gpu=32, gpus=8, strategy="hierarchical")
    left, right = fig.get_axes()
    assert left.get_xlabel() == "GPUs" and "speed-up" in left.get_ylabel()
    assert "ms" in right.get_ylabel()
    runs = dpsim.sweep(whatif.scenario(12.5, 32, "hierarchical"), [1, 2, 4, 8])
    assert f"{runs[-1].speedup:.1f}x on 8 GPUs" in left.get_legend().get_texts()[1].get_text()
