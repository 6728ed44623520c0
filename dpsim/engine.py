"""The engine: warm-up and measured iterations of synchronous data-parallel training.

One iteration, as every GPU lives it (synchronous SGD: nobody starts iteration k+1 before
the averaged gradient of iteration k is applied):

    forward -> backward, producing gradient buckets -> sync every bucket -> update

Buckets are synchronised one after another in backward order (one communication stream, as
in NCCL and DDP). With `overlap = true` a bucket's sync starts as soon as backward has
produced it on every GPU, so communication hides behind the rest of backward; otherwise all
of it waits for the end of backward. The reduction kernels of a sync overlapping backward are
assumed not to slow backward down (NCCL uses a few SMs; we ignore them).

Where the time went (the breakdown) is measured on the critical path, so its parts add up to
the iteration time: `compute` (forward and backward), `exposed_comm` (communication the GPUs
wait for: the part of the sync not hidden behind backward, and DataParallel's scatter,
replicate and gather), `data_wait` (waiting for input), `update`.
"""
import simpy

from . import strategies, workload
from .cluster import Cluster
from .comm import Comm
from .network import Network
from .strategies import dataparallel

PHASES = ("compute", "data_wait", "exposed_comm", "update")


class Engine:
    def __init__(self, sc, trace=None):
        self.sc, self.trace = sc, trace
        self.env = simpy.Environment()
        c = sc.cluster
        self.cluster = Cluster(c.nodes, c.gpus_per_node, sc.link_spec("intra"), sc.link_spec("inter"),
                               sc.link_spec("host_link"), c.gpus_per_pcie_switch)
        self.net = Network(self.env, trace)
        self.comm = Comm(self.env, self.net, self.cluster, sc.gpu_spec().mem_bw_gbs, c.host_mem_bw_gbs, trace)
        self.work = workload.build(sc)
        self.ranks = self.cluster.gpus
        self.strategy = sc.sync.strategy
        self.allreduce = strategies.allreduce_for(sc.sync) if len(self.ranks) > 1 else None

    # -- pieces of an iteration
    def _compute(self, name, seconds, lanes=None):
        now = self.env.now
        if self.trace is not None:
            for lane in lanes or self.ranks:
                self.trace.span(lane, name, now, now + seconds)
        return self.env.timeout(seconds)

    def _communicate(self, gen, phases):
        start = self.env.now
        yield from gen
        phases["exposed_comm"] += self.env.now - start

    def sync_gradients(self, backward_start):
        """Synchronise every bucket in order, each once it is ready (or after backward)."""
        w, overlap = self.work, self.sc.sync.overlap
        for bucket in w.buckets:
            ready = backward_start + (bucket.ready_s if overlap else w.backward_s)
            if ready > self.env.now:
                yield self.env.timeout(ready - self.env.now)
            yield from self.allreduce(self.comm, self.ranks, bucket.nbytes)

    def iteration(self, phases):
        env, w, batch = self.env, self.work, self.sc.training.batch_per_gpu
        dp = self.strategy == "dataparallel" and self.allreduce is not None
        if dp:
            yield from self._communicate(
                dataparallel.pre_forward(self.comm, self.ranks, w.grad_bytes, batch * w.input_bytes), phases)
        yield self._compute("forward", w.forward_s)
        phases["compute"] += w.forward_s
        if dp:
            yield from self._communicate(dataparallel.post_forward(self.comm, self.ranks, batch * w.output_bytes), phases)
        backward_start = env.now
        sync = env.process(self.sync_gradients(backward_start)) if self.allreduce else None
        yield self._compute("backward", w.backward_s)
        phases["compute"] += w.backward_s
        if sync is not None:
            yield sync
            phases["exposed_comm"] += env.now - (backward_start + w.backward_s)
        yield self._compute("update", w.update_s, self.ranks[:1] if dp else None)
        phases["update"] += w.update_s

    # -- whole runs
    def run(self) -> dict:
        """Warm up, then measure; per-iteration means."""
        t = self.sc.training
        out = {}

        def main():
            scratch = dict.fromkeys(PHASES, 0.0)
            for _ in range(t.warmup_iterations):
                yield from self.iteration(scratch)
            start, sent_before = self.env.now, dict(self.net.bytes_sent)
            phases = dict.fromkeys(PHASES, 0.0)
            for _ in range(t.iterations):
                yield from self.iteration(phases)
            out["iteration_time_s"] = (self.env.now - start) / t.iterations
            out["breakdown_s"] = {k: v / t.iterations for k, v in phases.items()}
            sent = [self.net.bytes_sent.get(r, 0.0) - sent_before.get(r, 0.0) for r in self.ranks]
            out["bytes_sent_per_gpu"] = sum(sent) / len(sent) / t.iterations

        self.env.process(main())
        self.env.run()
        return out

    def sync_alone(self) -> float:
        """Seconds for one gradient synchronisation with nothing else running."""
        if self.allreduce is None:
            return 0.0

        def main():
            if self.strategy == "dataparallel":
                yield from dataparallel.chain(self.comm, self.ranks, self.work.grad_bytes, False, "replicate")
            for bucket in self.work.buckets:
                yield from self.allreduce(self.comm, self.ranks, bucket.nbytes)

        self.env.process(main())
        self.env.run()
        return self.env.now
