"""The pipelined receive-and-add step: what ``wire.sendrecv_add`` does with a ring step.

Read it beside ring.py.  In a reduce-scatter step a rank sends one chunk and receives
another, which it adds to its own copy.  The textbook step moves the whole chunk, then adds
the whole chunk; with T the chunk's transfer time (alpha + c beta for c bytes) and G its
addition (c gamma):

    T_step = T + G

The pipelined step cuts the chunk into k segments of ``wire.segment`` bytes and adds
segment s while segment s + 1 travels.  Per segment, transfer and addition overlap, so

    T_step = max(T, G) + min(T, G) / k

with T paying k latencies instead of one (every segment is a message).  dpsim models the
same step (``Machine.send_reduce`` with ``sync.segment_mib``, ``dpsim.analytic.pipelined``)
and leaves those k - 1 extra latencies out.  Two segments are received at a time, in two
slots: segment s + 1 is posted before segment s is added, and slot s % 2 is reused by
segment s + 2 only after segment s was added.  On a CPU much of the gain is the cache: a
segment is added while it is still in L2, not read back from memory.  Without host staging
every send of the step is posted at its start and awaited at its end: between ranks of one
machine the receiver copies each segment out of the sender's memory when it is ready for
it, without waiting for the sender to be running again to post the next one (on a machine
shared with other jobs, or with more ranks than cores, that wait is the cost of a segment).  With host staging (GPU arrays, MPI not
CUDA-aware) a segment's copies to and from the host are part of its transfer, so they
overlap the neighbouring segments too.

Many messages at once (sharded-ps's phase 1: a copy of my shard from every other rank)
work the same way: segment s of every message travels while segment s - 1 of every copy is
added, the copies in the order of `sources`, so the result has the same bits whatever order
they land in.

**Adding in place.**  A rank's first step adds its own input (`base`) to what arrives.
Adding into a third array moves 4 bytes of memory per byte added (the destination's cache
line is read before it is written), where the cost model counts 3.  So when base is
separate memory, the first copy lands in the result (`into`) itself and base is added to it
in place ("straight"); only further copies land in scratch ("landing").
"""
from __future__ import annotations

from mpi4py import MPI

from .device import overlaps, scratch


class PipelinedReceiveAdd:
    """into = base + the copy of `into` that each rank in `sources` sends, while every
    (array, dest) of `sends` goes out, segment by segment (see the module docstring).

    Each side cuts its own messages into segments of ``wire.segment`` bytes, so the counts
    match.  base None: receive only (one source, nothing added), which pipelines the host
    copies of a staged sendrecv."""

    def __init__(self, wire, sends, sources, into, base):
        self.wire, self.sends, self.sources, self.into, self.base = wire, sends, sources, into, base
        self.seg = max(1, wire.segment // into.itemsize)          # elements per segment
        self.straight = base is None or not overlaps(wire.xp, base, into)
        self.apart = len(sources) - self.straight       # copies landing in scratch, per segment
        self.landing = None                              # two slots of `apart` segments each
        if self.apart:
            self.landing = scratch(wire.xp, "landing", 2 * self.apart * self.seg, into.dtype)
        self.receives = self.count(into)                # segments to receive
        self.steps = max([self.receives] + [self.count(a) for a, _ in sends])

    def cut(self, a, i):
        """Segment i of a."""
        return a[i * self.seg:(i + 1) * self.seg]

    def count(self, a):
        """Segments of a (0 for an empty message)."""
        return -(-a.size // self.seg)

    def run(self):
        """The whole step: segment i + 1 is posted before segment i is added.  Without host
        staging every send is posted at the start and awaited at the end (a send needs no
        slot): the receiver then copies each segment when it is ready for it, without
        waiting for this rank to be running and to post the next one."""
        wire = self.wire
        wire.bytes_sent += sum(a.nbytes for a, dest in self.sends if dest != wire.rank)
        wire.wait_for_device()                  # send's data (and base) are computed
        early = [] if wire.stage else [wire.comm.Isend(self.cut(a, i), dest, 0)
                                       for a, dest in self.sends for i in range(self.count(a))]
        pending = self.post(0, not early) if self.steps else None
        for i in range(self.steps):
            ahead = self.post(i + 1, not early) if i + 1 < self.steps else None
            self.add(i, *pending)
            pending = ahead
        MPI.Request.Waitall(early)

    def post(self, i, sends=True):
        """Start segment i: its receives, and its sends unless they were posted at the start.
        Slot i % 2 is free again: its last user, segment i - 2, was delivered and added
        before this is called."""
        wire, slot = self.wire, i % 2
        size = self.cut(self.into, i).size
        targets = [self.cut(self.into, i)] if self.straight else []
        targets += [self.landing[(slot * self.apart + k) * self.seg:][:size] for k in range(self.apart)]
        if wire.stage:
            wire.wait_for_device()              # the GPU has finished copying slot i % 2 up
        hosts = [wire.incoming(t, f"recv{k}.{slot}") for k, t in enumerate(targets)]
        requests = []
        if i < self.receives:
            requests += [wire.comm.Irecv(h, source, 0) for h, source in zip(hosts, self.sources)]
        requests += [wire.comm.Isend(wire.outgoing(self.cut(a, i), f"send{k}.{slot}"), dest, 0)
                     for k, (a, dest) in enumerate(self.sends) if sends and i < self.count(a)]
        return requests, targets, hosts

    def add(self, i, requests, targets, hosts):
        """Finish segment i: wait for its messages, deliver what arrived and add it up."""
        MPI.Request.Waitall(requests)
        if i >= self.receives:
            return
        for host, target in zip(hosts, targets):
            self.wire.deliver(host, target)
        if self.base is None:
            return
        xp, out, first = self.wire.xp, self.cut(self.into, i), targets[0]
        if self.straight:
            xp.add(first, self.cut(self.base, i), out=out)
        else:
            xp.add(self.cut(self.base, i), first, out=out)
        for copy in targets[1:]:
            xp.add(out, copy, out=out)
