"""python -m course refuses bad arguments and profiles before it measures anything: one line on
stderr, exit code 2, no traceback, nothing written. Measuring is replaced by a function that
fails the test, so a check that came after the work would be caught."""
import pytest

from course import __main__ as cli
from course import calibrate, compare
from course.calibrate import to_toml


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    def measured(*args, **kwargs):
        raise AssertionError("measured before the arguments were checked")
    monkeypatch.setattr(calibrate, "calibrate", measured)
    monkeypatch.setattr(compare, "compare", measured)


def a_profile(params):
    return {"name": "this-machine",
            "cluster": {"gpu": {"fp32_tflops": 0.1, "mem_bw_gbs": 20.0}, "cpu_cores": 2},
            "model": {"params": params, "flops_per_sample": 1e6, "layers": 2}}


@pytest.fixture
def files(tmp_path):
    right = compare.model_params("mlp", 64, 1)
    (tmp_path / "good.toml").write_text(to_toml(a_profile(right)))
    (tmp_path / "other.toml").write_text(to_toml(a_profile(right + 1)))
    (tmp_path / "broken.toml").write_text('name = "unterminated\n')
    (tmp_path / "binary.toml").write_bytes(bytes(range(256)))
    (tmp_path / "badkey.toml").write_text('[cluster]\ngpus_per_nod = 4\n')
    (tmp_path / "folder").mkdir()
    return tmp_path


SMALL = ["--width", "64", "--depth", "1"]
CASES = [
    (["compare", "--ranks", "0"], "--ranks: must be at least 1"),
    (["compare", "--ranks", "1,x"], "--ranks: expected a whole number"),
    (["compare", "--ranks", "100000"], "at most 256"),
    (["calibrate", "--ranks", "\n"], "unrecognized arguments: --ranks \\n"),
    (["compare", "--sync", "bogus"], "unknown algorithm 'bogus'"),
    (["compare", "--sync", "tree"], "'recursive-doubling'"),
    (["compare", "--sync", "hierarchical"], "unknown algorithm 'hierarchical'"),
    (["compare", "--compress", "gzip"], "unknown compression 'gzip'"),
    (["compare", "--samples", "0"], "--samples: must be at least 1"),
    (["compare", "--epochs", "1"], "--epochs: must be at least 2"),
    (["compare", "--repeats", "0"], "--repeats: must be at least 1"),
    (["compare", "--batch", "0"], "--batch: must be at least 1"),
    (["compare", "--samples", "100", "--ranks", "4"], "less than one step of 4 ranks"),
    (["calibrate", "--width", "0"], "--width: must be at least 1"),
    (["calibrate", "--width", "10000000"], "--width: at most"),
    (["calibrate", "-o", "{d}/nodir/p.toml"], "no directory to write"),
    (["calibrate", "-o", "{d}/folder"], "is a directory"),
    (["compare", "--json", "{d}/nodir/c.json"], "no directory to write"),
    (["compare", "--plot", "{d}/folder"], "is a directory"),
    (["compare", "--plot", "{d}/plot"], "ending in .png"),
    (["compare", "--plot", "{d}/plot.jpg"], "ending in .png"),
    (["compare", "--profile", "{d}/missing.toml"], "no such file"),
    (["compare", "--profile", "a\x00b"], "NUL byte"),
    (["compare", "--json", "a\x00b.json"], "NUL byte"),
    (["calibrate", "-o", "p\x00.toml"], "NUL byte"),
    (["compare", "--profile", "{d}/folder"], "not a regular file"),
    (["compare", "--profile", "{d}/broken.toml"], "not a profile written by calibrate"),
    (["compare", "--profile", "{d}/binary.toml"], "not a profile written by calibrate"),
    (["compare", "--profile", "{d}/badkey.toml"], "gpus_per_nod"),
    (["compare", "--profile", "{d}/other.toml", *SMALL], "sidecar other.measured.json is missing"),
]


@pytest.mark.parametrize("args, says", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_one_line_and_exit_2_before_any_work(args, says, files, capsys):
    before = sorted(p.name for p in files.iterdir())
    with pytest.raises(SystemExit) as stop:
        cli.main([a.format(d=files) for a in args])
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.count("\n") == 1 and err.startswith("python -m course: error: "), err
    assert says in err and "Traceback" not in err
    assert sorted(p.name for p in files.iterdir()) == before               # nothing written


def test_a_good_profile_without_its_sidecar_passes_the_checks(files):
    # the parameter count matches the model asked for, so the work starts (and is caught here)
    with pytest.raises(AssertionError, match="measured before"):
        cli.main(["compare", "--profile", str(files / "good.toml"), *SMALL, "--ranks", "1"])


# ------------------------------------------------------------------ fuzzing

from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

FLAGS = ["--ranks", "--sync", "--compress", "--samples", "--epochs", "--repeats", "--width", "--depth",
         "--batch", "--model", "--device", "--json", "--plot", "--profile", "-o", "--probe", "--bogus"]
VALUES = st.one_of(st.sampled_from(["0", "1", "2", "-1", "1,2", "4,a", "ring", "ps,tree", "1bit", "none",
                                    "mlp", "cnn", "cpu", "1e9", "nan", "", " ", "x.png", "nodir/x.json",
                                    "../", "\x00", "99999999999999999999"]),
                   st.text(max_size=12))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["compare", "calibrate"]),
       args=st.lists(st.tuples(st.sampled_from(FLAGS), VALUES), max_size=5))
def test_any_arguments_either_start_the_work_or_fail_in_one_line(command, args, capsys):
    argv = [command] + [word for flag, value in args for word in ((flag,) if flag == "--probe" else (flag, value))]
    try:
        cli.main(argv)
    except AssertionError as e:
        assert "measured before" in str(e)                # valid: the work would start here
        capsys.readouterr()
        return
    except SystemExit as stop:
        err = capsys.readouterr().err
        if stop.code == 0:                                 # --help and the like
            return
        assert stop.code == 2 and err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        return
    raise AssertionError(f"{argv}: neither refused nor started")
