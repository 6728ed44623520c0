"""PyTorch nn.DataParallel: one process drives every GPU of a node from GPU 0 (PyTorch docs,
"DataParallel"; it is single-node only).

Each iteration:
  1. scatter:   GPU 0 sends every other GPU its slice of the batch (b x input bytes each).
  2. replicate: GPU 0 broadcasts the parameters (m bytes): replicas are rebuilt every time.
  3. forward on every GPU; gather: outputs (b x output bytes) go to GPU 0, which computes
     the loss of the whole batch; the gradients of the outputs come back the same way.
  4. backward on every GPU, then reduce: gradients are summed into GPU 0.
  5. GPU 0 alone applies the update (the others wait for the next replicate).
Broadcast and reduce go through NCCL, which pipelines them along a chain of GPUs in segments
of 4 MiB (NCCL_BUFFSIZE's default). A chain of n GPUs and S segments takes S + n - 2 steps:
  chain cost:  (S + n - 2) (alpha + (m/S) beta [+ (m/S) gamma for the reduce])
So GPU 0 moves the model twice per iteration and does all the updating: the reason
DataParallel gives about 3.5x, not 4x, on four GPUs, and why DistributedDataParallel exists.

Besides `allreduce`, this module has every hook the engine offers (see strategies/__init__.py).
"""
import math

from ..errors import ScenarioError

SEGMENT_BYTES = 4 * 2**20      # NCCL_BUFFSIZE default (NCCL environment-variable docs)
ONE_PROCESS_PER_NODE = True    # one Python process, one data loader, for all the node's GPUs


def segments(nbytes):
    return max(1, math.ceil(nbytes / SEGMENT_BYTES))


def chain(machine, order, nbytes, reduce, label):
    """Pipelined chain: segment j crosses hop h in step j + h, all hops of a step at once."""
    s, hops = segments(nbytes), len(order) - 1
    seg = nbytes / s
    for step in range(s + hops - 1):
        moving = [h for h in range(hops) if 0 <= step - h < s]
        yield machine.send([(order[h], order[h + 1], seg) for h in moving], label)
        if reduce:
            yield machine.reduce([order[h + 1] for h in moving], seg)


def broadcast_weights(machine, ranks, work):
    """replicate: GPU 0's new weights to every other GPU, down the chain."""
    yield from chain(machine, ranks, work.grad_bytes, reduce=False, label="replicate")


def before_forward(machine, ranks, work, batch):
    yield machine.send([(ranks[0], r, batch * work.input_bytes) for r in ranks[1:]], "scatter-inputs")
    yield from broadcast_weights(machine, ranks, work)


def after_forward(machine, ranks, work, batch):
    nbytes = batch * work.output_bytes
    yield machine.send([(r, ranks[0], nbytes) for r in ranks[1:]], "gather-outputs")
    yield machine.send([(ranks[0], r, nbytes) for r in ranks[1:]], "scatter-output-grads")


def allreduce(machine, ranks, nbytes):
    """Reduce to GPU 0 only: the others get the new weights from the next replicate."""
    yield from chain(machine, ranks[::-1], nbytes, reduce=True, label="reduce-to-gpu0")


def updaters(ranks):
    return ranks[:1]


def check(sc):
    if sc.sync.compression == "1bit":
        raise ScenarioError("sync.compression", "1bit replaces the all-reduce with its own striped exchange; "
                            "it cannot wrap dataparallel's reduce to GPU 0")
    if sc.sync.compression == "topk":
        raise ScenarioError("sync.compression", "topk all-gathers sparse gradients round a ring; it cannot wrap "
                            "dataparallel's reduce to GPU 0")
    if sc.cluster.nodes > 1:
        raise ScenarioError("sync.strategy", "dataparallel drives the GPUs of one node only (PyTorch "
                            "DataParallel); for several nodes choose ring, hierarchical, halving-doubling, "
                            "ps, sharded-ps or recursive-doubling")
