"""Run under mpiexec: ZeRO stages 1-3 (mpi_impl/zero.py) against plain synchronous SGD (the
oracle: sgd.GradientAverager with the ring all-reduce, then MomentumSGD), step by step on the
same batches, for an MLP and a CNN in float64, with and without --overlap's buckets; then the
memory each rank holds against the closed form (the rank's chunk of every unit, counted here
with numpy.array_split).  Prints every mismatch; exits 1 if there was any, on every rank.
"""

import numpy as np
from mpi4py import MPI

import mpi_impl
from mpi_impl import nets
from mpi_impl.sgd import GradientAverager, MomentumSGD
from mpi_impl.zero import Zero
from verdict import finish, recorder

comm = MPI.COMM_WORLD
p, rank = comm.Get_size(), comm.Get_rank()
STEPS, LR, MOMENTUM = 4, 0.1, 0.9
failures, fail = recorder(comm)



def model(kind):
    if kind == "mlp":
        return nets.MLP((1, 8, 8), 10, width=24, depth=2, dtype="float64", seed=3)
    return nets.CNN((1, 8, 8), 10, width=2, dtype="float64", seed=3)


def step(net, sync, opt, x, y):
    sync.begin(compressed=False)
    _, dlogits, _ = nets.softmax_cross_entropy(net.forward(x), y)
    net.backward(dlogits, on_grads_ready=sync.ready)
    sync.finish()
    opt.step()


def my_chunk_total(units):
    """Elements of rank `rank`'s chunk of every unit (numpy.array_split's split)."""
    return sum(len(np.array_split(np.arange(hi - lo), p)[rank]) for lo, hi in units)


def check(kind, stage, overlap):
    rng = np.random.default_rng([7, rank])
    batches = [(rng.standard_normal((5, 1, 8, 8)), rng.integers(0, 10, 5)) for _ in range(STEPS)]
    plain = model(kind)
    averager = GradientAverager(plain.grads, plain.layer_offsets, comm, sync="ring")
    sgd = MomentumSGD(plain.params, plain.grads, LR, MOMENTUM)
    sharded = model(kind)
    n, s = sharded.num_params, sharded.params.itemsize
    zero = Zero(sharded, comm, stage, LR, MOMENTUM, overlap=overlap, bucket_mib=1e-3)
    for x, y in batches:
        step(plain, averager, sgd, x, y)
        step(sharded, zero, zero, x, y)
    held = zero.memory()
    with zero.whole_model():
        weights = sharded.params.copy()
    zero.close()
    name = f"{kind} zero{stage}{' overlap' if overlap else ''}"
    if not np.allclose(weights, plain.params, rtol=1e-12, atol=1e-14):
        fail(f"{name}: weights differ from plain SGD by {np.abs(weights - plain.params).max():.3g}")
    if np.array_equal(weights, model(kind).params):
        fail(f"{name}: the weights never moved")
    shard = my_chunk_total(zero.buckets) * s
    want = {1: (n * s, n * s, shard), 2: (n * s, shard, shard), 3: (shard, shard, shard)}[stage]
    got = (held["params"], held["grads"], held["optimizer_state"])
    if got != want:
        fail(f"{name}: memory held {got} != closed form {want}")
    if comm.allreduce(held["optimizer_state"]) != n * s:     # the shards add up to the model
        fail(f"{name}: optimizer shards do not add up to {n * s} bytes")
    return len(zero.buckets)


with mpi_impl.abort_on_error():
    for kind in ("mlp", "cnn"):
        for stage in (1, 2, 3):
            units = check(kind, stage, overlap=False)
            if stage < 3:
                if check(kind, stage, overlap=True) < 2 or units != 1:
                    fail(f"{kind} zero{stage}: --overlap did not cut several buckets")

finish(comm, failures)
