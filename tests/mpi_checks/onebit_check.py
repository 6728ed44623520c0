"""Run under mpiexec: OneBitAllreduce against a dense single-process oracle, bitwise.

Every rank can recreate every rank's input (seeded by rank), so each rank runs the whole
1-bit SGD exchange densely in plain NumPy -- quantise each rank's gradient plus its
residual, sum in rank order, add the server residual, quantise again -- carrying the
residuals across calls, and checks that the MPI result is the same, bit for bit.
The oracle's quantiser is written here again, block by block, not imported.
Also checks the bytes sent against the fp32 ring.  Exits 1 on any failure, on every rank.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from verdict import finish
from dpsim.vocabulary import ONEBIT_BLOCK
from mpi_impl import ring, wire as wire_module

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
failures = []


def stripes(n):
    return [len(s) for s in np.array_split(np.arange(n), p)]


def quantise(v, block):
    """Sign times mean |v| over each block of v (blocks start at v[0]); one block at a time."""
    out = np.empty_like(v)
    for start in range(0, v.size, block):
        piece = v[start:start + block]
        scale = np.abs(piece).mean()
        out[start:start + block] = np.where(piece >= 0, scale, -scale)
    return out


def quantise_striped(v, block):
    out, at = np.empty_like(v), 0
    for length in stripes(v.size):
        out[at:at + length] = quantise(v[at:at + length], block)
        at += length
    return out


class DenseOracle:
    def __init__(self, n, dtype, block, error_feedback):
        self.worker = [np.zeros(n, dtype) for _ in range(p)]
        self.server = np.zeros(n, dtype)
        self.block, self.ef = block, error_feedback

    def __call__(self, grads):
        total = None
        for r in range(p):
            w = grads[r] + self.worker[r]
            q = quantise_striped(w, self.block)
            if self.ef:
                self.worker[r] = w - q
            total = q.copy() if total is None else total + q
        total = total + self.server
        result = quantise_striped(total, self.block)
        if self.ef:
            self.server = total - result
        return result


def grad(r, n, dtype, call):
    rng = np.random.default_rng([r, n, call])
    return (rng.standard_normal(n) * rng.uniform(0.1, 10)).astype(dtype)


with mpi_impl.abort_on_error():
    for dtype in ("float64", "float32"):
        for n in sorted({0, 1, p, 2 * p + 1, 100, 1000, 3 * 256 * p + 13}):
            for block, ef in ((None, True), (7, True), (None, False)):
                if block and n > 1000:
                    continue                   # the oracle's block loop is slow in Python
                onebit = (mpi_impl.OneBitAllreduce(error_feedback=ef, block=block) if block
                          else mpi_impl.OneBitAllreduce(error_feedback=ef))    # the default block
                oracle = DenseOracle(n, dtype, block or ONEBIT_BLOCK, ef)
                for call in range(4):
                    grads = [grad(r, n, dtype, call) for r in range(p)]
                    got = onebit(grads[rank].reshape(-1, 1) if n else grads[rank])
                    want = oracle(grads)
                    where = f"1bit n={n} {dtype} block={block or ONEBIT_BLOCK} ef={ef} call {call}"
                    if got.dtype != want.dtype or got.size != n:
                        failures.append(f"{where}: got {got.dtype} of size {got.size}")
                    elif got.reshape(-1).tobytes() != want.tobytes():
                        bad = np.flatnonzero(got.reshape(-1) != want)
                        failures.append(f"{where}: {bad.size} elements differ from the oracle, "
                                        f"first at {bad[:3]}")

    # residuals can be saved and restored (checkpoints): a restored copy continues identically
    n = 3001
    first, second = mpi_impl.OneBitAllreduce(), mpi_impl.OneBitAllreduce()
    g = grad(rank, n, "float64", 0)
    first(g)
    if second.residuals(g) is not None:
        failures.append("residuals() before the first call should be None")
    second.set_residuals(g, *[r.copy() for r in first.residuals(g)])
    if first(g).tobytes() != second(g).tobytes():
        failures.append("an instance with restored residuals continues differently")

    # codec_s: each instance clocks its own encode/decode, nobody else's
    first, second = mpi_impl.OneBitAllreduce(), mpi_impl.OneBitAllreduce()
    g = grad(rank, 100_000, "float32", 0)
    start = MPI.Wtime()
    first(g)
    took = MPI.Wtime() - start
    if not 0 < first.codec_s <= took:
        failures.append(f"codec_s {first.codec_s} after one call of {took} s")
    if second.codec_s != 0:
        failures.append("codec_s of an instance that was not called is not 0")
    before = first.codec_s
    second(g)
    if first.codec_s != before or second.codec_s <= 0:
        failures.append("calling one instance changed another's codec_s")

    # host staging, as for GPU arrays: NumPy pretends to be device memory; same bits expected
    wires = []

    def staged_wire(comm, xp, cuda_aware=None):
        wires.append(wire_module.Wire(comm, xp, stage=True))
        return wires[-1]

    plain, staged = mpi_impl.OneBitAllreduce(), mpi_impl.OneBitAllreduce()
    g = grad(rank, 1001, "float32", 0)
    want = [plain(g) for _ in range(2)]
    real_make_wire, wire_module.make_wire = wire_module.make_wire, staged_wire
    try:
        got = [staged(g) for _ in range(2)]
    finally:
        wire_module.make_wire = real_make_wire
    if any(a.tobytes() != b.tobytes() for a, b in zip(got, want)):
        failures.append("1bit through host staging differs from the direct path")
    if p > 1 and not all(w.bytes_staged > 0 for w in wires):
        failures.append("1bit staging: nothing went through host buffers")

    # bandwidth: at most 1/25 of what the fp32 ring sends, for a large buffer
    n = 1 << 20
    for dtype in ("float32", "float64"):
        onebit = mpi_impl.OneBitAllreduce()
        onebit(np.ones(n, dtype))
        fp32_ring = ring.bytes_sent(n, 4, p, rank)
        if p > 1 and onebit.bytes_sent * 25 > fp32_ring:
            failures.append(f"1bit {dtype} sent {onebit.bytes_sent} bytes, more than 1/25 of "
                            f"the fp32 ring's {fp32_ring}")
        if p == 1 and onebit.bytes_sent != 0:
            failures.append(f"1bit on one rank sent {onebit.bytes_sent} bytes")

    # error feedback: averaged over calls, the compressed sum approaches the true sum
    n, calls = 4096, 40
    g = grad(rank, n, "float64", 0)
    exact = np.empty_like(g)
    comm.Allreduce(g, exact)
    errors = {}
    for ef in (True, False):
        onebit = mpi_impl.OneBitAllreduce(error_feedback=ef)
        mean = sum(onebit(g) for _ in range(calls)) / calls
        errors[ef] = np.abs(mean - exact).mean() / np.abs(exact).mean()
    if not errors[True] < 0.2 * errors[False]:
        failures.append(f"error feedback does not help: relative error {errors[True]:.3g} "
                        f"with it, {errors[False]:.3g} without")

finish(comm, [f"[rank {rank}/{p}] {line}" for line in failures])
