"""Hardware presets: GPUs and links, every figure with its source.

A GPU is described by its peak dense arithmetic rate and its memory bandwidth; a link by its
bandwidth per direction and its latency. All links are full duplex: the figure is what one
direction carries (a "900 GB/s NVLink" in marketing is 450 GB/s each way). These are nominal
(line) rates; the simulator moves bytes at the achievable rate, nominal x the kind's EFFICIENCY
below (or the link's own `efficiency`).

Units: TFLOP/s = 1e12 FLOP/s, GB/s = 1e9 bytes/s, latency in microseconds.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str
    fp32_tflops: float      # peak dense FP32, per GPU (not per board)
    fp16_tflops: float      # peak dense FP16/BF16 (tensor cores where the GPU has them)
    mem_bw_gbs: float       # memory bandwidth, per GPU
    source: str
    memory_gb: float = 0.0  # memory per GPU (GB = 1e9 bytes); 0 = not given: no fit check (dpsim.memory)
    memory_source: str = ""


@dataclass(frozen=True)
class Link:
    name: str
    kind: str               # one of LINK_KINDS
    bandwidth_gbs: float    # per direction, nominal (all of a GPU's links together for NVLink)
    latency_us: float       # one way, small message, per hop
    source: str
    links: int = 0          # NVLink: links per GPU, which dpsim.nvlink lays out between pairs
    efficiency: float = 0.0  # achievable / nominal; 0 = its kind's (EFFICIENCY)

    def links_per_gpu(self, gpus_per_node: int) -> int:
        """NVLink links per GPU: the preset's count; without one, a link to every peer (each at
        bandwidth / (GPUs - 1), a full mesh)."""
        return self.links or gpus_per_node - 1

    @property
    def achievable_gbs(self) -> float:
        """What a long transfer reaches: nominal x efficiency (the link's own or its kind's)."""
        return self.bandwidth_gbs * (self.efficiency or EFFICIENCY[self.kind][0])


LINK_KINDS = ("pcie", "nvlink", "nvswitch", "ethernet", "roce", "infiniband", "efa", "socket")

# Achievable bandwidth / nominal, per link kind: what a long transfer between two endpoints
# reaches, measured by a primitive test (a copy, a ping-pong), never by an all-reduce.
EFFICIENCY = {
    # Host<->GPU copies (CUDA bandwidthTest, pinned) reach "roughly 12 GB/s" on PCIe 3.0 x16
    # (NVIDIA CUDA C++ Best Practices Guide, section "Pinned Memory"): 0.76 of 15.75; GPU to GPU
    # copies reach 26.3 of 31.5 on PCIe 4.0 (nvbandwidth, github.com/NVIDIA/nvbandwidth/issues/50)
    # and 52.8 of 63 on PCIe 5.0 (device to host, github.com/NVIDIA/nvbandwidth/issues/24):
    # 0.76-0.84. NCCL's own topology model takes 12/24/48 GB/s (src/graph/topo.cc).
    "pcie": (0.80, "bandwidthTest/nvbandwidth copies: 0.76-0.84 of PCIe 3.0-5.0 x16 line rate"),
    # NCCL's topology model counts a 25 GB/s NVLink (V100, A100) at 20 GB/s
    # (github.com/NVIDIA/nccl, src/graph/topo.h); a copy-engine p2p test on H100 reaches 371-377 of
    # 450 GB/s one way (p2pBandwidthLatencyTest, github.com/NVIDIA/nccl/issues/1264), 0.83, and
    # NCCL's kernels move smaller packets than the copy engines do.
    "nvlink": (0.80, "NCCL's link model (src/graph/topo.h): 20 of 25 GB/s per NVLink"),
    "nvswitch": (0.80, "NVLink through NVSwitch: NCCL's 20 of 25 GB/s per NVLink (src/graph/topo.h)"),
    # TCP/IP over Ethernet, 1500-byte MTU: 1448 payload bytes (1500 - 20 IP - 20 TCP - 12 TCP
    # timestamps) per 1538 bytes on the wire (+ 14 header, 4 FCS, 8 preamble, 12 gap; IEEE 802.3,
    # RFC 791, 793, 7323): 0.94, the most a socket can carry; stacks often reach less.
    "ethernet": (0.94, "TCP/IP framing on a 1500-byte MTU: 1448 of 1538 bytes on the wire"),
    # NVIDIA's multi-node acceptance scripts pass an RDMA (perftest) or TCP link at >= 90% of line
    # rate (github.com/Mellanox/ngc_multinode_perf): a floor, not a measurement.
    "roce": (0.90, "NVIDIA ngc_multinode_perf: RDMA links pass at >= 90% of line rate"),
    # "24 GB/s per 200G NIC (12 GB/s for 100G NICs)", NCCL's maintainer on what IB reaches
    # (github.com/NVIDIA/nccl-tests/issues/119); ib_write_bw on 100G: 11,728 MB/s
    # (github.com/linux-rdma/perftest/issues/225).
    "infiniband": (0.96, "NCCL maintainer: 24 of 25 GB/s per HDR NIC, 12 of 12.5 per EDR"),
    # AWS Elastic Fabric Adapter (SRD through libfabric), one 100 Gb/s EFA per p3dn node: NCCL's
    # ring forced (NCCL_TREE_THRESHOLD=0) on 2 nodes x 8 GPUs ran a 1 GiB all-reduce in 268 ms,
    # "60Gbps" of bus bandwidth (github.com/NVIDIA/nccl-tests/issues/22, yaroslavvb 2019-06-17):
    # 2(16-1)/16 x 2^30 B / 0.268 s = 7.5 GB/s, 0.60 of 12.5. A ring with one NIC per node puts
    # every byte through that NIC, so its bus bandwidth is the NIC's rate; the tree's 2-node
    # figures (125 Gb/s in the same thread, 80 Gb/s in NVIDIA/nccl#235) exceed what the NIC
    # carries (NCCL's maintainer, same thread) and are not a transport's rate.
    "efa": (0.60, "NCCL ring over one p3dn EFA, 2 nodes: 60 of 100 Gb/s (NVIDIA/nccl-tests#22)"),
    # A socket link's preset is already a measured copy rate (cross-socket-pcie3 below).
    "socket": (1.0, "the preset is a measured copy rate across the sockets"),
}

# ------------------------------------------------------------------ memory per GPU (dpsim.memory)
# GB = 1e9 bytes, as the datasheets count HBM/GDDR capacity. The V100 comes with 16 or 32 GB:
# the 32 GB model is taken (give cluster.gpu = {..., memory_gb = 16} for the other).
MEMORY = {
    "k80": dict(memory_gb=12.0, memory_source="NVIDIA Tesla K80 datasheet: 24 GB GDDR5 per board, 12 GB per GK210"),
    "p100": dict(memory_gb=16.0, memory_source="NVIDIA Tesla P100 datasheet (SXM2): 16 GB CoWoS HBM2"),
    "v100": dict(memory_gb=32.0, memory_source="NVIDIA Tesla V100 datasheet (SXM2): 32 GB HBM2 (16 GB model too)"),
    "a100": dict(memory_gb=80.0, memory_source="NVIDIA A100 Tensor Core GPU datasheet: SXM4 80 GB HBM2e"),
    "h100": dict(memory_gb=80.0, memory_source="NVIDIA H100 Tensor Core GPU datasheet: SXM5 80 GB HBM3"),
    "h200": dict(memory_gb=141.0, memory_source="NVIDIA H200 Tensor Core GPU datasheet: SXM 141 GB HBM3e"),
    # --- the presets of issue 27
    "k20x": dict(memory_gb=6.0, memory_source="Microway K20X spec list; AnandTech Tesla table: 6 GB GDDR5"),
    "p40": dict(memory_gb=24.0, memory_source="NVIDIA P40 spec via omegaco.ae: 24 GB GDDR5"),
    "a800": dict(memory_gb=80.0, memory_source="huggingface.co/hardware/a800 (secondhand): 80 GB HBM2e"),
    "h100-pcie": dict(memory_gb=80.0, memory_source="NVIDIA H100 PCIe table (HPC Tech mirror): 80 GB HBM2e"),
    "rtx5090": dict(memory_gb=32.0, memory_source="Linux Format May 2025 RTX 5090 review: 32 GB GDDR7"),
}

GPUS = {g.name: g for g in [
    # The K80 board carries two GK210 GPUs; figures are per GPU = half the board.
    # Board: 8.73 TFLOP/s FP32 with GPU Boost, 480 GB/s (NVIDIA Tesla K80 datasheet, 2014).
    # GK210 has no fast FP16 path, so FP16 runs at the FP32 rate.
    GPU("k80", 8.73 / 2, 8.73 / 2, 480 / 2, "NVIDIA Tesla K80 datasheet (per board 8.73 TFLOP/s boost, 480 GB/s; halved per GK210)",
        **MEMORY["k80"]),
    # P100 SXM2: 10.6 FP32, 21.2 FP16, 732 GB/s HBM2 (NVIDIA Tesla P100 datasheet, 2016).
    GPU("p100", 10.6, 21.2, 732, "NVIDIA Tesla P100 datasheet (SXM2)", **MEMORY["p100"]),
    # V100 SXM2: 15.7 FP32, 125 tensor FP16, 900 GB/s HBM2 (NVIDIA Tesla V100 datasheet, 2017).
    GPU("v100", 15.7, 125, 900, "NVIDIA Tesla V100 datasheet (SXM2)", **MEMORY["v100"]),
    # A100 SXM4 80GB: 19.5 FP32, 312 BF16/FP16 tensor dense, 2039 GB/s (NVIDIA A100 datasheet).
    GPU("a100", 19.5, 312, 2039, "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB, dense)", **MEMORY["a100"]),
    # H100 SXM5: 67 FP32, 989.5 BF16 tensor dense (1979 with sparsity), 3.35 TB/s (NVIDIA H100 datasheet).
    GPU("h100", 67, 989.5, 3350, "NVIDIA H100 Tensor Core GPU datasheet (SXM5, dense)", **MEMORY["h100"]),
    # H200 SXM: same compute as H100 SXM, 4.8 TB/s HBM3e (NVIDIA H200 datasheet).
    GPU("h200", 67, 989.5, 4800, "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense)", **MEMORY["h200"]),
    # --- presets for the published cases of issue 27 (sources: figures read from the pages named)
    # K20X: 3.95 TFLOP/s FP32, 250 GB/s, 6 GB (Microway "Tesla K20 GPU Accelerator Up Close" spec
    # list; AnandTech show/8729 Tesla table). GK110 has no fast FP16: FP16 at the FP32 rate.
    GPU("k20x", 3.95, 3.95, 250, "Microway K20/K20X spec list; AnandTech Tesla table (3.95 SP, 250 GB/s)", **MEMORY["k20x"]),
    # P40: 3840 cores x 2 x 1.531 GHz = 11.76 TFLOP/s FP32, 346 GB/s (reseller page quoting NVIDIA,
    # omegaco.ae; sysrqmts.com/gpuark.com spec pages). GP102's FP16 is 1:64: FP16 training runs at
    # the FP32 rate, so fp16_tflops = fp32_tflops.
    GPU("p40", 11.76, 11.76, 346, "NVIDIA P40 spec via omegaco.ae (346 GB/s); 3840 x 2 x 1.531 GHz = 11.76", **MEMORY["p40"]),
    # A800 SXM4 80GB: an A100 with NVLink cut to 400 GB/s bidirectional; compute and HBM unchanged
    # (tweakers.net news 203182 citing Reuters; aiwiki.ai nvidia_a800; hmc-tech.com spec page).
    GPU("a800", 19.5, 312, 2039, "A100 figures (NVIDIA A100 datasheet); A800 = A100 with reduced NVLink (press)", **MEMORY["a800"]),
    # H100 PCIe: 51 FP32, 1513 FP16 tensor with sparsity -> 756 dense, 2000 GB/s (NVIDIA table on
    # archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html; NVIDIA product brief PB-11133-001).
    GPU("h100-pcie", 51, 756, 2000, "NVIDIA H100 PCIe table (HPC Tech mirror), product brief PB-11133-001", **MEMORY["h100-pcie"]),
    # RTX 5090: 21,760 cores x 2 x 2.407 GHz = 104.8 FP32, 1792 GB/s (Linux Format May 2025 review;
    # Spheron datasheet table). FP16 tensor 838 sparse FP16-accumulate -> 419 dense -> 209.5 with
    # FP32 accumulate (GeForce half rate, inferred from the RTX 4090's published rates).
    GPU("rtx5090", 104.8, 209.5, 1792, "Linux Format May 2025 RTX 5090 review; Spheron spec table", **MEMORY["rtx5090"]),
]}

# Streaming multiprocessors per GPU: what an NCCL channel's block takes from compute
# (dpsim.contention). K80 GK210: 13 SMX; P100: 56 SMs; V100: 80; A100: 108; H100 SXM: 132;
# H200: 132 (NVIDIA architecture whitepapers: Kepler GK210, Pascal GP100, Volta GV100, Ampere
# GA100, Hopper GH100); K20X 14 SMX (2688 / 192 cores); P40 30; A800 108; H100 PCIe 114;
# RTX 5090 170 (presets' sources above).
SM_COUNT = {"k80": 13, "p100": 56, "v100": 80, "a100": 108, "h100": 132, "h200": 132,
            "k20x": 14, "p40": 30, "a800": 108, "h100-pcie": 114, "rtx5090": 170}

# PCIe: per-lane rate x 16 lanes x line-code efficiency (PCI-SIG base specifications):
#   3.0: 8 GT/s, 128b/130b -> 15.75 GB/s; 4.0: 16 GT/s -> 31.5 GB/s; 5.0: 32 GT/s -> 63 GB/s.
# PCIe hop latency ~1 us: a switch traversal plus DMA setup, the order reported for GPU
# peer-to-peer copies (Li et al., "Evaluating Modern GPU Interconnect", IEEE TPDS 2020).
# NVLink per GPU, all links together, one direction (NVIDIA NVLink product pages and the
# P100/V100/A100/H100 architecture whitepapers):
#   1 (P100): 4 links x 20 GB/s = 80;   2 (V100): 6 x 25 = 150;
#   3 (A100): 12 x 25 = 300;            4 (H100): 18 x 25 = 450.
# NVLink latency ~1 us per hop (Li et al. 2020 measure a few microseconds end to end).
# Ethernet: line rate / 8. Latency ~ 25 us one way through a kernel TCP stack, the order that
# MPI ping-pong over TCP reports on 10-100 GbE (e.g. OSU latency figures); RoCE would be lower.
# InfiniBand: EDR 100 Gb/s, HDR 200 Gb/s, NDR 400 Gb/s per port (InfiniBand Trade Association
# roadmap); ~1 us one way including the switch (Mellanox/NVIDIA ConnectX-5/6/7 datasheets quote
# 0.6 us adapter latency).
LINKS = {l.name: l for l in [
    Link("pcie3", "pcie", 15.75, 1.0, "PCI-SIG PCIe 3.0 x16: 8 GT/s x 16 lanes, 128b/130b"),
    Link("pcie4", "pcie", 31.5, 1.0, "PCI-SIG PCIe 4.0 x16: 16 GT/s x 16 lanes, 128b/130b"),
    Link("pcie5", "pcie", 63.0, 1.0, "PCI-SIG PCIe 5.0 x16: 32 GT/s x 16 lanes, 128b/130b"),
    Link("nvlink1", "nvlink", 80.0, 1.0, "NVIDIA P100 whitepaper: 4 NVLink 1.0 links x 20 GB/s per direction", links=4),
    Link("nvlink2", "nvlink", 150.0, 1.0, "NVIDIA V100 whitepaper: 6 NVLink 2.0 links x 25 GB/s per direction", links=6),
    Link("nvlink3", "nvlink", 300.0, 1.0, "NVIDIA A100 whitepaper: 12 NVLink 3.0 links x 25 GB/s per direction", links=12),
    Link("nvlink4", "nvlink", 450.0, 1.0, "NVIDIA H100 whitepaper: 18 NVLink 4.0 links x 25 GB/s per direction", links=18),
    # NVSwitch gives every GPU its full NVLink bandwidth to every other GPU at once.
    Link("nvswitch1", "nvswitch", 150.0, 1.0, "NVIDIA DGX-2 (NVSwitch gen 1): 6 NVLink 2.0 links x 25 GB/s per V100"),
    Link("nvswitch", "nvswitch", 300.0, 1.0, "NVIDIA DGX A100 (NVSwitch gen 2): 600 GB/s bidirectional per GPU"),
    Link("nvswitch3", "nvswitch", 450.0, 1.0, "NVIDIA DGX H100 (NVSwitch gen 3): 900 GB/s bidirectional per GPU"),
    Link("1gbe", "ethernet", 0.125, 25.0, "IEEE 802.3 1 Gb/s line rate; TCP latency order from OSU MPI benchmarks"),
    Link("10gbe", "ethernet", 1.25, 25.0, "IEEE 802.3 10 Gb/s line rate; TCP latency order from OSU MPI benchmarks"),
    Link("25gbe", "ethernet", 3.125, 25.0, "IEEE 802.3 25 Gb/s line rate; TCP latency order from OSU MPI benchmarks"),
    Link("100gbe", "ethernet", 12.5, 25.0, "IEEE 802.3 100 Gb/s line rate; TCP latency order from OSU MPI benchmarks"),
    Link("400gbe", "ethernet", 50.0, 25.0, "IEEE 802.3 400 Gb/s line rate; TCP latency order from OSU MPI benchmarks"),
    # RoCE (RDMA over Converged Ethernet): Ethernet line rate, RDMA latency; a ConnectX-5 RoCEv2
    # round trip under 2 us (NVIDIA developer forum, "ConnectX-5 RoCE UC receive latency anomaly").
    Link("roce-25", "roce", 3.125, 1.0, "IEEE 802.3 25 Gb/s line rate; RoCEv2 round trip < 2 us (ConnectX-5)"),
    Link("roce-100", "roce", 12.5, 1.0, "IEEE 802.3 100 Gb/s line rate; RoCEv2 round trip < 2 us (ConnectX-5)"),
    Link("roce-200", "roce", 25.0, 1.0, "IEEE 802.3 200 Gb/s line rate; RoCEv2 round trip < 2 us (ConnectX-6)"),
    Link("roce-400", "roce", 50.0, 1.0, "IEEE 802.3 400 Gb/s line rate; RoCEv2 round trip < 2 us (ConnectX-7)"),
    Link("ib-edr", "infiniband", 12.5, 1.0, "InfiniBand EDR 4x: 100 Gb/s; ConnectX-5 datasheet 0.6 us + switch"),
    Link("ib-hdr", "infiniband", 25.0, 1.0, "InfiniBand HDR 4x: 200 Gb/s; ConnectX-6 datasheet 0.6 us + switch"),
    Link("ib-ndr", "infiniband", 50.0, 1.0, "InfiniBand NDR 4x: 400 Gb/s; ConnectX-7 datasheet + switch"),
    # --- links for the published cases of issue 27
    Link("20gbe", "ethernet", 2.5, 25.0, "a 20 Gb/s cloud TCP network (BytePS README): 20 / 8"),
    Link("50gbe", "ethernet", 6.25, 25.0, "IEEE 802.3 50 Gb/s line rate (Goyal et al. 2017: 50 Gbit Ethernet)"),
    # FDR 4x: 14.0625 Gb/s per lane, 64b/66b -> 54.55 Gb/s of data (infiniband.jp spec table;
    # advancedclustering.com "InfiniBand Types and Speeds").
    Link("ib-fdr", "infiniband", 6.82, 1.0, "InfiniBand FDR 4x: 54.55 Gb/s of data (64b/66b)"),
    # AWS EFA: p4d 4 x 100 Gb/s (AWS blog "Amazon EC2 P4d instances deep dive", 2020: 400 Gbps);
    # p5 up to 32 x 100 Gb/s = 3200 Gb/s (AWS EC2 User Guide, p5-efa). One preset is one EFA
    # device: set nics_per_node to the instance's count. Latency: fi_pingpong over EFA,
    # 1 KiB 24-26 us per transfer (ComputeCanada/puppet-magic_castle PR 331; an upper bound).
    Link("efa-100", "efa", 12.5, 25.0, "AWS EFA device, 100 Gb/s (p3dn 1, p4d 4, p5 32 per node)"),
    # H100 PCIe NVLink bridge: 600 GB/s bidirectional (NVIDIA table, HPC Tech mirror) -> 300 each way.
    Link("nvlink-bridge-h100", "nvlink", 300.0, 1.0, "H100 PCIe NVLink bridge: 600 GB/s bidirectional", links=12),
    # A800 NVSwitch: 400 GB/s bidirectional (press; DeepSeek-V3 issue 28 for the H800) -> 200 each way.
    Link("nvswitch-a800", "nvswitch", 200.0, 1.0, "A800 NVLink: 400 GB/s bidirectional (8 NVLink 3 links)", links=8),
    # Between the two CPU sockets of a node, as a GPU's DMA into the other socket's memory sees
    # it: a P100 on PCIe 3 copied 12.89 GB/s device-to-host into its own socket's pinned memory
    # but 2.54 GB/s into the other socket's (3.78 host-to-device from it), CUDA bandwidthTest,
    # 32 MB (mpicbg-scicomp/gearshifft PR #82, 2017). The link is the slower, writing, direction:
    # a ring hop through host memory writes into the receiver's buffer, which NCCL 1.x allocates
    # on the receiver's socket (src/core.cu: ncclCommInitAll sets the CPU affinity of each GPU
    # before allocating its rank's buffers). Its latency (a remote memory access, tens of ns
    # beyond a local one) is taken as 0 beside the PCIe hops' 1 us either side.
    Link("cross-socket-pcie3", "socket", 2.54, 0.0, "P100 pinned copy to the other socket's memory: 2.54 GB/s "
         "(bandwidthTest, gearshifft PR #82)"),
]}


# Whole nodes as vendors build them: the cluster keys they set (a scenario's own keys win).
# `cluster.node = "dgx-a100"` fills gpus_per_node, gpu, intra, host_link, gpus_per_pcie_switch,
# nics_per_node and inter.
NODES = {
    # 8 P100 SXM2, NVLink 1 hybrid cube-mesh, 4 EDR InfiniBand NICs, PCIe 3 (NVIDIA, "NVIDIA DGX-1
    # System Architecture", WP-08437-001); 2 GPUs and 1 NIC per PCIe switch as on the V100 model.
    # Both DGX-1s have two Xeon E5-2698 v4 sockets, GPUs 0-3 on the first and 4-7 on the second
    # (`nvidia-smi topo -m` of a DGX-1V: CPU affinity 0-19 / 20-39; microsoft/msccl-tools
    # tests/test_topologies.py).
    "dgx-1-p100": dict(gpus_per_node=8, gpu="p100", intra="nvlink1", host_link="pcie3", gpus_per_pcie_switch=2,
                       nics_per_node=4, inter="ib-edr", sockets=2,
                       source="NVIDIA DGX-1 System Architecture whitepaper (WP-08437-001)"),
    # 8 V100 SXM2, NVLink 2 hybrid cube-mesh, 4 EDR NICs, each on a PCIe switch with 2 GPUs
    # (`nvidia-smi topo -m` of a DGX-1V: mlx5_0 PIX with GPUs 0-1, ... mlx5_3 with 6-7, as pasted
    # in microsoft/msccl-tools tests/test_topologies.py).
    "dgx-1-v100": dict(gpus_per_node=8, gpu="v100", intra="nvlink2", host_link="pcie3", gpus_per_pcie_switch=2,
                       nics_per_node=4, inter="ib-edr", sockets=2,
                       source="NVIDIA DGX-1 with Tesla V100 System Architecture (WP-08437-002); nvidia-smi topo -m"),
    # 16 V100 on NVSwitch gen 1, 8 x 100 Gb/s InfiniBand/Ethernet NICs, PCIe 3 (NVIDIA DGX-2
    # datasheet); 2 GPUs per PCIe switch assumed.
    "dgx-2": dict(gpus_per_node=16, gpu="v100", intra="nvswitch1", host_link="pcie3", gpus_per_pcie_switch=2,
                  nics_per_node=8, inter="ib-edr", source="NVIDIA DGX-2 datasheet: 16 V100, NVSwitch, 8 x 100 Gb/s"),
    # 8 A100 SXM4 on NVSwitch gen 2, 8 single-port ConnectX-6 HDR NICs, PCIe 4 (NVIDIA DGX A100
    # datasheet); 2 GPUs and 2 NICs per PCIe switch (NCCL topology dump in NVIDIA/nccl issue 1505).
    "dgx-a100": dict(gpus_per_node=8, gpu="a100", intra="nvswitch", host_link="pcie4", gpus_per_pcie_switch=2,
                     nics_per_node=8, inter="ib-hdr",
                     source="NVIDIA DGX A100 datasheet: 8 A100, NVSwitch, 8 x 200 Gb/s HDR"),
    # 8 H100 SXM5 on NVSwitch gen 3, 8 ConnectX-7 400 Gb/s NICs, PCIe 5 (NVIDIA DGX H100
    # datasheet); 2 GPUs per PCIe switch assumed (not verified).
    "dgx-h100": dict(gpus_per_node=8, gpu="h100", intra="nvswitch3", host_link="pcie5", gpus_per_pcie_switch=2,
                     nics_per_node=8, inter="ib-ndr",
                     source="NVIDIA DGX H100 datasheet: 8 H100, NVSwitch, 8 x 400 Gb/s ConnectX-7"),
}
