"""ZeRO stage 1: the optimizer state sharded (Rajbhandari et al., "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models", SC 2020, section 5.1; DeepSpeed's stage 1).

Each of the n GPUs keeps the optimizer state of 1/n of the parameters (dpsim.memory divides it).
Each iteration:
  1. backward produces each gradient bucket (m_b bytes); the bucket is reduce-scattered round
     the ring (the first half of ring.py): GPU i ends with the sum of its 1/n of the bucket.
  2. every GPU updates its 1/n of the parameters with its 1/n of the optimizer state: the
     update costs 1/n of a whole one (hook `update_fraction`).
  3. before the next forward, every bucket's updated parameters are all-gathered round the
     ring (the second half of ring.py), bucket by bucket (hook `before_forward`).
Cost per bucket of m_b bytes, on the cluster's rings (Cluster.rings, as ring.py runs them):
  reduce-scatter  (n-1) (alpha + m_b/n beta + m_b/n gamma)
  all-gather      (n-1) (alpha + m_b/n beta)
together the ring all-reduce's 2(n-1) alpha + 2(n-1)/n m beta + (n-1)/n m gamma: ZeRO-1 sends
the bytes of an all-reduce (ZeRO, section 7.2), 2(n-1)/n m per GPU, and moves the all-gather
from the end of backward to the start of forward (dpsim.analytic.zero12_iteration).
Parameters travel at the gradients' width (dpsim.workload: 4 bytes per parameter).
"""
from ..errors import ScenarioError
from . import ring


def reduce_scatter(machine, ranks, nbytes, together=False):
    """Ring reduce-scatter of nbytes over the cluster's rings: each GPU ends with 1/n, summed.
    together: other collectives may run beside it (ring.py, Machine.together)."""
    rings = machine.cluster.rings(ranks)
    yield from ring.reduce_scatter(machine, rings, nbytes / len(rings), together)


def all_gather(machine, ranks, nbytes, together=False):
    """Ring all-gather of nbytes: each GPU starts with 1/n and ends with all of it."""
    rings = machine.cluster.rings(ranks)
    yield from ring.all_gather(machine, rings, nbytes / len(rings), together)


def allreduce(machine, ranks, nbytes):
    """What backward's sync does with a bucket: reduce-scatter it (the all-gather comes later)."""
    yield from reduce_scatter(machine, ranks, nbytes)


def broadcast_weights(machine, ranks, work):
    """The updated parameter shards to every GPU: an all-gather per bucket."""
    for bucket in work.buckets:
        yield from all_gather(machine, ranks, bucket.nbytes)


def before_forward(machine, ranks, work, batch):
    yield from broadcast_weights(machine, ranks, work)


def update_fraction(gpus):
    """Each GPU updates 1/n of the parameters."""
    return 1 / gpus


def check(sc):
    """ZeRO shards full-precision gradients over GPUs: no compression, and more than one GPU."""
    if sc.sync.compression != "none":
        raise ScenarioError("sync.compression", f"{sc.sync.strategy} reduce-scatters full-precision gradients; "
                            "choose none (compression wraps an all-reduce: ring, halving-doubling, ...)")
    if sc.gpus < 2:
        raise ScenarioError("sync.strategy", f"{sc.sync.strategy} shards over the GPUs, and the cluster has one; "
                            "give cluster.gpus_per_node or cluster.nodes > 1, or choose none")
