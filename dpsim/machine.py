"""The simulated machine, as a synchronisation strategy sees it: move bytes between endpoints,
add arrays, run kernels, wait. (In mpi_impl the same role is played by an MPI communicator,
`comm`; here the word is `machine`, so that one word keeps one meaning.)

Strategies are SimPy generator functions `allreduce(machine, ranks, nbytes)` that finish when
every rank holds the sum. They are written in lock-step: each step starts a set of transfers
at once and waits for all of them, which is exact when the ranks are symmetric and is how the
textbooks draw these algorithms.

Reduction cost (the gamma of alpha-beta-gamma models): adding two arrays reads two and
writes one, so reducing n bytes costs 3n bytes of memory traffic at the device's memory
bandwidth; on the CPU, the host's memory bandwidth.

Staging (`sync.staging = "host"`, and always for 1-bit, whose exchange goes through MPI as
in CNTK and mpi_impl): an MPI library that is not CUDA-aware copies every message from the
GPU to host memory, sends it host to host (shared memory inside a node, the NIC between
nodes) and copies it up to the receiving GPU. The message then crosses the sender's and the
receiver's PCIe paths to the host instead of going peer to peer, and pays
`sync.message_overhead_us` of software time (a device-to-host copy launch, the MPI call, a
host-to-device copy launch, stream synchronisations) on top of the links' latencies.
Direct messages (NCCL, CUDA-aware MPI) pay only the links' latencies.
Peer-to-peer off (`cluster.p2p = false`: GeForce cards, a disabled ACS path) a direct message
between two GPUs of a node goes through a pinned bounce buffer in host memory: two copies one
after the other (GPU to host, then host to GPU), each at its PCIe path's pinned-copy rate
(0.77-0.82 of line rate, bandwidthTest/nvbandwidth; hardware.EFFICIENCY), not one hop.

Pipelining (`sync.segment_mib` > 0, as mpi_impl does by default and NCCL always does): a
step that receives a chunk and adds it (`send_reduce`) moves it in k segments and adds
segment s while segment s + 1 travels, so with T the transfer's time and G the addition's,
the step takes max(T, G) + min(T, G) / k instead of T + G.  Per-segment message costs are
left out (a segment of 1 MiB costs ~100x its latency on any of dpsim's links).

The fast path (`fast=True`, the default, and no trace): a collective made of identical rounds
(the 2(n-1) steps of a ring) is simulated one round in detail and the other rounds are one wait
of the same length; a step seen before is one wait of its remembered time; a step whose nodes
all do the same (dpsim.symmetry's shapes) is timed one flow per kind. dpsim.replay says
exactly when that is exact and how a run that breaks the conditions is redone. The bytes of
symmetric steps are booked when read: Machine.sent, bytes_sent and settle (dpsim.ledger).
"""
import math

from . import derived, symmetry
from .network import Pairs
from .duet import Train
from .replay import Replay
from .symmetry import AllPairs, Alike, Star
from .vocabulary import MIB


def pipelined(transfer, add, message, segment):
    """A receive-and-add step: transfer, then add (segment = 0, the textbook step), or in
    k = ceil(message / segment) segments, each added while the next travels (sync.segment_mib):
    max(T, G) + min(T, G) / k."""
    if not segment:
        return transfer + add
    k = max(1, math.ceil(message / segment))
    return max(transfer, add) + min(transfer, add) / k


class Machine:
    """The costs a strategy sees: memory bandwidths (reductions, the codec's kernels), how
    messages travel (staging, software overhead per message, scheduling wake-up), kernel
    launches, device sharing and the pipeline segment. Machine.for_scenario builds it from a
    scenario; the keywords default to free messages, unshared devices and the textbook step."""

    def __init__(self, env, net, cluster, gpu_mem_bw_gbs: float, host_mem_bw_gbs: float, *, trace=None,
                 fast=True, staging="direct", message_overhead_us=0.0, kernel_launch_us=0.0,
                 sharing=1.0, wakeup_s=0.0, codec_gbs=0.0, segment_bytes=0.0, flops_per_s=math.inf, p2p=True,
                 kernel_sharing=None):
        self.env, self.net, self.cluster, self.trace = env, net, cluster, trace
        # fast=False or a trace (which needs every round's spans): simulate every round (the detailed path)
        self.replay = Replay(env, net, cluster) if fast and trace is None else None
        self.gpu_mem_bw = gpu_mem_bw_gbs * 1e9
        self.codec_bw = (codec_gbs or gpu_mem_bw_gbs) * 1e9     # what the codec's kernels reach
        self._gamma = {"gpu": 3 / (gpu_mem_bw_gbs * 1e9), "host": 3 / (host_mem_bw_gbs * 1e9)}
        self.staging = staging
        self.overhead = message_overhead_us * 1e-6
        self.kernel_launch = kernel_launch_us * 1e-6
        self.codec_s = 0.0          # time spent in encode/decode kernels (compression), summed
        self.sharing = sharing      # ranks per device: device work (reduce, kernels) this much slower
        # kernels are device work like forward and backward: a shared device's time-slicing cost too
        self.kernel_sharing = sharing if kernel_sharing is None else kernel_sharing
        self.wakeup = wakeup_s      # per message between ranks: the receiver waits to be scheduled
        self.segment = segment_bytes  # pipeline segment of send_reduce; 0 = the textbook step
        self.flops_per_s = flops_per_s  # what the codec's matrix products reach (PowerSGD)
        self.p2p = p2p              # False: GPU to GPU inside a node is two copies through host memory
        self._memo = {}             # (function, id of a list) -> (the list, a copy, the function's value)
        self._sendings = {}         # (id of a list of moves, ...) -> (the list, a copy, its network.Sending)
        self.memo = {}              # what strategies found out once per run (ring.shape: id(rings) -> ...)
        self._routes_of_pairs = {}  # (id of a Pairs step's pairs, ...) -> (the pairs, a Sending of them)

    @classmethod
    def for_scenario(cls, sc, env, net, cluster, trace=None, fast=True):
        """The machine a scenario describes (its derived quantities: dpsim.derived)."""
        return cls(env, net, cluster, derived.memory_bw_gbs(sc), sc.cluster.host_mem_bw_gbs, trace=trace, fast=fast,
                   staging=sc.sync.staging, message_overhead_us=sc.sync.message_overhead_us,
                   kernel_launch_us=sc.compute.kernel_launch_us, sharing=derived.device_sharing(sc),
                   kernel_sharing=derived.kernel_sharing(sc),
                   wakeup_s=derived.wakeup_s(sc), codec_gbs=sc.compute.codec_gbs,
                   segment_bytes=sc.sync.segment_mib * MIB,
                   flops_per_s=derived.powersgd_flops(sc), p2p=sc.cluster.p2p)

    @property
    def replayed_rounds(self) -> int:
        """Rounds and steps the fast path stood in for instead of simulating them."""
        return self.replay.replayed if self.replay is not None else 0

    @property
    def disturbed(self) -> bool:
        """A replay turned out to share the network: the run must be redone in detail."""
        return self.replay is not None and self.replay.disturbed

    def gamma(self, endpoint: str) -> float:
        """Seconds per byte reduced on this endpoint (a shared device's share of its speed)."""
        if endpoint.startswith(("host", "server")):
            return self._gamma["host"]
        return self._gamma["gpu"] * self.sharing

    def _kept(self, compute, items):
        """compute(items), remembered for a list a strategy passes again unchanged (every step of
        a phase passes the same list: this keeps the detailed path's cost per step off its length)."""
        if not isinstance(items, list):
            return compute(items)
        key = (compute.__code__, id(items))
        kept = self._memo.get(key)
        if kept is None or kept[0] is not items or kept[1] != items:
            if len(self._memo) >= 256:
                self._memo.clear()
            kept = self._memo[key] = (items, list(items), compute(items))
        return kept[2]

    def route(self, src, dst, staged):
        return self.cluster.route(src, dst, staged and src.startswith("gpu") and dst.startswith("gpu"))

    def send(self, moves, label="", staged=None):
        """Start every (src, dst, nbytes) transfer at once; an event for when all have arrived.
        staged: through host memory (default: as sync.staging says).

        Fast path: a step started on an idle network takes a time and moves bytes that depend
        on its transfers alone, so the first time a step is seen it is simulated and
        remembered, and the same step again is one wait of that time (dpsim.replay)."""
        staged = self.staging == "host" if staged is None else staged
        replay = self.replay
        if replay is not None and replay.may_replay():
            if self._symmetric(moves):
                return replay.symmetric((moves, staged), lambda: symmetry.simulate(self, moves, staged))
            step = moves if isinstance(moves, Pairs) else tuple(moves)
            return replay.step((step, staged), lambda: self._send(moves, label, staged))
        return self._send(moves, label, staged)

    def _symmetric(self, moves) -> bool:
        """A step dpsim.symmetry can take whole: its shape covers this cluster, and no message
        bounces through host memory (p2p off). An all-to-all only on an idle network."""
        if not isinstance(moves, (AllPairs, Alike, Star)) or not self.p2p:
            return False
        return symmetry.takes_whole(moves, self.cluster) and (self.replay.idle() or not isinstance(moves, AllPairs))

    def sent(self, endpoint) -> float:
        """Bytes `endpoint` has sent so far (those of replayed steps included)."""
        owed = self.replay.ledger.owed_to(endpoint) if self.replay is not None else 0.0
        return self.net.bytes_sent.get(endpoint, 0.0) + owed

    def bytes_sent(self) -> dict:
        """Network.bytes_sent with the bytes of every replayed step booked."""
        if self.replay is not None:
            self.replay.ledger.settle_sent()
        return self.net.bytes_sent

    def settle(self):
        """Book the bytes of every replayed step on Network.bytes_sent and on every channel's
        bytes_carried (dpsim.ledger: symmetric steps book them when they are read)."""
        if self.replay is not None:
            self.replay.ledger.settle()

    def message_overhead(self, staged) -> float:
        """Software seconds a message pays on top of its route's latency."""
        return (self.overhead if staged else 0.0) + self.wakeup

    def _send(self, moves, label, staged):
        overhead = self.message_overhead(staged)
        if self.p2p and not (staged and self.trace is not None):
            return self.net.send(self._sending(moves, staged, overhead), label)
        events = [self.env.process(self._bounce(s, d, n, label)) if self._bounces(s, d, staged) else
                  self.net.transfer(self.route(s, d, staged), s, d, n, label, overhead) for s, d, n in moves]
        if staged and self.trace is not None:
            self._trace_staging(moves, events, overhead)
        return self.env.all_of(events)

    def _sending(self, moves, staged, overhead):
        """The step's transfers as a network.Sending, made once per list of moves (a strategy
        sends the same list at every step of a phase) and kept while that list is unchanged;
        an AllPairs, Alike, Star, Pairs or tuple is kept by its value (a symmetric step is built
        anew each time). A Pairs step of a size not seen is its pairs' Sending resized."""
        by_value = isinstance(moves, (AllPairs, Alike, Star, Pairs, tuple))
        key = (moves if by_value else id(moves), staged, overhead)
        kept = self._sendings.get(key)
        if kept is not None and (by_value or (kept[0] is moves and kept[1] == moves)):
            return kept[2]
        if isinstance(moves, Pairs):
            listed, sending = moves, self._routed(moves, staged, overhead).resized(moves)
        else:
            listed = list(moves)
            sending = self.net.sending(listed, [self.route(s, d, staged) for s, d, _ in listed], overhead)
        if len(self._sendings) >= 64:
            self._sendings.clear()
        self._sendings[key] = (moves, listed, sending)
        return sending

    def _routed(self, moves, staged, overhead):
        """The Sending of a Pairs step's pairs (at the size it first came with), routed once."""
        key = (id(moves.pairs), staged, overhead)
        kept = self._routes_of_pairs.get(key)
        if kept is None or kept[0] is not moves.pairs:
            kept = self._routes_of_pairs[key] = (moves.pairs, self.net.sending(
                moves, [self.route(s, d, staged) for s, d in moves.pairs], overhead))
        return kept[1]

    def _bounces(self, src, dst, staged) -> bool:
        """Peer-to-peer off (cluster.p2p = false): a direct GPU-to-GPU message inside a node
        is staged through a pinned host buffer."""
        return (not self.p2p and not staged and src.startswith("gpu") and dst.startswith("gpu")
                and self.cluster.node_of(src) == self.cluster.node_of(dst))

    def _bounce(self, src, dst, nbytes, label):
        """Two copies, one after the other: the sender's GPU to host memory, then host memory
        to the receiver's GPU (each at the pinned-copy rate of its PCIe path)."""
        host = f"host{self.cluster.node_of(src)}"
        yield self.net.transfer(self.cluster.route(src, host), src, host, nbytes, label)
        yield self.net.transfer(self.cluster.route(host, dst), host, dst, nbytes, label)

    def _trace_staging(self, moves, events, overhead):
        """On each sending GPU's row of the timeline: the MPI call (`message_overhead`, once per
        step) and then its host-staged messages, until the last of them has arrived."""
        now, sent = self.env.now, {}
        for (src, _, _), event in zip(moves, events):
            sent.setdefault(src, []).append(event)
        for src, evs in sent.items():
            self.trace.span(src, "MPI call", now, now + overhead)
            self.env.all_of(evs).callbacks.append(
                lambda _, src=src: self.trace.span(src, "host-staged messages", now + overhead, self.env.now))

    def copy(self, moves, label="copy"):
        """Plain DMA copies (host <-> GPU): direct routes, no messaging overhead."""
        events = [self.net.transfer(self.route(s, d, False), s, d, n, label) for s, d, n in moves]
        return self.env.all_of(events)

    def _busy(self, endpoints, label, seconds):
        """Every endpoint works for `seconds` at once (a span each on the timeline)."""
        now = self.env.now
        if self.trace is not None:
            for e in endpoints:
                self.trace.span(e, label, now, now + seconds)
        return self.env.timeout(seconds)

    def update(self, endpoint, params, seconds_per_param):
        """The optimizer step on one endpoint (the CPU parameter server)."""
        return self._busy([endpoint], "update", params * seconds_per_param)

    def reduce(self, endpoints, nbytes, label="reduce"):
        """Each endpoint adds nbytes of incoming data into its own, all at once."""
        now = self.env.now
        seconds = self._slowest_gamma(endpoints) * nbytes
        if self.trace is not None:
            for e in endpoints:
                self.trace.span(e, label, now, now + self.gamma(e) * nbytes)
        return self.env.timeout(seconds)

    def _slowest_gamma(self, endpoints) -> float:
        """The largest gamma among endpoints (a host's, if any endpoint is a host); every GPU of
        the cluster, the usual case, without reading the list."""
        if endpoints is self.cluster.gpus:
            return self.gamma("gpu") if endpoints else 0.0
        hosts = self._kept(lambda ends: {e.startswith(("host", "server")) for e in ends}, endpoints)
        return max((self.gamma("host" if h else "gpu") for h in hosts), default=0.0)

    def send_reduce(self, moves, endpoints, nbytes, label=""):
        """One receive-and-add step: the transfers `moves` (as in send), then every endpoint
        adds `nbytes`.  Pipelined when self.segment > 0: max(T, G) + min(T, G) / k in all,
        k = segments of the largest message (see the module docstring)."""
        start = self.env.now
        yield self.send(moves, label)
        if not self.segment:
            yield self.reduce(endpoints, nbytes)
            return
        message = self._kept(symmetry.largest, moves)
        end = start + pipelined(self.env.now - start, self._slowest_gamma(endpoints) * nbytes, message, self.segment)
        if self.trace is not None:                  # each rank adds from its first segment on
            for e in dict.fromkeys(endpoints):
                self.trace.span(e, "reduce", end - self.gamma(e) * nbytes, end)
        yield self.env.timeout(end - self.env.now)

    def kernel(self, endpoints, label, bytes_touched, launches=1, flops=0.0, library=False):
        """A GPU kernel of the codec (quantise, decode, cast; PowerSGD's products) on every
        endpoint at once: launch cost plus the bytes it reads and writes at the codec's
        bandwidth, or its FLOPs at flops_per_s where they take longer (a roofline).
        library: one of the framework's own kernels (an addition, a BLAS product, as the
        optimizer's update is), at the memory bandwidth instead of the codec's."""
        bandwidth = self.gpu_mem_bw if library else self.codec_bw
        seconds = (launches * self.kernel_launch + max(bytes_touched / bandwidth, flops / self.flops_per_s)) \
            * self.kernel_sharing
        self.codec_s += seconds
        return self._busy(endpoints, label, seconds)

    def repeat(self, rounds, step):
        """Run `step()`, a generator for one lock-step round, `rounds` times in a row.

        Fast path: rounds that do the same thing (the same transfers, reductions and kernels)
        on a network that carries nothing else take the same time and move the same bytes, so
        the first round is simulated and the other rounds - 1 are one wait (Replay.rounds),
        their codec time booked at once. Taken only when the network is idle as the rounds
        start; dpsim.replay says why that and no other traffic while they run make it exact."""
        if self.replay is None or rounds < 2 or not self.replay.idle():
            for _ in range(rounds):
                yield from step()
            return
        codec = self.codec_s
        yield from self.replay.rounds(rounds, step)
        self.codec_s += (rounds - 1) * (self.codec_s - codec)

    def together(self, rounds, moves, step, endpoints=None, added=0.0):
        """`rounds` identical steps of `moves`, each `step()` (and then, with `endpoints`, each
        endpoint adding `added` bytes, as send_reduce does), where other such collectives may
        run at the same time (ZeRO-3's backward). Fast path: a dpsim.duet Train, timed beside
        the others without SimPy. Otherwise, or when the duet's assumptions fail (not an Alike
        step this cluster's symmetry covers, other transfers in flight), repeat(rounds, step)."""
        train = self._train(rounds, moves, endpoints, added)
        if train is None:
            yield from self.repeat(rounds, step)
            return
        yield self.replay.duet.join(train)

    def _train(self, rounds, moves, endpoints, added):
        """The duet's Train of these steps (node 0's flows, one per kind, over channels of a
        kind's bandwidth times the nodes: dpsim.symmetry.simulate's network), or None."""
        replay = self.replay
        if replay is None or rounds < 1 or not isinstance(moves, Alike) or not self._symmetric(moves) \
                or self.net.in_flight or replay.owner is not None:
            return None
        staged = self.staging == "host"
        duet, cluster, overhead = replay.duet, self.cluster, self.message_overhead(staged)
        flows = []
        for src, dst, nbytes, weight in moves.representatives(cluster):
            route = self.route(src, dst, staged)
            hops = tuple(duet.number(symmetry.channel_kind(cluster, "all", ch), ch.bandwidth * cluster.nodes)
                         for ch in route)
            flows.append((hops, sum(ch.latency for ch in route) + overhead, float(nbytes), weight))
        if (moves, staged) not in duet.tallies:
            duet.tallies[moves, staged] = symmetry.simulate(self, moves, staged)[1]
        return Train(flows, rounds, self._ends(moves, endpoints, added), self.env.event(), duet.tallies[moves, staged])

    def _ends(self, moves, endpoints, added):
        """When a step that started at `start` and whose transfers arrived at `arrived` ends:
        then (a send), after the addition, or pipelined with it (send_reduce)."""
        if endpoints is None:
            return lambda start, arrived: arrived
        add = self._slowest_gamma(endpoints) * added
        if not self.segment:
            return lambda start, arrived: arrived + add
        message, segment = symmetry.largest(moves), self.segment
        return lambda start, arrived: start + pipelined(arrived - start, add, message, segment)
