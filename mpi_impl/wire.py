"""The one door through which every algorithm talks to MPI: the :class:`Wire`.

An algorithm does its arithmetic with ``xp`` (device.py) and sends its messages through a
Wire, which hides how GPU memory reaches MPI:

* **host staging** (the default for GPU arrays): wait for the GPU, copy the data into a
  host buffer (pinned memory, allocated once and reused), call MPI on the host buffer, copy
  what arrived back to the GPU;
* **CUDA-aware MPI** (``cuda_aware=True`` or ``MPI_IMPL_CUDA_AWARE=1``): wait for the GPU,
  then hand the GPU array to MPI directly (mpi4py understands ``__cuda_array_interface__``).

In both cases the current CUDA stream is synchronised before each MPI call, because MPI
knows nothing about CUDA streams and would otherwise read half-computed data.

A step that receives a chunk and adds it (ring, halving-doubling, sharded-ps) calls
:meth:`Wire.sendrecv_add` (or :meth:`Wire.exchange_add`, the same for many messages at
once), which runs it in segments of ``wire.segment`` bytes (pipeline.py: per segment, the
transfer overlaps the addition).  ``segment = 0`` is the textbook step, as dpsim's
``sync.segment_mib = 0``: send the whole chunk, wait, then add.
"""
from __future__ import annotations

import os

import numpy as np
from dpsim import vocabulary
from mpi4py import MPI

from .device import scratch, stream_synchronizer
from .pipeline import PipelinedReceiveAdd

#: Bytes per pipeline segment: dpsim.vocabulary's 1 MiB, shared with the simulator.
#: ``mpiexec -n 2 python -m mpi_impl.bench --algo ring --sizes 16M --segment 64K,256K,1M,4M,none``
#: compares sizes on your machine.
SEGMENT_BYTES = vocabulary.SEGMENT_BYTES


def segment_bytes(segment) -> int:
    """Bytes per pipeline segment as a Wire keeps them: 0 for the textbook step (None means
    0 too); anything below 0 is refused."""
    if segment is None:
        return 0
    if int(segment) < 0:
        raise ValueError(f"segment must be a number of bytes (0 for the textbook step), not {segment!r}")
    return int(segment)


def cuda_aware_from_env() -> bool:
    """Whether the user said their MPI accepts GPU pointers (``MPI_IMPL_CUDA_AWARE=1``)."""
    return os.environ.get("MPI_IMPL_CUDA_AWARE", "").strip().lower() in ("1", "true", "yes", "on")


def make_wire(comm, xp, cuda_aware: bool | None = None, segment: int | None = SEGMENT_BYTES) -> "Wire":
    """A Wire for arrays of module xp: staged through host memory unless MPI is CUDA-aware."""
    if cuda_aware is None:
        cuda_aware = cuda_aware_from_env()
    return Wire(comm, xp, stage=(xp.__name__ != "numpy" and not cuda_aware), segment=segment)


class Wire:
    """MPI point-to-point and collective calls on array views, for NumPy and CuPy alike.

    ``stage=True`` copies through host buffers (what a GPU array needs unless MPI is
    CUDA-aware).  ``segment``: bytes per pipeline segment, 0 (or None) for whole messages.
    ``bytes_sent`` counts the bytes this rank handed to MPI for other ranks.
    Only uppercase (buffer) mpi4py calls are used: no pickling on the data path.
    """

    def __init__(self, comm, xp=np, stage: bool = False, segment: int | None = SEGMENT_BYTES):
        self.comm = comm
        self.xp = xp
        self.stage = stage
        self.segment = segment_bytes(segment)
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.bytes_sent = 0
        self.bytes_staged = 0  # host<->device copies, for the curious and for tests
        self.wait_for_device = stream_synchronizer(xp)

    # -- staging: what MPI reads from and writes into ---------------------------------------
    def outgoing(self, a, slot):
        """A buffer MPI may read with a's contents: a itself, or a host copy of it."""
        if not self.stage:
            return a
        host = scratch(self.xp, "host:" + slot, a.size, a.dtype)
        if hasattr(a, "get"):      # CuPy: device -> host
            a.get(out=host)
        else:                      # NumPy standing in for a device (tests)
            np.copyto(host, a)
        self.bytes_staged += a.nbytes
        return host

    def incoming(self, a, slot):
        """A buffer MPI may write into for a: a itself, or a host buffer to copy back later."""
        if not self.stage:
            return a
        return scratch(self.xp, "host:" + slot, a.size, a.dtype)

    def deliver(self, host, a):
        """Copy data that arrived in a host buffer back into a (no-op without staging)."""
        if not self.stage:
            return
        if hasattr(a, "set"):      # CuPy: host -> device
            a.set(host)
        else:
            np.copyto(a, host)
        self.bytes_staged += a.nbytes

    # -- the MPI calls the algorithms use --------------------------------------------------
    def sendrecv(self, send, dest: int, recv, source: int):
        """Send `send` to rank dest while receiving `recv` from rank source."""
        if self.stage and self.segment:        # copies to and from the host overlap MPI
            return PipelinedReceiveAdd(self, [(send, dest)], [source], recv, base=None).run()
        if dest != self.rank:
            self.bytes_sent += send.nbytes
        self.wait_for_device()
        out, into = self.outgoing(send, "send"), self.incoming(recv, "recv")
        self.comm.Sendrecv(out, dest, 0, into, source, 0)
        self.deliver(into, recv)

    def sendrecv_add(self, send, dest: int, into, source: int, base=None):
        """Send `send` to rank dest; receive as many values as `into` holds from rank source
        and store ``base + received`` in `into` (base defaults to into: add in place).

        Pipelined in segments of self.segment bytes (pipeline.py).  With segment 0, the
        textbook step: the whole message, then the whole addition."""
        return self.exchange_add([(send, dest)], [source], into, base)

    def exchange_add(self, sends, sources, into, base=None):
        """Send every (array, dest) of `sends` and receive a copy as long as `into` from
        every rank in `sources`, all at once; store ``base + the copies`` in `into`, added
        in the order of `sources` (the same bits whatever order they land in).  base
        defaults to into: add in place.  sendrecv_add is this with one message each way."""
        base = into if base is None else base
        if self.segment:
            return PipelinedReceiveAdd(self, sends, sources, into, base).run()
        landing = scratch(self.xp, "landing", len(sources) * into.size, into.dtype)
        copies = [landing[k * into.size:(k + 1) * into.size] for k in range(len(sources))]
        self.exchange(sends, list(zip(copies, sources)))
        self.xp.add(base, copies[0], out=into)
        for copy in copies[1:]:
            self.xp.add(into, copy, out=into)

    def send(self, a, dest: int):
        self.bytes_sent += a.nbytes
        self.wait_for_device()
        self.comm.Send(self.outgoing(a, "send"), dest, 0)

    def recv(self, a, source: int):
        self.wait_for_device()
        into = self.incoming(a, "recv")
        self.comm.Recv(into, source, 0)
        self.deliver(into, a)

    def exchange(self, sends, receives, arrived=None):
        """Post every (array, peer) of `sends` and every (array, peer) of `receives` at
        once, and call arrived(k), if given, as soon as receive k has landed (in the order
        of `receives`, while the later ones are still travelling).  Returns when everything
        has been sent.

        The receives are awaited one by one in order, not with Waitany: with ranks
        outnumbering the cores, MPICH's Waitany completes an all-to-all many times slower
        than Wait on each request in turn (mpi_impl/README.md, "All-to-all")."""
        self.wait_for_device()
        out = [self.outgoing(a, f"xsend{k}") for k, (a, _) in enumerate(sends)]
        into = [self.incoming(a, f"xrecv{k}") for k, (a, _) in enumerate(receives)]
        posted, sent = [], []
        try:
            posted += [self.comm.Irecv(h, peer, 0) for h, (_, peer) in zip(into, receives)]
            sent += [self.comm.Isend(h, peer, 0) for h, (_, peer) in zip(out, sends)]
            self.bytes_sent += sum(a.nbytes for a, peer in sends if peer != self.rank)
            for k, request in enumerate(posted):
                request.Wait()
                self.deliver(into[k], receives[k][0])
                if arrived:
                    arrived(k)
            MPI.Request.Waitall(sent)
        except BaseException:
            _withdraw(posted, sent)
            raise

    def allreduce(self, buf, x=None):
        """MPI's own Allreduce(SUM) of x into buf (in place if x is None or buf).  Bytes are
        counted by the caller (MPI does not say)."""
        self.wait_for_device()
        if x is None or x is buf:
            host = self.outgoing(buf, "send")
            self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        else:
            host = self.incoming(buf, "recv")
            self.comm.Allreduce(self.outgoing(x, "send"), host, op=MPI.SUM)
        self.deliver(host, buf)


def _withdraw(receives, sends):
    """After an error inside Wire.exchange: cancel the receives still posted (a message
    arriving later must not land in a buffer that is no longer ours, nor match a later
    call's receive) and release the sends to finish on their own, so that no request of
    this rank stays pending."""
    for request in receives:
        if request:                              # a null request has completed already
            request.Cancel()
            request.Wait()
    for request in sends:
        if request:
            request.Free()
