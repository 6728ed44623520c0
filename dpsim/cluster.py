"""The machine: nodes of GPUs, the links inside a node, one switch between nodes.

Endpoints are named "gpu<i>" (i counts across all nodes) and "host<k>" (node k's CPU and
memory, which is also where its PCIe root complex and its NIC sit). Inside a node:

  PCIe tree    every GPU hangs off a PCIe switch; `gpus_per_pcie_switch` GPUs share one
               switch and its uplink to the host. GPU to GPU under one switch: up and down
               through the switch (peer-to-peer); under different switches: up through the
               host's root complex and down again, sharing both uplinks.
  NVLink mesh  (intra kind "nvlink") a direct link between every pair of GPUs, each pair
               getting the GPU's NVLink bandwidth / (GPUs in the node - 1). A simplification:
               a DGX-1's hybrid cube mesh is not fully connected.
  NVSwitch     (intra kind "nvswitch") every GPU has its full NVLink bandwidth to a switch.
  The PCIe tree is there with NVLink too: it carries GPU <-> host traffic.

Between nodes: each host has one NIC port into a single non-blocking switch ("net"), with the
`inter` link's bandwidth each way. A GPU reaches another node through its PCIe path to its
host, the NIC, the switch, and down again (no GPUDirect RDMA shortcut).

Every link is two channels, one per direction (full duplex).
"""
from .hardware import Link
from .network import Channel


class Cluster:
    def __init__(self, nodes: int, gpus_per_node: int, intra: Link, inter: Link,
                 host_link: Link, gpus_per_pcie_switch: int):
        self.nodes = nodes
        self.gpus_per_node = gpus_per_node
        self.intra, self.inter, self.host_link = intra, inter, host_link
        self.per_switch = min(gpus_per_pcie_switch, gpus_per_node)
        self.gpus = [f"gpu{i}" for i in range(nodes * gpus_per_node)]
        self.hosts = [f"host{k}" for k in range(nodes)]
        self.channels: dict[tuple[str, str], Channel] = {}
        self._routes: dict[tuple[str, str], list[Channel]] = {}
        for k in range(nodes):
            self._build_node(k)
            if nodes > 1:
                self._link(f"host{k}", "net", inter.bandwidth_gbs, inter.latency_us)

    # -- building
    def _link(self, a, b, bandwidth_gbs, latency_us):
        for x, y in ((a, b), (b, a)):
            self.channels[x, y] = Channel(f"{x}>{y}", bandwidth_gbs * 1e9, latency_us * 1e-6)

    def _build_node(self, k):
        g, host = self.gpus_per_node, f"host{k}"
        pcie_to_gpu = self.intra if self.intra.kind == "pcie" else self.host_link
        for local in range(g):
            gpu, switch = f"gpu{k * g + local}", self.switch_of(k * g + local)
            self._link(gpu, switch, pcie_to_gpu.bandwidth_gbs, pcie_to_gpu.latency_us)
        for s in range((g + self.per_switch - 1) // self.per_switch):
            self._link(f"pcisw{k}.{s}", host, self.host_link.bandwidth_gbs, self.host_link.latency_us)
        if self.intra.kind == "nvlink" and g > 1:
            per_pair = self.intra.bandwidth_gbs / (g - 1)
            for a in range(k * g, (k + 1) * g):
                for b in range(a + 1, (k + 1) * g):
                    self._link(f"gpu{a}", f"gpu{b}", per_pair, self.intra.latency_us)
        elif self.intra.kind == "nvswitch":
            for a in range(k * g, (k + 1) * g):
                self._link(f"gpu{a}", f"nvsw{k}", self.intra.bandwidth_gbs, self.intra.latency_us)
        elif self.intra.kind not in ("pcie", "nvlink"):
            raise ValueError(f"intra link kind {self.intra.kind!r} cannot connect GPUs inside a node")

    # -- where things are
    def node_of(self, endpoint: str) -> int:
        if endpoint.startswith("host"):
            return int(endpoint[4:])
        return int(endpoint[3:]) // self.gpus_per_node

    def local(self, endpoint: str) -> str:
        """The endpoint's name inside its node ("gpu3" for the fourth GPU of any node, "host",
        "pcisw.0"); nodes are identical, so this names the same part of every node."""
        if endpoint.startswith("gpu"):
            return f"gpu{int(endpoint[3:]) % self.gpus_per_node}"
        if endpoint.startswith("pcisw"):
            return "pcisw." + endpoint.split(".")[1]
        return endpoint.rstrip("0123456789")          # host<k>, nvsw<k>; "net" is the one switch

    def switch_of(self, gpu_index: int) -> str:
        k, local = divmod(gpu_index, self.gpus_per_node)
        return f"pcisw{k}.{local // self.per_switch}"

    def gpus_of_node(self, k: int) -> list[str]:
        g = self.gpus_per_node
        return self.gpus[k * g:(k + 1) * g]

    # -- routes
    def route(self, src: str, dst: str) -> list[Channel]:
        key = (src, dst)
        if key not in self._routes:
            hops = self._hops(src, dst)
            self._routes[key] = [self.channels[a, b] for a, b in zip(hops, hops[1:])]
        return self._routes[key]

    def _hops(self, src, dst) -> list[str]:
        if src == dst:
            return [src]
        ks, kd = self.node_of(src), self.node_of(dst)
        if ks != kd:
            return self._to_host(src) + ["net"] + self._to_host(dst)[::-1]
        if src.startswith("host") or dst.startswith("host"):
            gpu = dst if src.startswith("host") else src
            up = self._to_host(gpu)
            return up if gpu == src else up[::-1]
        if self.intra.kind == "nvlink":
            return [src, dst]
        if self.intra.kind == "nvswitch":
            return [src, f"nvsw{ks}", dst]
        sw_s, sw_d = self.switch_of(int(src[3:])), self.switch_of(int(dst[3:]))
        if sw_s == sw_d:
            return [src, sw_s, dst]
        return [src, sw_s, f"host{ks}", sw_d, dst]

    def _to_host(self, endpoint) -> list[str]:
        """Hops from an endpoint up to its node's host (inclusive)."""
        if endpoint.startswith("host"):
            return [endpoint]
        return [endpoint, self.switch_of(int(endpoint[3:])), f"host{self.node_of(endpoint)}"]

    def latency(self, src, dst) -> float:
        return sum(ch.latency for ch in self.route(src, dst))

    def bottleneck(self, src, dst) -> float:
        """Bandwidth (bytes/s) of the slowest channel on the route, with nothing else in flight."""
        return min(ch.bandwidth for ch in self.route(src, dst))
