"""The machine: nodes of GPUs, the links inside a node, NICs into one switch between nodes.

Endpoints are named "gpu<i>" (i counts across all nodes), "host<k>" (node k's CPU and memory,
where its PCIe root complex is), "pcisw<k>.<s>" (PCIe switches), "nic<k>.<j>" (NICs) and
"net" (the switch between nodes). Inside a node:

  PCIe tree    every GPU hangs off a PCIe switch; `gpus_per_pcie_switch` GPUs share one
               switch and its uplink to the host. GPU to GPU under one switch: up and down
               through the switch (peer-to-peer); under different switches: up through the
               host's root complex and down again, sharing both uplinks.
  NVLink       (intra kind "nvlink") point-to-point links between pairs of GPUs, as many per
               pair as the box has (dpsim.nvlink: the DGX-1's hybrid cube mesh, full meshes),
               each pair's link running at (links between them) x (one link's bandwidth).
               Pairs with no NVLink between them talk over the PCIe tree.
  NVSwitch     (intra kind "nvswitch") every GPU has its full NVLink bandwidth to a switch.
  The PCIe tree is there with NVLink too: it carries GPU <-> host traffic.
  Sockets      (`sockets` > 1) the node's PCIe switches are split evenly over its CPU
               sockets, each with its own root complex and memory: socket 0's is "host<k>",
               socket s's "cpu<k>.<s>", joined to host<k> by `socket_link` (QPI/UPI as a GPU's
               copies see it). GPUs on different sockets with no NVLink between them talk
               through both root complexes and that link; a GPU's traffic to host memory stays
               on its own socket (memory allocated near the GPU that uses it).

Between nodes: each node has `nics_per_node` NICs, NIC j serving the GPUs l with
l x NICs // GPUs = j (DGX A100: NIC j for GPU j), each with its own port, at the `inter`
link's bandwidth, into one non-blocking switch ("net"). Where the NIC sits decides the route:
  GPUDirect RDMA on   the NIC is under the PCIe switch of the GPUs it serves and reads GPU
                      memory directly: gpu -> PCIe switch -> NIC -> net (NVIDIA, "GPUDirect
                      RDMA", CUDA documentation). A rail-optimised node.
  GPUDirect RDMA off  bytes go through host memory: gpu -> PCIe switch -> host -> NIC -> net,
                      the NIC on the host's root complex (its own PCIe link).
Host memory to another node always leaves by its node's NICs.
Server machines (`server_nodes`, BytePS's CPU-only summation servers): endpoints "server<s>",
each a CPU host with `nics_per_node` NICs at the `inter` link's rate (one port to "net" at
their sum); a GPU reaches one through its own NIC, the switch, and the server's port.

Rings (`rings`): NCCL's channels. Over the whole cluster the all-reduce's bytes are split
over several rings at once: inside one node every ring dpsim.nvlink finds over the NVLink
graph (one ring on PCIe or NVSwitch, which one ring fills; `ring_order = "gpu"`: one ring in
GPU order whatever the links, as NCCL 1.x built it); across nodes one ring per NIC,
ring c entering and leaving every node by NIC c where a node ring passes two of NIC c's GPUs
in a row (else entering by NIC c), so that every NIC carries one ring each way.

Every link is two channels, one per direction (full duplex), at the link's achievable
bandwidth (hardware.Link.achievable_gbs: its nominal rate x its kind's efficiency).
"""
from functools import cached_property

from . import nvlink
from .hardware import Link
from .network import Channel


class Cluster:
    def __init__(self, nodes: int, gpus_per_node: int, intra: Link, inter: Link,
                 host_link: Link, gpus_per_pcie_switch: int, nics_per_node: int = 1, gpudirect: bool = False,
                 server_nodes: int = 0, sockets: int = 1, socket_link: Link | None = None,
                 ring_order: str = "topology"):
        self.nodes = nodes
        self.sockets, self.socket_link, self.ring_order = sockets, socket_link, ring_order
        self.gpus_per_node = gpus_per_node
        self.intra, self.inter, self.host_link = intra, inter, host_link
        self.per_switch = min(gpus_per_pcie_switch, gpus_per_node)
        self.nics, self.gpudirect = nics_per_node, gpudirect
        self.gpus = [f"gpu{i}" for i in range(nodes * gpus_per_node)]
        self.hosts = [f"host{k}" for k in range(nodes)]
        self.servers = [f"server{s}" for s in range(server_nodes)]
        self.nvlinks = nvlink.graph(gpus_per_node, intra.links_per_gpu(gpus_per_node)) if intra.kind == "nvlink" else {}
        self.channels: dict[tuple[str, str], Channel] = {}
        self._routes: dict[tuple[str, str, bool], list[Channel]] = {}
        for k in range(nodes):
            self._build_node(k)
        for server in self.servers:
            self._link(server, "net", inter, times=nics_per_node)

    # -- building
    def _link(self, a, b, link: Link, times=1.0):
        for x, y in ((a, b), (b, a)):
            self.channels[x, y] = Channel(f"{x}>{y}", times * link.achievable_gbs * 1e9, link.latency_us * 1e-6)

    def _build_node(self, k):
        g, host = self.gpus_per_node, f"host{k}"
        pcie_to_gpu = self.intra if self.intra.kind == "pcie" else self.host_link
        for local in range(g):
            self._link(f"gpu{k * g + local}", self.switch_of(k * g + local), pcie_to_gpu)
        for s in range(self.switches):
            self._link(f"pcisw{k}.{s}", self._root_of(f"pcisw{k}.{s}"), self.host_link)
        for socket in range(1, self.sockets):
            self._link(host, f"cpu{k}.{socket}", self.socket_link)
        if self.intra.kind == "nvlink":
            per_link = 1 / self.intra.links_per_gpu(g)
            for (a, b), count in self.nvlinks.items():
                self._link(f"gpu{k * g + a}", f"gpu{k * g + b}", self.intra, count * per_link)
        elif self.intra.kind == "nvswitch":
            for a in range(k * g, (k + 1) * g):
                self._link(f"gpu{a}", f"nvsw{k}", self.intra)
        elif self.intra.kind != "pcie":
            raise ValueError(f"intra link kind {self.intra.kind!r} cannot connect GPUs inside a node")
        if self.nodes > 1:
            for j in range(self.nics):
                nic = f"nic{k}.{j}"
                self._link(self._nic_parent(k, j), nic, self.host_link)
                self._link(nic, "net", self.inter)

    @property
    def switches(self) -> int:
        """PCIe switches per node."""
        return -(-self.gpus_per_node // self.per_switch)

    def _root_of(self, switch: str) -> str:
        """The root complex (and memory) of the socket a PCIe switch hangs off: host<k> for
        socket 0, cpu<k>.<s> for socket s (switches split evenly over the sockets)."""
        k, s = switch[5:].split(".")
        socket = int(s) * self.sockets // self.switches
        return f"host{k}" if socket == 0 else f"cpu{k}.{socket}"

    def _nic_parent(self, k, j):
        """What NIC j of node k hangs off: with GPUDirect the PCIe switch of the first GPU it
        serves (the smallest l with l x NICs // GPUs = j: ceil(j x GPUs / NICs)), else the host."""
        if self.gpudirect:
            first = min(-(-j * self.gpus_per_node // self.nics), self.gpus_per_node - 1)
            return self.switch_of(k * self.gpus_per_node + first)
        return f"host{k}"

    def _nic_of_local(self, local: int) -> int:
        """The NIC serving a node's GPU number `local`: l x NICs // GPUs."""
        return local * self.nics // self.gpus_per_node

    # -- where things are
    def node_of(self, endpoint: str) -> int:
        return self.home(endpoint)

    def home(self, endpoint: str):
        """The node any endpoint is part of (GPU, host, PCIe switch, NIC, NVSwitch); None for "net"."""
        if endpoint == "net":
            return None
        if endpoint.startswith("gpu"):
            return int(endpoint[3:]) // self.gpus_per_node
        return int(endpoint.split(".")[0].lstrip("abcdefghijklmnopqrstuvwxyz"))

    def nic_of(self, endpoint: str) -> int:
        """The NIC a GPU's inter-node traffic uses (NIC 0 for the host's own)."""
        if not endpoint.startswith("gpu"):
            return 0
        return self._nic_of_local(int(endpoint[3:]) % self.gpus_per_node)

    def local(self, endpoint: str) -> str:
        """The endpoint's name inside its node ("gpu3" for the fourth GPU of any node, "host",
        "pcisw.0", "nic.1", "cpu.1"); nodes are identical, so this names the same part of every node."""
        if endpoint.startswith("gpu"):
            return f"gpu{int(endpoint[3:]) % self.gpus_per_node}"
        if endpoint.startswith(("pcisw", "nic", "cpu")):
            name, part = endpoint.split(".")
            return name.rstrip("0123456789") + "." + part
        return endpoint.rstrip("0123456789")          # host<k>, nvsw<k>; "net" is the one switch

    def switch_of(self, gpu_index: int) -> str:
        k, local = divmod(gpu_index, self.gpus_per_node)
        return f"pcisw{k}.{local // self.per_switch}"

    def gpus_of_node(self, k: int) -> list[str]:
        g = self.gpus_per_node
        return self.gpus[k * g:(k + 1) * g]

    @cached_property
    def node_groups(self) -> list[list[str]]:
        """Every node's GPUs, node by node (one list, kept: the rings inside the nodes)."""
        return [self.gpus_of_node(k) for k in range(self.nodes)]

    @cached_property
    def local_groups(self) -> list[list[str]]:
        """For each local number l, GPU l of every node (the rings across the nodes)."""
        return [[node[l] for node in self.node_groups] for l in range(self.gpus_per_node)]

    # -- routes
    def route(self, src: str, dst: str, staged: bool = False) -> list[Channel]:
        """The channels from src to dst; `staged`: GPU to GPU through both hosts' memory."""
        key = (src, dst, staged)
        if key not in self._routes:
            hops = self._staged_hops(src, dst) if staged else self._hops(src, dst)
            self._routes[key] = [self.channels[a, b] for a, b in zip(hops, hops[1:])]
        return self._routes[key]

    def _hops(self, src, dst) -> list[str]:
        if src == dst:
            return [src]
        if src.startswith("server") or dst.startswith("server"):
            return self._server_hops(src, dst)
        ks, kd = self.node_of(src), self.node_of(dst)
        if ks != kd:
            js = self.nic_of(src if src.startswith("gpu") else dst)     # a host uses its GPU peer's NIC
            jd = self.nic_of(dst) if dst.startswith("gpu") else js
            return self._to_nic(src, js) + ["net"] + self._to_nic(dst, jd)[::-1]
        if src.startswith("host") or dst.startswith("host"):
            gpu = dst if src.startswith("host") else src
            up = self._to_host(gpu)
            return up if gpu == src else up[::-1]
        a, b = sorted(int(e[3:]) % self.gpus_per_node for e in (src, dst))
        if (a, b) in self.nvlinks:
            return [src, dst]
        if self.intra.kind == "nvswitch":
            return [src, f"nvsw{ks}", dst]
        sw_s, sw_d = self.switch_of(int(src[3:])), self.switch_of(int(dst[3:]))
        if sw_s == sw_d:
            return [src, sw_s, dst]
        return self._through_hosts(src, dst)

    def _between(self, a: str, b: str) -> list[str]:
        """Root complexes from a to b (inclusive) in one node: directly, or through host<k>."""
        if a == b:
            return [a]
        host = f"host{self.home(a)}"
        return [a, b] if host in (a, b) else [a, host, b]

    def _server_hops(self, src, dst) -> list[str]:
        """To or from a server machine: the other end's route to its NIC, the switch, the server."""
        server, other = (src, dst) if src.startswith("server") else (dst, src)
        way = self._to_nic(other, self.nic_of(other)) + ["net", server]
        return way[::-1] if server == src else way

    def _staged_hops(self, src, dst) -> list[str]:
        """GPU to GPU through host memory (an MPI that is not CUDA-aware): up to the host,
        across by the GPUs' NICs, down from the other host."""
        if self.node_of(src) == self.node_of(dst):
            return self._through_hosts(src, dst)
        hs, hd = self._to_host(src), self._to_host(dst)
        across = self._to_nic(hs[-1], self.nic_of(src)) + ["net"] + self._to_nic(hd[-1], self.nic_of(dst))[::-1]
        return hs[:-1] + across + hd[::-1][1:]

    def _through_hosts(self, src, dst) -> list[str]:
        """In one node: up to src's root complex, across to dst's (_between), down to dst."""
        hs, hd = self._to_host(src), self._to_host(dst)
        return hs[:-1] + self._between(hs[-1], hd[-1]) + hd[::-1][1:]

    def _to_host(self, endpoint) -> list[str]:
        """Hops from an endpoint up to the root complex of its socket (inclusive): host<k> for
        socket 0 and for the host itself."""
        if endpoint.startswith(("host", "cpu")):
            return [endpoint]
        switch = self.switch_of(int(endpoint[3:]))
        return [endpoint, switch, self._root_of(switch)]

    def _to_nic(self, endpoint, j) -> list[str]:
        """Hops from an endpoint to NIC j of its node (inclusive)."""
        k = self.node_of(endpoint)
        parent, nic = self._nic_parent(k, j), f"nic{k}.{j}"
        if endpoint.startswith("gpu") and self.gpudirect and self.switch_of(int(endpoint[3:])) == parent:
            return [endpoint, parent, nic]
        up = self._to_host(endpoint)
        if parent.startswith("pcisw"):
            return up[:-1] + self._between(up[-1], self._root_of(parent)) + [parent, nic]
        return up[:-1] + self._between(up[-1], parent) + [nic]

    def latency(self, src, dst) -> float:
        return sum(ch.latency for ch in self.route(src, dst))

    def bottleneck(self, src, dst) -> float:
        """Bandwidth (bytes/s) of the slowest channel on the route, with nothing else in flight."""
        return min(ch.bandwidth for ch in self.route(src, dst))

    # -- NCCL's channels (found once per cluster: every all-reduce asks for them)
    @cached_property
    def node_rings(self) -> list[list[int]]:
        """Rings of local GPU numbers inside a node: dpsim.nvlink's over an NVLink graph, else
        one ring in GPU order (on PCIe it crosses the host once per switch; NVSwitch and a
        PCIe switch carry one ring at full speed)."""
        if self.nvlinks and self.ring_order == "topology":
            found = nvlink.rings(self.nvlinks, self.gpus_per_node)
            if found:
                return found
        return [list(range(self.gpus_per_node))]

    def rings(self, ranks) -> list[list[str]]:
        """The rings an all-reduce among `ranks` runs at once, its bytes split evenly over them.
        Among every GPU of the cluster: NCCL's channels (see the module docstring); among any
        other set of ranks: one ring in the order given."""
        ranks = list(ranks)
        if ranks != self.gpus or len(ranks) < 2:
            return [ranks]
        return self._channels

    @cached_property
    def _channels(self) -> list[list[str]]:
        orders, g = self.node_rings, self.gpus_per_node
        if self.nodes == 1:
            return [[f"gpu{l}" for l in order] for order in orders]
        return [[f"gpu{k * g + l}" for k in range(self.nodes) for l in self._channel_order(orders, c)]
                for c in range(self.nics)]

    def _channel_order(self, orders, c):
        """Channel c's path through a node: a node ring cut open between two GPUs of NIC c, so
        that it enters and leaves every node by NIC c (tried from ring c on); failing that,
        ring c entering at a GPU of NIC c."""
        nic = self._nic_of_local
        for i in range(len(orders)):
            order = orders[(c + i) % len(orders)]
            for start in range(self.gpus_per_node):
                path = order[start:] + order[:start]
                if nic(path[0]) == c and nic(path[-1]) == c:
                    return path
        order = orders[c % len(orders)]
        start = next((i for i, l in enumerate(order) if nic(l) == c), 0)
        return order[start:] + order[:start]
