"""The words both halves share, defined once: algorithm names, the parts of an iteration,
1-bit SGD's block of values, the bucket unit.

dpsim (the simulator) and mpi_impl (the measured implementation) both import this file, and
mpi_impl imports nothing else of dpsim, so a name read in one half means the same thing in
the other. It imports nothing itself.
"""

MIB = 2**20   # gradient buckets are sized in MiB in both halves (PyTorch DDP's bucket_cap_mb is MiB too)

# ------------------------------------------------------------------ all-reduce algorithms
# Each is named for what it does. dpsim simulates all but nccl; mpi_impl runs all but
# hierarchical and dataparallel (they need several nodes or one process per node).
ALGORITHMS = {
    "ring": "reduce-scatter, then all-gather, round a ring: 2(p-1) steps of m/p bytes",
    "recursive-doubling": "log2 p steps; in each, swap the whole vector with a partner and add",
    "halving-doubling": "Rabenseifner: recursive-halving reduce-scatter, then recursive-doubling "
                        "all-gather: 2 log2 p steps, 2(p-1)/p m bytes, as the ring",
    "ps": "parameter server: every rank sends its gradient to one place, which sums and sends back",
    "sharded-ps": "every rank is the parameter server of 1/p of the gradient",
    "hierarchical": "ring inside every node, ring across nodes, ring inside again",
    "dataparallel": "PyTorch DataParallel: one process drives a node's GPUs and reduces into GPU 0",
    "mpi": "MPI's own MPI_Allreduce: the library picks an algorithm by message size",
    "nccl": "NCCL's all-reduce, run by the GPUs",
    "double-tree": "NCCL's tree: reduce-scatter inside nodes, two binary trees across nodes, all-gather",
    "torus2d": "2D torus (Sony 2018): reduce-scatter along rows, all-reduce down columns, all-gather",
    "byteps": "BytePS push-pull: node reduce, push shards to CPU servers that sum, pull, node gather",
    "nvls": "NVLink SHARP: the NVSwitch adds the gradients (multimem load-reduce and store)",
}

# Sharded data parallelism: strategies in both halves (dpsim's sync.strategy, mpi_impl.train's
# --sync), each built on reduce-scatter and all-gather (Rajbhandari et al., "ZeRO", SC 2020;
# Zhao et al., "PyTorch FSDP", VLDB 2023).
SHARDED = {
    "zero1": "ZeRO stage 1: optimizer state sharded; reduce-scatter gradients, update one shard, "
             "all-gather parameters",
    "zero2": "ZeRO stage 2: gradients sharded too (each rank keeps only its shard of the reduced gradient)",
    "zero3": "ZeRO stage 3 / FSDP: parameters sharded too; gathered layer by layer in forward and "
             "again in backward, freed after use",
}

# Gradient compression: dpsim's sync.compression, mpi_impl.train's --compress.
COMPRESSIONS = {
    "none": "full-precision gradients",
    "1bit": "1-bit SGD with error feedback (Seide et al., Interspeech 2014), its own exchange",
    "fp16": "gradients sent as 16-bit floats",
    "powersgd": "PowerSGD (Vogels et al., NeurIPS 2019): rank-r factors P and Q of each matrix "
                "all-reduced, with error feedback (sync.powersgd_rank, --powersgd-rank)",
    "topk": "top-k sparsification: the k largest-magnitude values and their indices all-gathered, "
            "with error feedback (sync.topk_ratio, --topk-ratio)",
}

# Names that meant something else before, and the one-line hint a user gets for them.
RENAMED = {
    "tree": "'tree' is gone, since neither algorithm it named is a tree: dpsim's 'tree' is now "
            "'recursive-doubling', mpi_impl's 'tree' (Rabenseifner) is now 'halving-doubling'",
}


def unknown_algorithm(name, allowed) -> str:
    """The message for an algorithm name that is not allowed here."""
    if name in RENAMED:
        return RENAMED[name]
    return f"unknown algorithm {name!r}; choose one of: {', '.join(allowed)}"


# ------------------------------------------------------------------ where an iteration's time goes
# The parts of one iteration on the critical path, in the order plots stack them. They add up
# to the iteration time, in the simulator's Result and in mpi_impl.train's --json alike.
BREAKDOWN = ("compute", "data_wait", "exposed_comm", "compression", "straggler_wait", "update")

MEANING = {
    "compute": "forward and backward of the average rank",
    "data_wait": "waiting for the next batch (the input pipeline and the host-to-device copy)",
    "exposed_comm": "waiting for the gradient sync after backward: the part of it not hidden behind backward",
    "compression": "encode/decode of compressed gradients on the critical path (the rest of the wait is exposed_comm)",
    "straggler_wait": "how much longer the slowest rank computed than the average one",
    "update": "the optimizer step",
}

# A measured iteration also has time outside every part (Python between the steps, the
# division of the sum by p): mpi_impl reports it as OTHER; the simulator has none.
OTHER = "other"

COLOURS = {"compute": "#4c72b0", "data_wait": "#dd8452", "exposed_comm": "#c44e52",
           "compression": "#8172b3", "straggler_wait": "#937860", "update": "#55a868", OTHER: "#bbbbbb"}


def split_sync_wait(wait_s: float, codec_s: float) -> tuple[float, float]:
    """(exposed_comm, compression) of a wait for the sync during which codec_s seconds of
    encode/decode ran: the codec counts as compression up to the whole wait (the rest of
    the codec hid behind backward). Both halves split their waits this way."""
    compression = min(wait_s, codec_s)
    return wait_s - compression, compression


# ------------------------------------------------------------------ 1-bit SGD's exchange
# Both halves run CNTK's exchange for 1-bit SGD (quantise, all-to-all of stripes, decode and sum,
# re-quantise, all-gather, decode), whatever sync.strategy / --sync names: notes and tables say so
# in these words.
ONEBIT_OWN_EXCHANGE = "1-bit SGD has its own exchange"
ONEBIT_EXCHANGE_STEPS = "all-to-all, then all-gather"

# ------------------------------------------------------------------ 1-bit SGD's wire format
# One sign bit per value, plus one FP32 scale per block of ONEBIT_BLOCK values (Seide et al.,
# Interspeech 2014, keep a scale per column; a fixed block is the common choice for flat buffers).
ONEBIT_BLOCK = 256

# Pipeline segment of the receive-and-add steps (ring, halving-doubling, sharded-ps):
# mpi_impl's default (mpi_impl/wire.py; `mpiexec -n 2 python -m mpi_impl.bench --segment
# 64K,256K,1M,4M` compares sizes), and what course.compare.scenario_for writes as
# sync.segment_mib so that dpsim models the steps mpi_impl runs. A segment of 0 is the
# textbook step (the whole message, then the whole addition) in both halves: dpsim's default.
SEGMENT_BYTES = MIB
