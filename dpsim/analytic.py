"""Closed forms: alpha-beta-gamma costs of every strategy, and the max(t1, t2) rule.

alpha: latency of one message (s); beta: seconds per byte on a link (1 / bandwidth);
gamma: seconds per byte reduced (3 / memory bandwidth: read two arrays, write one).
m is the gradient in bytes, n the number of GPUs. Sources: Thakur, Rabenseifner & Gropp,
IJHPCA 2005 (ring, recursive doubling, halving-doubling); Rabenseifner, ICCS 2004
(halving-doubling); Patarasuk & Yuan 2009 (ring); d2l.ai, "Parameter
Servers" (parameter server, sharding) and "Hardware" (t1, t2).

These assume that nothing contends beyond what each formula says (the parameter server's
link is shared by design). The event simulation in dpsim.engine must agree with them where
that holds, and tests/test_analytic.py holds it to 1%.
"""
import math

from . import sharing
from .machine import pipelined          # a receive-and-add step, as the machine charges it
from .strategies.dataparallel import segments
from .strategies.mpi import choice


def ring(n, m, alpha, beta, gamma=0.0, segment=0):
    """Reduce-scatter + all-gather: 2(n-1) steps of m/n bytes (the textbook steps:
    2(n-1) alpha + 2(n-1)/n m beta + (n-1)/n m gamma); `segment` pipelines the reduce-scatter.
    NCCL's C channels (Cluster.rings) are C rings of m/C each at once: ring(n, m / C, ...) with
    beta the slowest hop's as one ring sees it (a NIC or NVLink of its own: the link's)."""
    c = m / n
    return (n - 1) * (pipelined(alpha + c * beta, c * gamma, c, segment) + alpha + c * beta)


def ps(n, m, alpha, beta, gamma=0.0):
    """Parameter server on GPU 0: n-1 gradients in through one link, n-1 copies out."""
    return 2 * alpha + 2 * (n - 1) * m * beta + (n - 1) * m * gamma


def ps_cpu(n, m, alpha, beta_flow, gamma_host):
    """Parameter server on the host CPU: every GPU sends and receives m at its own rate
    1/beta_flow (the PCIe uplink shared by the GPUs under one switch), the CPU adds n arrays."""
    return 2 * alpha + 2 * m * beta_flow + (n - 1) * m * gamma_host


def sharded_ps(n, m, alpha, beta, gamma=0.0, segment=0):
    """Each GPU serves m/n: n-1 shards out and in over each GPU's link, twice
    (2 alpha + 2(n-1)/n m beta + (n-1)/n m gamma unpipelined)."""
    out = alpha + (n - 1) / n * m * beta
    return pipelined(out, (n - 1) / n * m * gamma, m / n, segment) + out


def _fold(n, m, alpha, beta, gamma):
    """(p, cost of folding ranks beyond the largest power of two p <= n in and back out)."""
    p = 1 << (n.bit_length() - 1)
    return p, (2 * (alpha + m * beta) + m * gamma if n > p else 0.0)


def recursive_doubling(n, m, alpha, beta, gamma=0.0):
    """log2 p swaps of the whole vector, with the fold and unfold when n is not a power of two."""
    p, fold = _fold(n, m, alpha, beta, gamma)
    return math.log2(p) * (alpha + m * beta + m * gamma) + fold


def halving_doubling(n, m, alpha, beta, gamma=0.0, segment=0):
    """Rabenseifner: recursive-halving reduce-scatter + recursive-doubling all-gather over the
    largest power of two p <= n: the ring's bytes in 2 log2 p steps (plus the fold); unpipelined
    2 log2(p) alpha + 2(p-1)/p m beta + (p-1)/p m gamma.  `segment` pipelines the halving."""
    p, fold = _fold(n, m, alpha, beta, gamma)
    parts = [m / 2 ** (k + 1) for k in range(p.bit_length() - 1)]       # m/2, m/4, ..., m/p
    halving = sum(pipelined(alpha + x * beta, x * gamma, x, segment) for x in parts)
    return halving + sum(alpha + x * beta for x in parts) + fold


def mpi(n, m, alpha, beta, gamma=0.0):
    """MPI_Allreduce as MPICH 5 picks it (dpsim/strategies/mpi.py): recursive doubling for at
    most 8 bytes or fewer FP32 values than p, else halving-doubling."""
    formula = recursive_doubling if choice(n, m) == "recursive-doubling" else halving_doubling
    return formula(n, m, alpha, beta, gamma)


def hierarchical(nodes, g, m, alpha_intra, beta_intra, alpha_inter, beta_inter, gamma=0.0, nics=1):
    """Ring inside nodes (g GPUs), ring of m/g across nodes (g rings sharing the node's `nics`
    NICs), ring inside again. beta_inter is one NIC's: each ring gets nics/g of one."""
    inside = 2 * (g - 1) * alpha_intra + 2 * (g - 1) / g * m * beta_intra + (g - 1) / g * m * gamma
    across = 2 * (nodes - 1) * alpha_inter + 2 * (nodes - 1) / nodes * m / nics * beta_inter \
        + (nodes - 1) / nodes * (m / g) * gamma
    return inside + across


def chain(n, m, alpha, beta, gamma=0.0):
    """NCCL-style pipelined chain broadcast (gamma = 0) or reduce over n GPUs in S segments."""
    s = segments(m)
    return (s + n - 2) * (alpha + m / s * beta + m / s * gamma)


def shared_ring(n, m, alpha, beta, gamma, devices, timeslice_s=0.0, busy_poll=False, shared_memory=False):
    """The ring on n ranks sharing `devices` devices (dpsim.sharing): reductions (and, for
    shared-memory messages, copies) at the slowest rank's share of a device; with busy-polling
    ranks every message also waits (1 - 1/k) x timeslice / 2 for its receiver to be scheduled,
    k the ranks on the most crowded device."""
    share = sharing.ranks_per_device(n, devices)
    wait = sharing.wakeup_s(n, devices, timeslice_s) if busy_poll else 0.0
    return ring(n, m, alpha + wait, beta * (share if shared_memory else 1.0), gamma * share)


def compute_time(flops_per_sample, batch, peak_tflops, efficiency):
    """t1: time to compute the gradients of `batch` samples."""
    return flops_per_sample * batch / (peak_tflops * 1e12 * efficiency)


def transfer_time(nbytes, bandwidth_gbs):
    """t2: time to move the parameters once over a link."""
    return nbytes / (bandwidth_gbs * 1e9)


def iteration_time(t1, t2, overlap=True):
    """A batch takes about max(t1, t2) when communication overlaps computation, t1 + t2 if not."""
    return max(t1, t2) if overlap else t1 + t2


# ------------------------------------------------------------------ sharded data parallelism (ZeRO)
# The ring's two halves on their own (strategies/zero1.py, zero3.py), and whole iterations with
# overlap off, where nothing contends: compute and communication take turns.

def reduce_scatter(n, m, alpha, beta, gamma=0.0, segment=0):
    """The ring's first half: n-1 steps of m/n bytes, each added: (n-1)(alpha + m/n beta + m/n gamma)."""
    c = m / n
    return (n - 1) * pipelined(alpha + c * beta, c * gamma, c, segment)


def all_gather(n, m, alpha, beta):
    """The ring's second half: n-1 steps of m/n bytes: (n-1)(alpha + m/n beta)."""
    return (n - 1) * (alpha + m / n * beta)


def sharded_bytes_per_gpu(n, m, stage):
    """Bytes each GPU sends per iteration: stages 1 and 2 an all-reduce's 2(n-1)/n m, stage 3
    one more all-gather, 3(n-1)/n m (ZeRO, section 7.2)."""
    return (3 if stage == 3 else 2) * (n - 1) / n * m


def zero12_iteration(n, buckets, alpha, beta, gamma, forward_s, backward_s, update_s):
    """ZeRO-1/2 with overlap off: every bucket all-gathered before forward, forward and
    backward, every bucket reduce-scattered, then 1/n of the update."""
    return (sum(all_gather(n, b, alpha, beta) for b in buckets) + forward_s + backward_s
            + sum(reduce_scatter(n, b, alpha, beta, gamma) for b in buckets) + update_s / n)


def zero3_iteration(n, units, alpha, beta, gamma, update_s):
    """ZeRO-3 with overlap off; units: (bytes, forward s, backward s) of each: each unit gathered
    then computed in forward, gathered again and computed in backward, then every unit's
    gradient reduce-scattered, then 1/n of the update."""
    gathered = sum(2 * all_gather(n, b, alpha, beta) + f + bw for b, f, bw in units)
    return gathered + sum(reduce_scatter(n, b, alpha, beta, gamma) for b, _, _ in units) + update_s / n


# ------------------------------------------------------------------ PowerSGD and top-k
def powersgd_wire(matrices, plain_values, rank):
    """(P bytes, Q bytes, uncompressed bytes) one bucket all-reduces; matrices (n, m) all
    compressed at r' = min(rank, n, m)."""
    rs = [(n, m, min(rank, n, m)) for n, m in matrices]
    return 4 * sum(n * r for n, _, r in rs), 4 * sum(m * r for _, m, r in rs), 4 * plain_values


def powersgd_codec(matrices, plain_values, rank, launch_s, bytes_per_s, flops_per_s, products=3):
    """Seconds of PowerSGD's kernels on one bucket: the error feedback and the new error (12
    bytes per value each), three products of 2 n m r' FLOPs reading 4(n m + n r' + m r') bytes
    (the longer of the two; four with the error from this GPU's own approximation,
    sync.powersgd_error = "local"), Gram-Schmidt's 2 n r'^2 FLOPs on 8 n r' bytes; a launch per
    matrix and step, one for each pass over the bucket."""
    rs = [(n, m, min(rank, n, m)) for n, m in matrices]
    values = plain_values + sum(n * m for n, m in matrices)
    roof = lambda nbytes, flops: max(nbytes / bytes_per_s, flops / flops_per_s)
    product = roof(4 * sum(n * m + n * r + m * r for n, m, r in rs), 2 * sum(n * m * r for n, m, r in rs))
    gram = roof(8 * sum(n * r for n, _, r in rs), 2 * sum(n * r * r for n, _, r in rs))
    launches = 2 + (products + 1) * len(rs)
    return launches * launch_s + 2 * 12 * values / bytes_per_s + products * product + gram


def topk_bytes_per_gpu(n, values, ratio):
    """Bytes each GPU sends for one bucket: the k = ceil(ratio values) values and int32 indices of
    each of the other n-1 GPUs' passed on round the ring, (n-1) 8 k."""
    return (n - 1) * 8 * math.ceil(ratio * values)


def topk(n, values, ratio, alpha, beta, launch_s, bytes_per_s):
    """One bucket: the all-gather, (n-1)(alpha + 8 k beta), and the kernels (strategies/topk.py):
    (12 + 8 + 8 + 4) values + 8 k + 16 n k bytes, n + 5 launches."""
    k = math.ceil(ratio * values)
    codec = (n + 5) * launch_s + (32 * values + 8 * k + 16 * n * k) / bytes_per_s
    return (n - 1) * (alpha + 8 * k * beta) + codec
