"""The all-reduce algorithm NCCL's own tuning model picks: ring or tree, for one message.

NCCL times every (algorithm, protocol) pair with a latency + bytes / bandwidth model and runs
the fastest (src/graph/tuning.cc, ncclTopoTuneModel, github.com/NVIDIA/nccl @5067397). This
module keeps that model's Simple protocol (the one large messages run) for its two all-reduce
algorithms that dpsim has, ring and tree (dpsim's double-tree), with NCCL's constants:

  bandwidth   NCCL's graph search gives each algorithm a per-node bandwidth, summed over its
              channels (src/graph/search.cc). A ring's is what the node's NICs carry (its
              intra-node speed is searched equal to its inter-node one); on one node, the GPU's
              own link. A tree's inter-node speed is the NICs' too, and on 2 nodes the search
              then raises its intra-node speed up to twice that ("increase bwIntra for trees
              (2 nodes or collnet)"), and tuning.cc counts 2-node trees at that intra-node
              speed. Algorithm bandwidth from the bus bandwidth B:
                ring   B x n / (2(n - 1))           (n ranks; 2(n-1) steps of 1/n of the bytes)
                tree   min(0.92 B, channels x per-channel cap) x 1/2; the cap is not modelled
                       (dpsim has no channel count), so a tree here is never slower than NCCL's.
  latency     base 8.4 us (Simple, ring and tree) + per hop: ring 2(n-1) steps, of which
              2(nodes-1) cross the network at 14 us and the others cost the intra-node hop
              (NVLink 3.4 / PCIe 5.7 us, at least 3 x 1 us of network post overhead on >1 node);
              tree 2 x ((ranks per node - 1) x intra hop (NVLink 4.0 / PCIe 4.0 us)
              + log2(nodes) x 14 us).

What follows, for a large message: on one node, and beyond 2 nodes, a ring (0.92/2 < n/(2(n-1)));
on exactly 2 nodes with more than one GPU each, a tree wherever the GPUs' link is faster than
about 1.16 x the NICs (0.5 n/(n-1) / 0.46 on 16 ranks), as on NVLink nodes with few NICs.
A tree with one GPU per node is the ring itself: ring. NCCL 2.4's older rule agrees on 2 nodes:
it counts an NVLink node's tree at 3/4 x 2 = 1.5 x the ring's bandwidth there and so runs the
tree at every size (src/init.cc ncclTreeThreshold, NVIDIA/nccl tag v2.4.7-1).
"""
import math

BASE_US = 8.4                       # tuning.cc baseLatencies, Simple, ring and tree
NET_HOP_US = 14.0                   # hwLatencies[NET], Simple, ring and tree
INTRA_HOP_US = {"ring": {"nvlink": 3.4, "pcie": 5.7}, "tree": {"nvlink": 4.0, "pcie": 4.0}}
NET_POST_US = 1.0                   # getNetOverhead on Intel x86, x3 for Simple
TREE_BUS_FACTOR = 0.92              # busBw x .92 for tree all-reduce


def bus_gbs(algorithm: str, nodes: int, intra_gbs: float, nics_gbs: float) -> float:
    """NCCL's per-node bus bandwidth of an algorithm's graph (GB/s), as described above:
    intra_gbs is one GPU's link inside the node, nics_gbs all the node's NICs together."""
    if nodes == 1:
        return intra_gbs
    if algorithm == "tree" and nodes == 2:
        return min(intra_gbs, 2 * nics_gbs)
    return min(intra_gbs, nics_gbs)


def time_us(algorithm: str, nbytes: float, nodes: int, per_node: int, intra_gbs: float, nics_gbs: float,
            intra_kind: str = "nvlink") -> float:
    """NCCL's modelled time (us) of one all-reduce of nbytes by "ring" or "tree"."""
    n = nodes * per_node
    bus = bus_gbs(algorithm, nodes, intra_gbs, nics_gbs)
    hop = INTRA_HOP_US[algorithm][intra_kind]
    if algorithm == "ring":
        algbw = bus * n / (2 * (n - 1))
        hop = max(hop, 3 * NET_POST_US) if nodes > 1 else hop
        inter_steps = 2 * (nodes - 1)
        latency = BASE_US + (2 * (n - 1) - inter_steps) * hop + inter_steps * NET_HOP_US
    else:
        algbw = TREE_BUS_FACTOR * bus / 2
        latency = BASE_US + 2 * ((per_node - 1) * hop + int(math.log2(nodes)) * NET_HOP_US)
    return latency + nbytes / (1e3 * algbw)


def pick(nbytes: float, nodes: int, per_node: int, intra_gbs: float, nics_gbs: float,
         intra_kind: str = "nvlink") -> str:
    """"ring" or "tree": the one NCCL's model times faster (ties to the ring). With one GPU
    per node a tree is the ring, and one rank has nothing to reduce: ring."""
    if per_node == 1 or nodes * per_node < 2:
        return "ring"
    times = {a: time_us(a, nbytes, nodes, per_node, intra_gbs, nics_gbs, intra_kind) for a in ("ring", "tree")}
    return "tree" if times["tree"] < times["ring"] else "ring"
