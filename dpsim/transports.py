"""Transports: the software that carries a collective's bytes over the link between nodes.

A link preset (dpsim.hardware) is the wire; a transport is what the library does on it, and
it can lose far more than the wire's framing. `cluster.transport` names one; "auto" picks the
usual one for the inter-node link's kind (AUTO). A transport sets, for the link between nodes:

  efficiency   achievable / nominal for one long transfer (0 = the link kind's own,
               hardware.EFFICIENCY); a link given with its own efficiency (a measurement,
               inline) keeps it;
  flow_gbs     the ceiling of one connection (one TCP flow, one gRPC channel); a NIC then
               carries at most  flows x flow_gbs, flows = cluster.socket_flows for NCCL's
               socket transport, 1 for gRPC;
  latency_us   one-way software latency of a message (0 = the link's own);
  gpudirect    True/False forces GPUDirect RDMA on or off (off: bytes are staged through
               host memory, the route gpu -> PCIe switch -> host -> NIC of dpsim.cluster);
               None leaves cluster.gpudirect as the scenario says.

Cost of a transfer of m bytes between nodes, nothing else in flight:
    latency + m / (nominal x min(efficiency, flows x flow_gbs / nominal))
Every figure below is a primitive measurement of the transport (a perftest, iperf or
ping-pong, a RecvTensor benchmark), never an all-reduce or training figure it is checked
against in dpsim/published.toml.
"""
import dataclasses
from dataclasses import dataclass

from .errors import ScenarioError
from .hardware import EFFICIENCY, Link

# TCP/IP framing on a 1500-byte MTU: 1448 of 1538 bytes on the wire (hardware.EFFICIENCY).
TCP_FRAMING = EFFICIENCY["ethernet"][0]


@dataclass(frozen=True)
class Transport:
    name: str
    kinds: tuple            # link kinds it runs over
    efficiency: float       # achievable / nominal of a long transfer; 0 = the link kind's
    flow_gbs: float         # one connection's ceiling, GB/s; 0 = none
    latency_us: float       # one-way message latency; 0 = the link's
    gpudirect: bool | None  # forced on/off, or None: as cluster.gpudirect says
    source: str


ETHERNET_LIKE = ("ethernet", "roce", "infiniband", "efa")    # IP runs over all of them (IPoIB on IB)

TRANSPORTS = {t.name: t for t in [
    # TCP with nothing but its framing lost: what a tuned multi-stream iperf reaches
    # (iperf2, 16 streams, 96.4 of 100 Gb/s: github.com/esnet/iperf/issues/286). MPI over
    # CPU processes and dpsim's earlier default.
    Transport("tcp", ETHERNET_LIKE, TCP_FRAMING, 0.0, 0.0, False,
              "iperf2 16 streams on 100 GbE: 96.4 Gb/s (esnet/iperf#286); TCP framing 1448/1538"),
    # NCCL's socket transport: a channel's bytes are split over its sockets and move at the
    # slowest one's speed x their number (NCCL maintainer, NVIDIA/nccl-tests#83; net_socket.cc:
    # 1 socket per channel on a generic NIC, 2 channels per NIC). One untuned TCP flow with
    # 1500-byte writes on a 100 GbE ConnectX-6 Dx: 23 Gb/s = 2.9 GB/s (iperf2 single stream,
    # github.com/esnet/iperf/issues/1078).
    Transport("nccl-socket", ETHERNET_LIKE, TCP_FRAMING, 2.9, 0.0, False,
              "one TCP flow 23 Gb/s (esnet/iperf#1078) x sockets (NCCL net_socket.cc, nccl-tests#83)"),
    # Open MPI's TCP BTL with its default socket buffers: osu_bibw 2 x 10 GbE nodes, 759 MB/s
    # both directions together at 32 KiB = 0.38 GB/s each way, 0.30 of line rate (Open MPI PR
    # 3421, "before" run). Small-message latency ~15 us through a kernel TCP socket
    # (libfabric tcp;ofi_rxm fi_rdm_pingpong, ofiwg/libfabric PR 10394).
    Transport("mpi-tcp", ETHERNET_LIKE, 0.30, 0.0, 15.0, False,
              "osu_bibw over Open MPI btl/tcp, 10 GbE: 0.38 GB/s each way (open-mpi/ompi PR 3421)"),
    # TensorFlow's gRPC RecvTensor after the 2017 gRPC upgrade: 800 MB/s per connection, "fully
    # utilizes a 10Gbps link" (tensorflow/tensorflow#6116, byronyi 2017-08-09).
    Transport("grpc", ETHERNET_LIKE, TCP_FRAMING, 0.8, 0.0, False,
              "TF RecvTensor benchmark over gRPC: 800 MB/s per connection (tensorflow#6116)"),
    # NCCL over InfiniBand or RoCE verbs with GPUDirect RDMA: ib_write_bw 11,728 of 12,500 MB/s
    # on 100G (linux-rdma/perftest#225); the link kind's efficiency (hardware.EFFICIENCY).
    Transport("nccl-ib", ("infiniband", "roce"), 0.0, 0.0, 0.0, True,
              "perftest ib_write_bw 11,728 MB/s on 100G (linux-rdma/perftest#225)"),
    # The same without GPUDirect RDMA: NCCL stages GPU -> host memory -> NIC (NCCL maintainer,
    # NVIDIA/nccl#465); dpsim routes the bytes through the host's PCIe root complex.
    Transport("nccl-ib-nogdr", ("infiniband", "roce"), 0.0, 0.0, 0.0, False,
              "NCCL without GPUDirect RDMA stages through host memory (NVIDIA/nccl#465)"),
    # AWS EFA through libfabric (aws-ofi-nccl): the efa kind's efficiency; GPUDirect RDMA as the
    # instance has it (p4d on, p3dn off: aws/aws-ofi-nccl#104).
    Transport("efa", ("efa",), 0.0, 0.0, 0.0, None,
              "NCCL ring over EFA via aws-ofi-nccl: 60 of 100 Gb/s between 2 p3dn (NVIDIA/nccl-tests#22)"),
]}

# The transport a link kind gets when the scenario says "auto": RDMA verbs where the NIC has
# them (GPUDirect as cluster.gpudirect says), libfabric on EFA, plain TCP on Ethernet.
AUTO = {"infiniband": "nccl-ib", "roce": "nccl-ib", "efa": "efa", "ethernet": "tcp"}
CHOICES = ("auto", *TRANSPORTS)


def named(sc) -> Transport:
    """The scenario's transport (cluster.transport, "auto" resolved by the inter link's kind)."""
    name = sc.cluster.transport
    inter = sc.link_spec("inter")
    t = TRANSPORTS[AUTO.get(inter.kind, "tcp") if name == "auto" else name]
    if inter.kind not in t.kinds and sc.cluster.nodes > 1:
        raise ScenarioError("cluster.transport", f"{t.name!r} does not run over a {inter.kind} link; "
                            f"choose one of: {', '.join(n for n, x in TRANSPORTS.items() if inter.kind in x.kinds)}")
    return t


def flows(sc, t: Transport) -> int:
    """Connections one NIC's traffic is spread over: NCCL's sockets, else one."""
    return sc.cluster.socket_flows if t.name == "nccl-socket" else 1


def efficiency(t: Transport, link: Link, n_flows: int) -> float:
    """Achievable / nominal on `link` under transport t: the link's own figure when it has one
    (a measurement given inline), else the transport's, else the link kind's; capped by the
    transport's flows."""
    e = link.efficiency or t.efficiency or EFFICIENCY[link.kind][0]
    if t.flow_gbs:
        e = min(e, n_flows * t.flow_gbs / link.bandwidth_gbs)
    return e


def inter_link(sc) -> Link:
    """The link between nodes as the transport leaves it: its efficiency and latency."""
    t, link = named(sc), sc.link_spec("inter")
    return dataclasses.replace(link, efficiency=efficiency(t, link, flows(sc, t)),
                               latency_us=t.latency_us or link.latency_us)


def gpudirect(sc, setting_on: bool) -> bool:
    """GPUDirect RDMA: cluster.gpudirect when it says on or off, else as the transport forces
    it, else `setting_on` (derived.gpudirect's "auto")."""
    forced = named(sc).gpudirect
    if sc.cluster.gpudirect != "auto" or forced is None:
        return setting_on
    return forced
