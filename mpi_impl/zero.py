"""ZeRO stages 1, 2 and 3 (FSDP): data parallelism with the model's state sharded over ranks.

Rajbhandari, Rasley, Ruwase & He, "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", SC 2020; Zhao et al., "PyTorch FSDP", VLDB 2023.  Plain synchronous SGD
(sgd.py) keeps everything on every rank: parameters, gradients and the momentum.  Here the
flat parameter vector is cut into units (stages 1-2: the gradient buckets of sgd.plan_buckets,
one unit without --overlap; stage 3: one unit per layer, FSDP's wrapping), and every unit
into p chunks (device.chunk_bounds); rank r owns chunk r of every unit, its **shard**.

  stage 1  every rank keeps the whole parameters and the whole gradient.  After backward,
           reduce-scatter each unit's gradient (reduce_scatter.py): rank r gets the sum of
           its chunk; divide by p; momentum step on its shard with its shard of the momentum
           (the only state sharded); all-gather the updated parameters (all_gather.py).
  stage 2  the same, but a unit's whole gradient lives only until its reduce-scatter (with
           --overlap: as soon as backward has produced the unit, in the communication
           thread); between steps a rank holds only its shard of the gradient.
  stage 3  the parameters are sharded too.  Before a layer's forward its parameters are
           all-gathered into a fresh buffer, freed after the forward; gathered again before
           its backward; its gradient is reduce-scattered as soon as backward has produced
           it, and both are freed.  The momentum step updates the shard; nothing is gathered
           after it (the next forward does).

The arithmetic per element is sgd.py's (sum, times 1/p, v = momentum v + g, w -= lr v), so
the weights equal plain synchronous SGD's up to the order of the sums.

Cost per step (p ranks, m = bytes of the parameters, alpha/beta/gamma as in ring.py, u units):

    stage 1, 2:  u [(p - 1) alpha + (p - 1)/p m_u (beta + gamma)]     reduce-scatter
               + u [(p - 1) alpha + (p - 1)/p m_u beta]               all-gather
               = the ring all-reduce's bytes, 2 (p - 1)/p m per rank
    stage 3:     the same reduce-scatter, and two all-gathers per layer (forward, backward):
                 3 (p - 1)/p m bytes per rank, 3 (p - 1) alpha per layer

Memory per rank (s = bytes per value, n parameters, n/p meaning the sum over units of the
rank's chunk): stage 1: n s + n s + n/p s (parameters, gradient, momentum); stage 2:
n s + n/p s + n/p s; stage 3: 3 n/p s, plus the one or two layers gathered at a time.
:meth:`Zero.memory` measures the arrays a rank holds between steps.
"""
from __future__ import annotations

import contextlib
import time

from mpi4py import MPI

from .all_gather import all_gather
from .device import chunk_bounds, scratch
from .reduce_scatter import reduce_scatter
from .sgd import AfterBackward, BucketRunner, CommThread, plan_buckets
from .wire import make_wire

STAGES = {"zero1": 1, "zero2": 2, "zero3": 3}


class LayerByLayer(BucketRunner):
    """Stage 3: each layer's reduce-scatter runs in the training thread as soon as backward
    has produced it (the all-gathers of the next layers are collectives on the same
    communicator, so one thread keeps every rank's calls in the same order)."""
    name = "layer by layer"
    track = 0

    def __init__(self, zero):
        self.start = zero.reduce_bucket


class Zero:
    """The gradient sync and the optimizer of ZeRO stage 1, 2 or 3, in one object: train.py
    uses it both as the averager (begin, ready, finish) and as the optimizer (step)."""

    def __init__(self, net, comm, stage, lr, momentum, overlap=False, bucket_mib=25.0,
                 timeline=None):
        self.net, self.comm, self.stage = net, comm, stage
        self.lr, self.momentum, self.timeline = lr, momentum, timeline
        self.n, rank, xp = comm.Get_size(), comm.Get_rank(), net.xp
        self.wire = make_wire(comm, xp)
        if stage == 3:           # one unit per layer, in backward order
            self.buckets = [(lo, hi) for _, lo, hi in reversed(net.layer_offsets)]
        else:
            self.buckets = plan_buckets(net.layer_offsets, net.params.itemsize,
                                        bucket_mib if overlap else 0)
        self.layers_of = [[i for i, lo, hi in net.layer_offsets if a <= lo and hi <= b]
                          for a, b in self.buckets]
        self.mine, self.piece, offset = [], [], 0     # per unit: my chunk, its place in the shard
        for lo, hi in self.buckets:
            b = chunk_bounds(hi - lo, self.n)
            self.mine.append((lo + b[rank], lo + b[rank + 1]))
            self.piece.append((offset, offset + b[rank + 1] - b[rank]))
            offset += b[rank + 1] - b[rank]
        dtype = net.params.dtype
        self.velocity = xp.zeros(offset, dtype)                     # my shard of the momentum
        # my shard of the mean gradient: stage 1 reduces into its own chunks of the whole
        # gradient, stages 2-3 into an array of their own
        self.grad_shard = None if stage == 1 else xp.zeros(offset, dtype)
        self.param_shard = None
        self.unit_grads = [None] * len(self.buckets)               # stages 2-3: whole, until reduced
        if stage == 3:
            self.param_shard = xp.empty(offset, dtype)
            for (lo, hi), (a, b) in zip(self.mine, self.piece):
                self.param_shard[a:b] = net.params[lo:hi]
            for i, _, _ in net.layer_offsets:
                net.bind_layer(i, params=None)
            net.params = None
        if stage >= 2:
            for i, _, _ in net.layer_offsets:
                net.bind_layer(i, grads=None)
            net.grads = None
            net.hooks = self
        threads_ok = MPI.Query_thread() >= MPI.THREAD_SERIALIZED    # else no second thread
        overlap = overlap and threads_ok and len(self.buckets) > 1
        self.runner = (LayerByLayer(self) if stage == 3 else
                       CommThread(self) if overlap else AfterBackward(self))
        self.bytes_sent, self.codec_s, self.started = 0, 0.0, 0
        self.computing = False           # between begin() and finish(): forward + backward

    @property
    def mode(self):
        return self.runner.name

    # ------------------------------------------------------------------ the layers' hooks
    def _unit_of(self, i):
        return next(u for u, layers in enumerate(self.layers_of) if i in layers)

    def _gather(self, u, purpose):
        """Unit u's whole parameters, all-gathered from every rank's shard into a new buffer."""
        lo, hi = self.buckets[u]
        a, b = self.piece[u]
        whole = self.net.xp.empty(hi - lo, self.velocity.dtype)
        start = time.perf_counter()
        before = self.wire.bytes_sent
        all_gather(self.param_shard[a:b], self.wire, whole)
        self.bytes_sent += self.wire.bytes_sent - before
        self._blocked(start, self._record(f"all-gather unit {u} ({purpose})", start, work="communication"))
        return whole

    def _bind_unit(self, u, params=False, grads=False):
        lo = self.buckets[u][0]
        for i, a, b in self.net.layer_offsets:
            if i in self.layers_of[u]:
                self.net.bind_layer(i, params=params if params is None or params is False
                                    else params[a - lo:b - lo],
                                    grads=grads if grads is None or grads is False else grads[a - lo:b - lo])

    def before_forward(self, i):
        if self.stage == 3:
            u = self._unit_of(i)
            self._bind_unit(u, params=self._gather(u, "forward"))

    def after_forward(self, i):
        if self.stage == 3:
            self._bind_unit(self._unit_of(i), params=None)          # freed

    def before_backward(self, i):
        u = self._unit_of(i)
        if self.stage == 3:
            self._bind_unit(u, params=self._gather(u, "backward"))
        if self.unit_grads[u] is None:             # the unit's last layer: backward starts it
            lo, hi = self.buckets[u]
            self.unit_grads[u] = self.net.xp.empty(hi - lo, self.velocity.dtype)
            self._bind_unit(u, grads=self.unit_grads[u])

    def after_backward(self, i):
        if self.stage == 3:
            self._bind_unit(self._unit_of(i), params=None)

    # ------------------------------------------------------------------ the averager's calls
    def begin(self, compressed=False):
        self.started = 0
        self.computing = True
        self.runner.begin()

    def ready(self, lo):
        if self.runner.during_backward:
            self._start_from(lo)

    def _start_from(self, lo):
        while self.started < len(self.buckets) and self.buckets[self.started][0] >= lo:
            self.runner.start(self.started)
            self.started += 1

    def finish(self):
        """Reduce-scatter what backward has not yet started; returns the seconds waited."""
        self.computing = False
        start = time.perf_counter()
        self._start_from(0)
        self.runner.wait()
        end = self._record("wait for gradient shards", start)
        if self.timeline is not None:
            self.timeline.count("exposed_comm", end - start)
        return end - start

    def reduce_bucket(self, u):
        """Unit u's gradient summed over ranks into my shard (reduce-scatter), divided by p;
        stages 2-3 then free the unit's whole gradient."""
        lo, hi = self.buckets[u]
        a, b = self.piece[u]
        whole = self.net.grads[lo:hi] if self.stage == 1 else self.unit_grads[u]
        start = time.perf_counter()
        before = self.wire.bytes_sent
        mine = self._gradient_shard(u)
        reduce_scatter(whole, self.wire, mine)
        mine *= 1.0 / self.n
        self.bytes_sent += self.wire.bytes_sent - before
        if self.stage >= 2:
            self._bind_unit(u, grads=None)
            self.unit_grads[u] = None
        self._blocked(start, self._record(f"reduce-scatter unit {u}", start, work="communication",
                                          track=self.runner.track, elements=hi - lo))

    def _gradient_shard(self, u):
        """My chunk of unit u's mean gradient: in the whole gradient (stage 1), or in the shard."""
        if self.stage == 1:
            return self.net.grads[self.mine[u][0]:self.mine[u][1]]
        return self.grad_shard[self.piece[u][0]:self.piece[u][1]]

    def _parameter_shard(self, u):
        """My chunk of unit u's parameters: in the whole parameters (stages 1-2), or the shard."""
        if self.stage == 3:
            return self.param_shard[self.piece[u][0]:self.piece[u][1]]
        return self.net.params[self.mine[u][0]:self.mine[u][1]]

    # ------------------------------------------------------------------ the optimizer's step
    def step(self):
        """Momentum step on my shard (sgd.MomentumSGD's arithmetic); stages 1-2 then
        all-gather the whole parameters."""
        xp = self.net.xp
        change = scratch(xp, "zero-step", self.velocity.size, self.velocity.dtype)
        for u, (a, b) in enumerate(self.piece):
            v = self.velocity[a:b]
            v *= self.momentum
            v += self._gradient_shard(u)
            xp.multiply(v, self.lr, out=change[a:b])
            self._parameter_shard(u)[...] -= change[a:b]
        if self.stage == 3:
            return
        start = time.perf_counter()
        before = self.wire.bytes_sent
        for u, (lo, hi) in enumerate(self.buckets):
            all_gather(self.net.params[self.mine[u][0]:self.mine[u][1]], self.wire,
                       self.net.params[lo:hi])
        self.bytes_sent += self.wire.bytes_sent - before
        end = self._record("all-gather parameters", start, work="communication")
        if self.timeline is not None:        # the loop's update span holds it: the wait is exposed_comm
            self.timeline.count("exposed_comm", end - start, inside="update")

    # ------------------------------------------------------------------ around the loop
    @contextlib.contextmanager
    def whole_model(self):
        """Stage 3: the whole parameters gathered onto every rank (collective) for evaluation
        and the final digest, freed again afterwards.  Stages 1-2 hold them already."""
        if self.stage != 3:
            yield
            return
        net = self.net
        net.hooks = None                  # the layers are whole: no gathers inside forward
        net.params = net.xp.empty(net.num_params, self.velocity.dtype)
        for u, (lo, hi) in enumerate(self.buckets):
            net.params[lo:hi] = self._gather(u, "whole model")
            self._bind_unit(u, params=net.params[lo:hi])
        try:
            yield
        finally:
            for u in range(len(self.buckets)):
                self._bind_unit(u, params=None)
            net.params, net.hooks = None, self

    def memory(self):
        """Bytes of the arrays this rank holds for parameters, gradients and optimizer state:
        the distinct buffers the layers' views point into, and the shards."""
        return held_memory(self.net, [self.param_shard], [self.grad_shard], [self.velocity])

    def _blocked(self, start, end):
        """Stage 3's gathers and reduce-scatters inside forward + backward block the loop (no
        thread of their own): exposed_comm, taken out of the compute span around them."""
        if self.timeline is not None and self.stage == 3 and self.computing:
            self.timeline.count("exposed_comm", end - start, inside="compute")

    def _record(self, name, start, work=None, track=0, **args):
        end = time.perf_counter()
        if self.timeline is not None:
            self.timeline.add(name, start, end, track=track, **args)
            if work:
                self.timeline.count(work, end - start)
        return end

    def close(self):
        self.runner.close()

    def state(self):
        return {}


def held_memory(net, params=(), grads=(), optimizer_state=()):
    """{"params", "grads", "optimizer_state"}: bytes of the distinct arrays behind the layers'
    parameter and gradient views (a view counts its whole base buffer once) and the arrays
    given, as held right now."""
    views = [[], []]
    for flat in net.flat_of.values():
        for k in (0, 1):
            if flat[k] is not None:
                views[k].append(flat[k])
    return {"params": _distinct_bytes(views[0] + list(params)),
            "grads": _distinct_bytes(views[1] + list(grads)),
            "optimizer_state": _distinct_bytes(list(optimizer_state))}


def _distinct_bytes(arrays):
    bases = {}
    for a in arrays:
        if a is None:
            continue
        while getattr(a, "base", None) is not None:
            a = a.base
        bases[id(a)] = a.nbytes
    return int(sum(bases.values()))
