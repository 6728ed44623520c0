"""The engine: warm-up and measured iterations of synchronous data-parallel training.

One iteration, as every GPU lives it (synchronous SGD: nobody starts iteration k+1 before
the averaged gradient of iteration k is applied):

    next batch -> forward -> backward, producing gradient buckets -> sync every bucket -> update

Buckets are synchronised one after another in backward order (one communication stream, as
in NCCL and DDP). With `overlap = true` a bucket's sync starts as soon as backward has
produced it on every GPU, so communication hides behind the rest of backward; otherwise all
of it waits for the end of backward. The kernels of a sync that overlaps backward are
slow backward down by the SMs and memory bandwidth they take (dpsim.contention).
With training.accumulation_steps = k, k - 1 micro-batches compute (forward and backward)
without a sync before the one above: one sync per k micro-batches.
With training.double_buffering (Seide et al., Interspeech 2014, section 2.2) the batch runs
as two halves, each the step above with the sync left running: a half's sync goes on while
the next half computes, one after another on one communication stream, and its update is
applied after that next half (a delayed update). A half then costs max(compute + update, sync).

GPUs can differ: `cluster.gpu_speed` gives each a speed factor and `compute.jitter` draws a
random factor per GPU and iteration (seeded). Every step waits for the slowest GPU.

Where the time went (the breakdown, dpsim.vocabulary.BREAKDOWN) is measured on the critical
path, so its parts add up to the iteration time:
  data_wait       waiting for the input pipeline and the host-to-GPU copy
  compute         forward and backward of the average GPU
  straggler_wait  how much longer the slowest GPU computed than the average one
  exposed_comm    communication the GPUs wait for (the part of the sync not hidden behind
                  backward; what a strategy's hooks move before and after forward)
  compression     encode/decode kernels on the critical path (1-bit, FP16): the wait after
                  backward is split by vocabulary.split_sync_wait, as mpi_impl splits its own
  update          the optimizer step on the GPUs

Speed: collectives made of identical rounds (ring, hierarchical) simulate one round and
replay the rest, a step seen before is replayed from memory, and a step whose nodes all do the
same (an all-to-all, a ring step, a doubling exchange, a parameter server's gather) is one flow
per kind of transfer, its bytes booked when read (dpsim.replay, dpsim.symmetry, dpsim.ledger). `Engine(sc, fast=False)`
simulates every transfer instead (the detailed path); both give the same results up to
rounding, and a run whose replay turned out to share the network is redone on the detailed
path by itself (Engine.settled). `python -m dpsim.bench` measures both.
"""
import random

import simpy

from . import contention, derived, software, strategies, transports, workload
from .cluster import Cluster
from .machine import Machine
from .network import Network
from .pipeline import InputPipeline
from .results import Run
from .vocabulary import BREAKDOWN, split_sync_wait


def build_cluster(sc) -> Cluster:
    """The scenario's cluster, its links as the ranks see them (dpsim.derived)."""
    c = sc.cluster
    intra, host_link = derived.node_links(sc)
    inter = transports.inter_link(sc)
    return Cluster(c.nodes, c.gpus_per_node, intra, inter, host_link, c.gpus_per_pcie_switch,
                   c.nics_per_node, transports.gpudirect(sc, derived.gpudirect(c.gpudirect, inter)),
                   c.server_nodes, c.sockets, sc.link_spec("socket_link"), sc.sync.ring_order)


class Engine:
    """`fast=False` forces the detailed path: every round of every collective simulated (see
    dpsim.replay for when the fast path is exact; results agree to rounding)."""

    def __init__(self, sc, trace=None, fast=True, progress=None):
        self.sc, self.trace, self.progress = sc, trace, progress
        self.fell_back = False      # a replay was disturbed and the run was redone in detail
        self.env = simpy.Environment()
        s = sc.sync
        self.cluster = build_cluster(sc)
        self.net = Network(self.env, trace)
        self.machine = Machine.for_scenario(sc, self.env, self.net, self.cluster, trace, fast)
        self.work = workload.build(sc)
        self.ranks = self.cluster.gpus
        self.cpu_update = s.update_location == "cpu"
        cpu_update_s = derived.cpu_update_s_per_param(sc)
        many = len(self.ranks) > 1
        self.allreduce = strategies.allreduce_for(s, None, cpu_update_s, self.work.buckets) if many else None
        self.allreduce_full = strategies.allreduce_for(s, "none", cpu_update_s) if many else None
        self.pull = strategies.pull_for(s) if many else None
        hook = lambda name: strategies.hook(s.strategy if many else "none", name)
        self.before_forward, self.after_forward = hook("before_forward"), hook("after_forward")
        self.broadcast_weights = hook("broadcast_weights")
        self.forward_pass, self.backward_pass = hook("forward_pass"), hook("backward_pass")   # ZeRO-3's
        self.updaters = [] if self.cpu_update else hook("updaters")(self.ranks)
        self.pipeline = InputPipeline(self.env, sc, self.machine, self.work, self.ranks)
        self.rng = random.Random(sc.training.seed)
        self.slowness = derived.slowness(sc)        # shared devices (dpsim.sharing) over speed factors
        # each GPU's compute jitter: compute.shared_jitter for ranks that share their device
        self.jitters = [sc.compute.shared_jitter if shared and sc.compute.shared_jitter else sc.compute.jitter
                        for shared in derived.shared_ranks(sc)]
        self.update_s = self.work.update_s * derived.device_sharing(sc) * hook("update_fraction")(len(self.ranks))
        self.global_batch = sc.training.batch_per_gpu * len(self.ranks) * sc.training.accumulation_steps
        self.call_s = software.call_overhead_s(sc)
        self.contended = contention.applies(sc)
        self.syncing = []           # (start, end, bytes sent) of this iteration's bucket syncs
        self.codec_ran = False      # this iteration's sync ran a codec's kernels
        self.pending = None         # double buffering: (the last half's sync, the codec seconds before it)

    # -- pieces of an iteration
    def _factors(self):
        """Each GPU's compute-time multiplier for this iteration."""
        if not any(self.jitters):
            return self.slowness
        return [s * max(0.05, self.rng.gauss(1.0, j)) for s, j in zip(self.slowness, self.jitters)]

    def _compute(self, name, seconds, factors, lanes=None):
        """Every GPU (or `lanes`) computes; returns the event of the slowest finishing."""
        now = self.env.now
        if self.trace is not None:
            for lane, f in zip(lanes or self.ranks, factors):
                self.trace.span(lane, name, now, now + seconds * f)
        return self.env.timeout(seconds * max(factors))

    def _communicate(self, gen, phases):
        start = self.env.now
        yield from gen
        phases["exposed_comm"] += self.env.now - start

    def sync_gradients(self, backward_start, slowest, allreduce, after=None):
        """Synchronise every bucket in order, each once it is ready (or after backward) and its
        framework launches it (dpsim.software), each call paying its fixed cost; every
        bucket's (start, end, bytes GPU 0 sent) goes to self.syncing (dpsim.contention).
        `after`: a sync still running on the same communication stream, to wait for first."""
        w, s, env = self.work, self.sc.sync, self.env
        if after is not None:
            yield after
        for bucket in w.buckets:
            ready = backward_start + software.cycle_start((bucket.ready_s if s.overlap else w.backward_s) * slowest, s)
            if ready > env.now:
                yield env.timeout(ready - env.now)
            start, sent = env.now, self.machine.sent(self.ranks[0])
            if self.call_s:
                yield env.timeout(bucket.calls * self.call_s)
            yield from allreduce(self.machine, self.ranks, bucket.nbytes)
            self.syncing.append((start, env.now, self.machine.sent(self.ranks[0]) - sent))

    def _contention(self, backward_start, factors, phases):
        """Stretch backward by what the syncs it overlapped took from it (dpsim.contention)."""
        busy, rate = contention.overlap(self.syncing, backward_start, self.env.now)
        extra = busy * contention.slowdown(self.sc, rate)
        if extra > 0:
            yield self._compute("contention", extra, [1.0] * len(factors))
            phases["compute"] += extra

    def micro_batches(self, factors, phases):
        """Gradient accumulation: the first k - 1 micro-batches compute without a sync."""
        w, mean, slowest = self.work, sum(factors) / len(factors), max(factors)
        for _ in range(self.sc.training.accumulation_steps - 1):
            start = self.env.now
            yield from self.pipeline.next_batch()
            phases["data_wait"] += self.env.now - start
            yield self._compute("forward+backward", w.forward_s + w.backward_s, factors)
            phases["compute"] += (w.forward_s + w.backward_s) * mean
            phases["straggler_wait"] += (w.forward_s + w.backward_s) * (slowest - mean)

    def _layered(self, name, passing, seconds, factors, slowest, phases):
        """A pass the strategy runs unit by unit (ZeRO-3: gather, compute, reduce-scatter): the
        time beyond its compute on the slowest GPU is communication the GPUs wait for."""
        start = self.env.now
        compute = lambda s: self._compute(name, s, factors)
        yield from passing(self.machine, self.ranks, self.work, compute, self.sc.sync.overlap, self.allreduce)
        phases["exposed_comm"] += self.env.now - start - seconds * slowest

    def _backward_and_sync(self, k, factors, slowest, phases):
        """Backward, with every bucket's sync started once it is ready; then the wait for the sync."""
        env, w = self.env, self.work
        backward_start, codec_before = env.now, self.machine.codec_s
        if self.allreduce is not None:
            compressed = k * self.global_batch >= self.sc.sync.warmup_samples
            sync = env.process(self.sync_gradients(backward_start, slowest,
                                                   self.allreduce if compressed else self.allreduce_full))
        yield self._compute("backward", w.backward_s, factors)
        if self.allreduce is not None and self.contended:
            yield from self._contention(backward_start, factors, phases)
        backward_end = env.now
        if self.allreduce is not None:
            yield sync
            self.syncing.clear()
            wait = env.now - backward_end
            exposed, codec = split_sync_wait(wait, self.machine.codec_s - codec_before)
            self.codec_ran = self.machine.codec_s > codec_before
            phases["compression"] += codec
            phases["exposed_comm"] += exposed

    def _update(self, phases):
        if self.updaters:
            # after a codec the update reads its arrays from memory (compute.update_after_codec)
            update_s = self.update_s * (1.0 + self.sc.compute.update_after_codec * self.codec_ran)
            yield self._compute("update", update_s, [1.0] * len(self.updaters), self.updaters)
            phases["update"] += update_s

    def _half(self, k, factors, slowest, mean, phases):
        """One half of a double-buffered batch: forward and backward, its sync started behind
        the last half's; then the wait for the last half's sync and that half's update."""
        env, w = self.env, self.work
        yield self._compute("forward", w.forward_s, factors)
        backward_start = env.now
        if self.allreduce is not None:
            compressed = k * self.global_batch >= self.sc.sync.warmup_samples
            last = self.pending[0] if self.pending else None
            started = (env.process(self.sync_gradients(backward_start, slowest, self.allreduce if compressed
                                                       else self.allreduce_full, after=last)),
                       self.machine.codec_s)
        yield self._compute("backward", w.backward_s, factors)
        if self.allreduce is not None and self.contended:
            yield from self._contention(backward_start, factors, phases)
        phases["compute"] += (w.forward_s + w.backward_s) * mean
        phases["straggler_wait"] += (w.forward_s + w.backward_s) * (slowest - mean)
        if self.allreduce is None:
            yield from self._update(phases)
            return
        if self.pending:
            sync, codec_before = self.pending
            waited = env.now
            yield sync
            exposed, codec = split_sync_wait(env.now - waited, self.machine.codec_s - codec_before)
            self.codec_ran = self.machine.codec_s > codec_before
            phases["compression"] += codec
            phases["exposed_comm"] += exposed
            yield from self._update(phases)
        self.syncing.clear()
        self.pending = started

    def iteration(self, k, phases):
        env, w, batch = self.env, self.work, self.sc.training.batch_per_gpu
        factors = self._factors()
        slowest, mean = max(factors), sum(factors) / len(factors)
        if self.sc.training.double_buffering:
            start = env.now
            yield from self.pipeline.next_batch()
            phases["data_wait"] += env.now - start
            for _ in range(2):
                yield from self._half(k, factors, slowest, mean, phases)
            return
        yield from self.micro_batches(factors, phases)
        start = env.now
        yield from self.pipeline.next_batch()
        phases["data_wait"] += env.now - start
        yield from self._communicate(self.before_forward(self.machine, self.ranks, w, batch), phases)
        if self.pull is not None:
            yield from self._communicate(self.pull(self.machine, self.ranks, w.grad_bytes), phases)
        if self.forward_pass is None:
            yield self._compute("forward", w.forward_s, factors)
        else:
            yield from self._layered("forward", self.forward_pass, w.forward_s, factors, slowest, phases)
        phases["compute"] += w.forward_s * mean
        phases["straggler_wait"] += w.forward_s * (slowest - mean)
        yield from self._communicate(self.after_forward(self.machine, self.ranks, w, batch), phases)
        if self.backward_pass is None:
            yield from self._backward_and_sync(k, factors, slowest, phases)
        else:
            yield from self._layered("backward", self.backward_pass, w.backward_s, factors, slowest, phases)
        phases["compute"] += w.backward_s * mean
        phases["straggler_wait"] += w.backward_s * (slowest - mean)
        yield from self._update(phases)

    # -- whole runs
    def window(self) -> tuple[int, int]:
        """(warm-up, measured) iteration counts. With loader workers, batches arrive in bursts:
        W workers sharing cores finish their batches together, once per cycle of W iterations.
        A window shorter than a cycle, or one that starts inside the first burst, would report
        the burst's rate, not the steady state's; so with real data and W workers we warm up
        for at least 2W iterations and measure a whole number of cycles."""
        t, d = self.sc.training, self.sc.data
        if d.source != "real" or d.workers <= 1:
            return t.warmup_iterations, t.iterations
        cycle = d.workers
        return max(t.warmup_iterations, 2 * cycle), -(-t.iterations // cycle) * cycle

    def settled(self, simulate):
        """simulate(engine) on this engine; if a replay turned out to share the network (another
        process sent while it stood in for a collective), simulate(a new engine on the detailed
        path) instead, with the same trace and progress."""
        out = simulate(self)
        if not self.machine.disturbed:
            return out
        self.fell_back = True
        return simulate(type(self)(self.sc, self.trace, fast=False, progress=self.progress))

    def run(self) -> Run:
        """Warm up, then measure; per-iteration means."""
        return self.settled(type(self)._measure)

    def sync_alone(self) -> float:
        """Seconds for one gradient synchronisation with nothing else running."""
        if self.allreduce is None:
            return 0.0
        return self.settled(type(self)._sync_once)

    def _measure(self) -> Run:
        warmup, measured = self.window()
        if self.trace is not None:
            self.trace.warmup_iterations = warmup
        out = []

        def main():
            scratch = dict.fromkeys(BREAKDOWN, 0.0)
            for k in range(warmup):
                yield from self.iteration(k, scratch)
                self._report(k + 1, warmup + measured)
            start, sent_before = self.env.now, dict(self.machine.bytes_sent())
            phases = dict.fromkeys(BREAKDOWN, 0.0)
            for k in range(warmup, warmup + measured):
                yield from self.iteration(k, phases)
                self._report(k + 1, warmup + measured)
            sent_now = self.machine.bytes_sent()
            sent = [sent_now.get(r, 0.0) - sent_before.get(r, 0.0) for r in self.ranks]
            out.append(Run((self.env.now - start) / measured, {k: v / measured for k, v in phases.items()},
                           sum(sent) / len(sent) / measured))

        self.env.run(until=self.env.process(main()))    # loader workers run forever; stop with main
        return out[0]

    def _report(self, done, total):
        if self.progress is not None:
            self.progress(done, total)

    def _sync_once(self) -> float:
        def main():
            yield from self.broadcast_weights(self.machine, self.ranks, self.work)
            for bucket in self.work.buckets:
                yield self.env.timeout(bucket.calls * self.call_s)
                yield from self.allreduce(self.machine, self.ranks, bucket.nbytes)

        self.env.run(until=self.env.process(main()))
        return self.env.now

    @property
    def path(self) -> str:
        """Which path the last run took: "fast" if some rounds were replayed, else "detailed"."""
        return "fast" if self.machine.replayed_rounds and not self.fell_back else "detailed"
