"""Run under mpiexec with the device as its argument, cpu or gpu: the all-reduces and the 1-bit
codec on that device's arrays (NumPy's, or CuPy's on the GPU), each against an oracle on the host.

  all-reduce   every algorithm (nccl only on the GPU and on one rank: NCCL takes one GPU per
               rank) on float32 and float64 arrays of a few lengths: the result is an array of the
               input's module, dtype and shape, within the summation bound of MPI's Allreduce of
               the same values on the host, with the same bits on every rank
  staging      the same algorithms through host buffers (what a GPU array takes without a
               CUDA-aware MPI; NumPy stands in on the CPU): the right sum, and over all ranks
               every byte sent was copied to the host once and every byte received copied back
               once (Wire.bytes_staged = 2 x Wire.bytes_sent, summed over the ranks; MPI's own
               Allreduce: each rank's array to the host and its sum back)
  1-bit codec  encode on the device gives the sign bits of v >= 0 and each block's mean |v|
               (float64 on the host) within float rounding, and decode gives back +-scale

Prints every mismatch and exits 1 if there was any, on every rank.
"""
import sys

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl import onebit
from mpi_impl.checkpoint import to_numpy as host
from mpi_impl.device import pick_device
from mpi_impl.wire import Wire
from verdict import close_enough, finish, oracle, recorder, same_on_all_ranks

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
failures, fail = recorder(comm)
xp = pick_device(sys.argv[1]).xp
ALGORITHMS = [a for a in mpi_impl.ALGORITHMS if a != "nccl" or (xp is not np and p == 1)]
LENGTHS = (1, p + 1, 1001, 65_537)


def values(n, dtype, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * 10 ** rng.uniform(-2, 2, n)).astype(dtype)


with mpi_impl.abort_on_error():
    for dtype in ("float32", "float64"):
        for n in LENGTHS:
            x_host = values(n, dtype, seed=100 * rank + n)
            ref = oracle(comm, x_host)
            for algo in ALGORITHMS:
                where = f"{sys.argv[1]} {algo} n={n} {dtype}"
                y = mpi_impl.allreduce(xp.asarray(x_host), algo)
                if type(y).__module__.split(".")[0] != xp.__name__ or y.dtype != x_host.dtype or y.shape != (n,):
                    fail(f"{where}: returned {type(y).__module__}.{type(y).__name__} {y.dtype} {y.shape}")
                    continue
                if not close_enough(comm, host(y), ref, x_host) or not same_on_all_ranks(comm, host(y)):
                    fail(f"{where}: differs from MPI_Allreduce on the host, or ranks disagree")

    for algo in [a for a in ALGORITHMS if a != "nccl"]:
        for segment in (None, 4096):
            x_host = values(10_007, "float64", seed=7 * rank)
            ref = oracle(comm, x_host)
            buf = xp.empty(x_host.shape, x_host.dtype)
            wire = Wire(comm, xp, stage=True, segment=segment)
            mpi_impl._MODULES[algo].allreduce(buf, wire, xp.asarray(x_host))
            where = f"{sys.argv[1]} staged {algo} segment={segment}"
            if not close_enough(comm, host(buf), ref, x_host):
                fail(f"{where}: wrong result")
            staged, sent = comm.allreduce(wire.bytes_staged), comm.allreduce(wire.bytes_sent)
            # "mpi" counts the nominal 2 (p-1)/p m it sends; MPI's own Allreduce stages each
            # rank's m to the host and the sum back: 2 m a rank (nothing on one rank)
            expected = 2 * p * x_host.nbytes if algo == "mpi" and p > 1 else 2 * sent
            if staged != expected:
                fail(f"{where}: {staged} bytes copied between device and host, expected {expected}")

    block = onebit.ONEBIT_BLOCK
    for n in (1, block - 1, block, block + 1, 100_003):
        v_host = values(n, "float32", seed=rank + n)
        v_host[0] = 0.0                                  # zero counts as non-negative: bit 1
        signs, scales = onebit.encode(xp.asarray(v_host))
        means = [np.abs(v_host[i:i + block]).astype(np.float64).mean() for i in range(0, n, block)]
        if not np.array_equal(host(signs), np.packbits(v_host >= 0)):
            fail(f"{sys.argv[1]} 1-bit n={n}: sign bits are not those of v >= 0")
        if not np.allclose(host(scales), means, rtol=block * np.finfo(np.float32).eps, atol=0):
            fail(f"{sys.argv[1]} 1-bit n={n}: scales are not the blocks' mean |v|")
        out = host(onebit.decode(signs, scales, n, xp.empty(n, np.float32)))
        expect = np.where(v_host >= 0, 1.0, -1.0) * np.repeat(host(scales), block)[:n]
        if not np.array_equal(out, expect.astype(np.float32)):
            fail(f"{sys.argv[1]} 1-bit n={n}: decode is not +-scale")

finish(comm, failures)
