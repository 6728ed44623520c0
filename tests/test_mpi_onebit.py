"""1-bit SGD all-reduce: bitwise agreement with a dense one-process oracle over several
calls (residuals carried), bytes on the wire, and the error-feedback effect.

The work happens in tests/mpi_checks/onebit_check.py, one mpiexec launch per rank count.
"""
import numpy as np
import pytest



@pytest.mark.parametrize("ranks", [1, 2, 3, 4])
def test_onebit_matches_dense_oracle_and_compresses(ranks, mpirun):
    proc = mpirun(ranks, ["tests/mpi_checks/onebit_check.py"], timeout=90)
    assert proc.returncode == 0, (f"exit code {proc.returncode}\n{proc.stdout[-4000:]}\n"
                                  f"{proc.stderr[-4000:]}")
    assert f"{ranks} ranks, 0 failures" in proc.stdout


def test_codec_round_trip():
    # one process, no mpiexec: decode(encode(v)) is sign(v) * mean |v| per block
    from mpi_impl.onebit import decode, encode
    v = np.array([3.0, -1.0, 0.0, -0.0, 2.0, -6.0, 5.0])
    signs, scales = encode(v, block=4)
    assert signs.dtype == np.uint8 and signs.size == 1          # 7 bits fit in one byte
    np.testing.assert_array_equal(scales, [1.0, 13.0 / 3.0])
    out = decode(signs, scales, v.size, np.empty_like(v), block=4)
    np.testing.assert_array_equal(out, [1.0, -1.0, 1.0, 1.0, 13 / 3, -13 / 3, 13 / 3])


def test_the_block_is_the_vocabulary_s():
    # one scale per dpsim.vocabulary.ONEBIT_BLOCK values, the simulator's block too
    from dpsim.vocabulary import ONEBIT_BLOCK
    from mpi_impl.onebit import OneBitAllreduce, encode
    from mpi4py import MPI
    assert OneBitAllreduce(MPI.COMM_SELF).block == ONEBIT_BLOCK
    assert encode(np.ones(3 * ONEBIT_BLOCK + 1))[1].size == 4


def test_the_codec_clock_belongs_to_the_instance():
    # no process-wide patching: encode/decode stay plain functions, each instance sums its own time
    import mpi_impl
    from mpi4py import MPI
    from mpi_impl import onebit, sgd
    assert not hasattr(sgd, "clock_the_codec") and not hasattr(sgd, "codec_seconds")
    plain = (onebit.encode, onebit.decode)
    a, b = mpi_impl.OneBitAllreduce(MPI.COMM_SELF), mpi_impl.OneBitAllreduce(MPI.COMM_SELF)
    a(np.ones(50_000, np.float32))
    assert a.codec_s > 0 and b.codec_s == 0
    assert (onebit.encode, onebit.decode) == plain
