"""python -m course: --help shows every default; errors are one line of one shape; grade on an
empty folder warns and exits 1; doctor is a command."""
import argparse

import pytest

from course import __main__ as cli


def subparsers():
    p = cli.parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


@pytest.mark.parametrize("name", ["doctor", "calibrate", "compare", "grade"])
def test_help_shows_every_default(name):
    sub = subparsers()[name]
    text = " ".join(sub.format_help().split())
    for action in sub._actions:
        if action.option_strings and action.help != argparse.SUPPRESS \
                and action.default not in (None, False, argparse.SUPPRESS) and action.dest != "help":
            shown = action.default if isinstance(action.default, str) else str(action.default)
            assert f"(default: {shown})" in text, (name, action.dest)


def test_gpu_without_cupy_is_the_one_line_error(capsys, monkeypatch):
    import builtins
    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__",
                        lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name)) if name == "cupy" else real(name, *a, **k))
    with pytest.raises(SystemExit) as exit:
        cli.main(["calibrate", "--device", "gpu", "-o", "x.toml"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and err.startswith("python -m course: error: --device gpu needs CuPy") \
        and err.count("\n") == 1


def test_grading_an_empty_folder_warns_and_exits_1(tmp_path, capsys):
    assert cli.main(["grade", str(tmp_path), "-o", str(tmp_path / "g.csv")]) == 1
    assert "no notebooks" in capsys.readouterr().err
    assert not (tmp_path / "g.csv").exists()


def test_doctor_is_a_command(capsys, monkeypatch):
    from course import doctor
    monkeypatch.setattr(doctor, "checks", lambda gpu: [lambda: ("ok", "python: fine")] + ([lambda: ("FAIL", "gpu")] if gpu else []))
    assert cli.main(["doctor"]) == 0
    assert cli.main(["doctor", "--gpu"]) == 1
    assert "FAIL  gpu" in capsys.readouterr().out


def test_a_profile_check_never_builds_a_network_too_big_to_hold(tmp_path, capsys):
    """Without a sidecar, compare counts the model's parameters; a network mpi_impl.train would
    refuse is refused by arithmetic first (building it would allocate ~50e9 numbers)."""
    profile = tmp_path / "p.toml"
    profile.write_text('name = "p"\n[cluster]\ngpu = {fp32_tflops = 0.1, mem_bw_gbs = 20.0}\n'
                       '[model]\nparams = 1000\nflops_per_sample = 1000.0\nlayers = 1\n')
    with pytest.raises(SystemExit) as exit:
        cli.main(["compare", "--profile", str(profile), "--width", "16384", "--depth", "64"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and "above mpi_impl.train's limit" in err and err.count("\n") == 1
