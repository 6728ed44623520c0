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

Pipelining (`sync.segment_mib` > 0, as mpi_impl does by default and NCCL always does): a
step that receives a chunk and adds it (`send_reduce`) moves it in k segments and adds
segment s while segment s + 1 travels, so with T the transfer's time and G the addition's,
the step takes max(T, G) + min(T, G) / k instead of T + G.  Per-segment message costs are
left out (a segment of 1 MiB costs ~100x its latency on any of dpsim's links).

The fast path (`repeat`, with `fast=True`, the default): a collective made of identical
rounds (the 2(n-1) steps of a ring) is simulated one round in detail, and the other rounds
are one wait of the same length. See `repeat` for exactly when that is exact.
"""
from dataclasses import dataclass

from . import analytic, symmetry


@dataclass(frozen=True)
class AllPairs:
    """Every rank sends nbytes to every other rank (an all-to-all): a list of moves that
    Machine.send can also take whole, see dpsim.symmetry."""
    ranks: tuple
    nbytes: float

    def __iter__(self):
        return ((a, b, self.nbytes) for a in self.ranks for b in self.ranks if a != b)


class Machine:
    def __init__(self, env, net, cluster, gpu_mem_bw_gbs: float, host_mem_bw_gbs: float, trace=None,
                 staging="direct", message_overhead_us=0.0, kernel_launch_us=0.0, fast=True,
                 sharing=1.0, wakeup_s=0.0, codec_gbs=0.0, segment_bytes=0.0):
        self.env, self.net, self.cluster, self.trace = env, net, cluster, trace
        self.fast = fast            # False: simulate every round of every collective (the detailed path)
        self.replayed_rounds = 0    # rounds the fast path stood in for instead of simulating them
        self.gpu_mem_bw = gpu_mem_bw_gbs * 1e9
        self.codec_bw = (codec_gbs or gpu_mem_bw_gbs) * 1e9     # what the codec's kernels reach
        self._gamma = {"gpu": 3 / (gpu_mem_bw_gbs * 1e9), "host": 3 / (host_mem_bw_gbs * 1e9)}
        self.staging = staging
        self.overhead = message_overhead_us * 1e-6
        self.kernel_launch = kernel_launch_us * 1e-6
        self.codec_s = 0.0          # time spent in encode/decode kernels (compression), summed
        self.sharing = sharing      # ranks per device: device work (reduce, kernels) this much slower
        self.wakeup = wakeup_s      # per message between ranks: the receiver waits to be scheduled
        self.segment = segment_bytes  # pipeline segment of send_reduce; 0 = the textbook step
        self.steps = {}             # the fast path's remembered steps: (moves, staged) -> (seconds, log)

    def gamma(self, endpoint: str) -> float:
        """Seconds per byte reduced on this endpoint (a shared device's share of its speed)."""
        if endpoint.startswith("host"):
            return self._gamma["host"]
        return self._gamma["gpu"] * self.sharing

    def route(self, src, dst, staged):
        return self.cluster.route(src, dst, staged and src.startswith("gpu") and dst.startswith("gpu"))

    def send(self, moves, label="", staged=None):
        """Start every (src, dst, nbytes) transfer at once; an event for when all have arrived.
        staged: through host memory (default: as sync.staging says).

        Fast path: a step started on an idle network takes a time and moves bytes that depend
        on its transfers alone, so the first time a step is seen it is simulated and
        remembered, and the same step again is one wait of that time (see `_remembered`)."""
        staged = self.staging == "host" if staged is None else staged
        me = self.env.active_process
        if (self.fast and self.trace is None and me is not None and self.net.in_flight == 0
                and self.net.owner in (None, me)):
            if isinstance(moves, AllPairs) and self.net.idle() and list(moves.ranks) == self.cluster.gpus:
                return self._all_to_all(moves, staged)
            return self._remembered((tuple(moves), staged), moves, label, staged)
        return self._send(moves, label, staged)

    def message_overhead(self, staged) -> float:
        """Software seconds a message pays on top of its route's latency."""
        return (self.overhead if staged else 0.0) + self.wakeup

    def _send(self, moves, label, staged):
        overhead = self.message_overhead(staged)
        events = [self.net.transfer(self.route(s, d, staged), s, d, n, label, overhead) for s, d, n in moves]
        if staged and self.trace is not None:
            self._trace_staging(moves, events, overhead)
        return self.env.all_of(events)

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

    def _remembered(self, key, moves, label, staged):
        """A step on an idle network, simulated the first time and replayed after. Exact (up to
        rounding) when nobody else sends while it runs: like `repeat`, it makes its process the
        network's owner meanwhile, and a transfer from anyone else sets `net.disturbed`, which
        makes the engine redo the run on the detailed path. Inside a round that `repeat` is
        recording, the step's transfers join that round's log."""
        net, env = self.net, self.env
        if key in self.steps:
            seconds, log = self.steps[key]

            def book():
                net.count_again(log, 1)
                if net.log is not None:
                    net.log.extend(log)
            return self._replay(seconds, book)
        outer_owner, outer_log = net.owner, net.log
        net.owner, net.log = env.active_process, []
        start, done = env.now, self._send(moves, label, staged)

        def finish(_):
            log = net.log
            if not net.disturbed:
                self.steps[key] = (env.now - start, log)
            if outer_log is not None:
                outer_log.extend(log)
            net.owner, net.log = outer_owner, outer_log
        done.callbacks.append(finish)
        return done

    def _all_to_all(self, pairs, staged):
        """Every GPU to every other on an idle network, one transfer per kind (dpsim.symmetry),
        remembered like a step and replayed the same way."""
        key = (pairs, staged)
        if key not in self.steps:
            self.steps[key] = symmetry.all_to_all(self, pairs.nbytes, staged)
        seconds, carried = self.steps[key]
        sent, net = (len(pairs.ranks) - 1) * pairs.nbytes, self.net

        def book():
            for rank in pairs.ranks:
                net.bytes_sent[rank] = net.bytes_sent.get(rank, 0.0) + sent
            for ch, nbytes in carried.items():
                ch.bytes_carried += nbytes
        return self._replay(seconds, book)

    def _replay(self, seconds, book):
        """One wait of `seconds` standing in for a step, its process owning the network
        meanwhile (so anyone else's transfer shows as `net.disturbed`); `book()` books the
        step's bytes when the wait ends."""
        net = self.net
        outer_owner, net.owner = net.owner, self.env.active_process
        self.replayed_rounds += 1
        done = self.env.timeout(seconds)

        def finish(_):
            book()
            net.owner = outer_owner
        done.callbacks.append(finish)
        return done

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
        seconds = max((self.gamma(e) * nbytes for e in endpoints), default=0.0)
        if self.trace is not None:
            for e in endpoints:
                self.trace.span(e, label, now, now + self.gamma(e) * nbytes)
        return self.env.timeout(seconds)

    def send_reduce(self, moves, endpoints, nbytes, label=""):
        """One receive-and-add step: the transfers `moves` (as in send), then every endpoint
        adds `nbytes`.  Pipelined when self.segment > 0: max(T, G) + min(T, G) / k in all,
        k = segments of the largest message (see the module docstring)."""
        start = self.env.now
        yield self.send(moves, label)
        if not self.segment:
            yield self.reduce(endpoints, nbytes)
            return
        adds = {e: self.gamma(e) * nbytes for e in endpoints}
        message = moves.nbytes if isinstance(moves, AllPairs) else max((n for _, _, n in moves), default=0)
        end = start + analytic.pipelined(self.env.now - start, max(adds.values(), default=0.0),
                                         message, self.segment)
        if self.trace is not None:                  # each rank adds from its first segment on
            for e, seconds in adds.items():
                self.trace.span(e, "reduce", end - seconds, end)
        yield self.env.timeout(end - self.env.now)

    def kernel(self, endpoints, label, bytes_touched, launches=1):
        """A memory-bound GPU kernel (quantise, decode, cast) on every endpoint at once:
        launch cost plus the bytes it reads and writes at the codec's bandwidth."""
        seconds = (launches * self.kernel_launch + bytes_touched / self.codec_bw) * self.sharing
        self.codec_s += seconds
        return self._busy(endpoints, label, seconds)

    def repeat(self, rounds, step):
        """Run `step()`, a generator for one lock-step round, `rounds` times in a row.

        Fast path: rounds that do the same thing (the same transfers, reductions and kernels)
        on a network that carries nothing else take the same time and move the same bytes. So
        the first round is simulated in detail and the other rounds - 1 are one wait of
        (rounds - 1) x its duration, their bytes and codec time booked at once. That is exact
        (up to floating-point rounding) when
          - the network is idle when the first round starts (nothing in flight), and
          - no other process sends while the rounds run.
        It is taken only then, and only without a trace (a trace needs every round's spans),
        so the first condition and tracing fall back to the detailed path here. The second is
        checked as it happens: a transfer from another process sets `net.disturbed`, and the
        engine then reruns the whole simulation on the detailed path. Stragglers do not
        matter: a collective starts when the slowest GPU is ready and its rounds involve no
        compute."""
        net = self.net
        if not self.fast or self.trace is not None or rounds < 2 or not net.idle():
            for _ in range(rounds):
                yield from step()
            return
        start, codec = self.env.now, self.codec_s
        net.owner, net.log = self.env.active_process, []
        yield from step()
        log, net.log = net.log, None
        yield self.env.timeout((rounds - 1) * (self.env.now - start))
        net.owner = None
        net.count_again(log, rounds - 1)
        self.replayed_rounds += rounds - 1
        self.codec_s += (rounds - 1) * (self.codec_s - codec)
