"""Run under mpiexec: every exact algorithm against MPI's own Allreduce (the oracle).

Loops over algorithms (every one of mpi_impl.ALGORITHMS but nccl, which needs GPUs),
lengths (0, 1, fewer than the ranks, odd, larger), dtypes and shapes, pipeline segments that
do not divide the chunks, and host staging (a NumPy array pretending to be device memory).
Prints every mismatch and exits 1 if there was any, on every rank.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from verdict import close_enough as close_to, finish, oracle, recorder, same_on_all_ranks as same_bits
from mpi_impl.wire import Wire

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
EXACT = [a for a in mpi_impl.ALGORITHMS if a != "nccl"]
LENGTHS = sorted({0, 1, 2, max(p - 1, 0), p, p + 1, 7, 33, 1000, 4097})
failures, fail = recorder(comm)


def close_enough(y, ref, x):
    return close_to(comm, y, ref, x)


def same_on_all_ranks(y):
    return same_bits(comm, y)


def data(n, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "i":
        return rng.integers(-1000, 1000, n).astype(dtype)
    return (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)


with mpi_impl.abort_on_error():
    for dtype in ("float64", "float32", "int64", "int32"):
        for n in LENGTHS:
            x = data(n, dtype, seed=1000 * rank + n)
            ref = oracle(comm, x)
            for algo in EXACT:
                before = x.copy()
                sent0 = mpi_impl.bytes_sent_by_algo[algo]
                y = mpi_impl.allreduce(x, algo)
                where = f"{algo} n={n} {dtype}"
                if type(y) is not np.ndarray or y.dtype != x.dtype or y.shape != x.shape:
                    fail(f"{where}: returned {type(y).__name__} {y.dtype} {y.shape}")
                    continue
                if not np.array_equal(x, before):
                    fail(f"{where}: the input was modified")
                if not close_enough(y, ref, x):
                    fail(f"{where}: differs from MPI_Allreduce by {np.abs(y - ref).max()}")
                if not same_on_all_ranks(y):
                    fail(f"{where}: ranks disagree bitwise")
                counted = mpi_impl.bytes_sent_by_algo[algo] - sent0
                formula = mpi_impl.bytes_sent(algo, n, x.itemsize, p, rank)
                if counted != formula:
                    fail(f"{where}: sent {counted} bytes, bytes_sent() says {formula}")

    # multi-dimensional input, out= and in place
    x = data(3 * 5 * 7, "float64", seed=rank).reshape(3, 5, 7)
    ref = oracle(comm, x)
    for algo in EXACT:
        out = np.empty_like(x)
        y = mpi_impl.allreduce(x, algo, out=out)
        if y is not out or not close_enough(out, ref, x):
            fail(f"{algo}: out= not filled correctly")
        z = x.copy()
        mpi_impl.allreduce(z, algo, out=z)
        if not close_enough(z, ref, x):
            fail(f"{algo}: in-place (out=x) wrong")
    y = mpi_impl.allreduce(x.tolist(), "ring")           # lists are accepted as NumPy
    if not close_enough(y, ref, x):
        fail("ring: list input wrong")

    # pipeline segments that do not divide the chunks (sizes in bytes: 1 and 12 round to
    # one and a fraction of an element, 1000 is not a multiple of 8), and none at all
    for algo in EXACT:
        for segment in (None, 1, 12, 1000):
            for n in (1, p + 1, 1001, 4097):
                x = data(n, "float64", seed=11 * rank + n)
                ref = oracle(comm, x)
                before = x.copy()
                sent0 = mpi_impl.bytes_sent_by_algo[algo]
                y = mpi_impl.allreduce(x, algo, segment=segment)
                where = f"{algo} segment={segment} n={n}"
                if not np.array_equal(x, before):
                    fail(f"{where}: the input was modified")
                if not close_enough(y, ref, x) or not same_on_all_ranks(y):
                    fail(f"{where}: wrong result or ranks disagree")
                if mpi_impl.bytes_sent_by_algo[algo] - sent0 != mpi_impl.bytes_sent(algo, n, 8, p, rank):
                    fail(f"{where}: bytes sent differ from bytes_sent()")
                z = x.copy()            # in place: segments must not land on values still to be added
                mpi_impl.allreduce(z, algo, out=z, segment=segment)
                if not close_enough(z, ref, x) or not same_on_all_ranks(z):
                    fail(f"{where}: in place (out=x) wrong")

    # host staging, as GPU arrays use it: NumPy arrays stand in for device memory,
    # in whole messages and in segments (then the copies to and from the host are pipelined)
    for algo in EXACT:
        for segment in (None, 40):
            for n in (0, 1, 5, 1001):
                x = data(n, "float64", seed=7 * rank + n)
                ref = oracle(comm, x)
                buf = np.empty_like(x)
                wire = Wire(comm, np, stage=True, segment=segment)
                mpi_impl._MODULES[algo].allreduce(buf, wire, x)
                if not close_enough(buf, ref, x):
                    fail(f"staged {algo} segment={segment} n={n}: wrong result")
                if p > 1 and n > 0 and wire.bytes_staged == 0:
                    fail(f"staged {algo} segment={segment} n={n}: nothing went through host buffers")

# sharded-ps posts each phase's messages at once (two rounds, as dpsim models it), not one
# partner per step: the Wire sees one exchange_add and one exchange, each with every peer
class Counting(Wire):
    calls = []

    def exchange_add(self, sends, sources, into, base=None):
        self.calls.append(("exchange_add", len(sends), len(sources)))
        return super().exchange_add(sends, sources, into, base)

    def exchange(self, sends, receives, arrived=None):
        self.calls.append(("exchange", len(sends), len(receives)))
        return super().exchange(sends, receives, arrived)

    def sendrecv(self, *args):
        self.calls.append(("sendrecv",))
        return super().sendrecv(*args)


if p > 1:
    x = data(1000, "float64", seed=rank)
    counting = Counting(comm, np)
    buf = np.empty_like(x)
    mpi_impl._MODULES["sharded-ps"].allreduce(buf, counting, x)
    if counting.calls != [("exchange_add", p - 1, p - 1), ("exchange", p - 1, p - 1)]:
        fail(f"sharded-ps: expected two rounds with all {p - 1} peers at once, saw {counting.calls}")
    if not close_enough(buf, oracle(comm, x), x):
        fail("sharded-ps through the counting wire: wrong result")

# Wire.exchange hands receives over in the order given (it waits on each in turn: MPICH's
# Waitany is slow with ranks outnumbering cores), every one of them, with the right data
if p > 1:
    peers = [j for j in range(p) if j != rank]
    got = [np.zeros(5) for _ in peers]
    order = []
    Wire(comm, np).exchange([(np.full(5, float(rank)), j) for j in peers],
                            list(zip(got, peers)), order.append)
    if order != list(range(len(peers))) or any((g != j).any() for g, j in zip(got, peers)):
        fail(f"exchange: receives handed over as {order}, data {[g[0] for g in got]}")

finish(comm, failures)
