"""mpi_impl.train's arguments, fuzzed as tests/test_config.py fuzzes dpsim's scenarios: any
command line either parses (training would start) or is one line on stderr with exit code 2,
never a traceback. Checked in this process with train's own parse_args and usage_errors."""
import math

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mpi_impl.errors import usage_errors
from mpi_impl.train_options import PROG, parse_args

FLAGS = ["--model", "--width", "--depth", "--dtype", "--data", "--data-dir", "--samples", "--loader-workers",
         "--prefetch", "--decode-ms", "--batch-per-rank", "--epochs", "--lr", "--momentum", "--seed", "--device",
         "--sync", "--compress", "--warmup-samples", "--bucket-mib", "--bucket-mb", "--json", "--trace",
         "--checkpoint", "--stall-timeout", "--overlap", "--resume", "--no-error-feedback", "--bogus"]
SWITCHES = {"--overlap", "--resume", "--no-error-feedback"}
VALUES = st.one_of(st.sampled_from(["0", "1", "-1", "64", "nan", "inf", "-inf", "1e309", "0.5", "ring", "tree",
                                    "nccl", "1bit", "gpu", "cpu", "mlp", "cnn", "digits", "cifar10", "float64",
                                    "", " ", "\n", "a\x00b", "/", "nodir/x.json", "x.json"]),
                   st.text(max_size=10))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(st.tuples(st.sampled_from(FLAGS), VALUES), max_size=5))
def test_any_command_line_parses_or_is_one_line(args, capsys, tmp_path_factory):
    argv = [w for flag, value in args for w in ((flag,) if flag in SWITCHES else (flag, value))]
    try:
        with usage_errors(PROG):
            parsed = parse_args(argv, 2)
    except SystemExit as stop:
        err = capsys.readouterr().err
        assert stop.code == 2 and err.count("\n") == 1 and err.startswith(f"{PROG}: error: "), (argv, err)
        assert "Traceback" not in err
        return
    for name in ("lr", "momentum", "decode_ms", "bucket_mib", "stall_timeout"):   # what parsed is finite
        assert math.isfinite(getattr(parsed, name)), (argv, name)


@pytest.mark.parametrize("argv, says", [
    (["--json", "a\x00b"], "NUL byte"), (["--checkpoint", "c\x00"], "NUL byte"),
    (["--lr", "nan"], "--lr"), (["--data-dir", "x\ny", "--bogus"], "unrecognized arguments: --bogus"),
    (["--bogus", "a\nb"], "a\\nb")])
def test_cases_the_fuzzing_found_or_might(argv, says, capsys):
    with pytest.raises(SystemExit) as stop:
        with usage_errors(PROG):
            parse_args(argv, 2)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and says in err, err
