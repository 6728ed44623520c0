"""1-bit SGD all-reduce: bitwise agreement with a dense one-process oracle over several
calls (residuals carried), bytes on the wire, and the error-feedback effect.

The work happens in tests/mpi_checks/onebit_check.py, one mpiexec launch per rank count.
"""
import numpy as np
import pytest

from mpirun import run_mpi


@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_onebit_matches_dense_oracle_and_compresses(ranks):
    proc = run_mpi(ranks, ["tests/mpi_checks/onebit_check.py"], timeout=90)
    assert proc.returncode == 0, (f"exit code {proc.returncode}\n{proc.stdout[-4000:]}\n"
                                  f"{proc.stderr[-4000:]}")
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_codec_round_trip():
    # one process, no mpiexec: decode(encode(v)) is sign(v) * mean |v| per chunk
    from mpi_impl.onebit import decode, encode
    v = np.array([3.0, -1.0, 0.0, -0.0, 2.0, -6.0, 5.0])
    signs, scales = encode(v, chunk=4)
    assert signs.dtype == np.uint8 and signs.size == 1          # 7 bits fit in one byte
    np.testing.assert_array_equal(scales, [1.0, 13.0 / 3.0])
    out = decode(signs, scales, v.size, np.empty_like(v), chunk=4)
    np.testing.assert_array_equal(out, [1.0, -1.0, 1.0, 1.0, 13 / 3, -13 / 3, 13 / 3])
