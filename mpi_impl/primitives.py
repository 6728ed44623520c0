"""The machine's primitives, measured for mpi_impl.bench: the textbook model's alpha, beta and
gamma, and the fastest rates the lower bound (lower_bound.py) takes.

Every figure is the best of repeated measurements (`slowest_best`: every rank runs the work
at once after a Barrier, a round's time is the slowest rank's, the best round is kept).
Load from other programs only makes a measurement slower, so the best of many is the one
nearest the machine's own speed, and the floors below need one process on a core, not two
at the same moment.

* alpha: the cheaper of half the best 8-byte round trip between ranks 0 and 1 (through a
  Wire, as the algorithms send; the other ranks asleep, `alone_best`) and the best Barrier
  per round of messages (MPICH's own C path, as MPI's Allreduce sends; a Barrier of p
  ranks takes ceil(log2 p) rounds).
* beta, gamma (the textbook model's): every rank at once sends 64 MiB to its right
  neighbour and receives 64 MiB from its left (one ring step), less alpha, per byte; every
  rank at once adds two 64 MiB arrays (``xp.add(a, b, out=a)``), per byte.
* beta_best: the fewest seconds per byte any transfer took, less alpha, over message sizes
  of 256 KiB to 4 MiB, both with every rank sending at once (a ring step) and with one pair
  alone (half a ping-pong between ranks 0 and 1); or of a copy within one rank at those
  sizes (`local_copy`), if faster: a message between ranks of one machine is at least one
  copy by some core.
* gamma_best: the fewest seconds per byte of result any addition took, over sizes of 16 KiB
  (in L1) to 4 MiB, with every rank adding at once and with rank 0 adding alone.
* byte_s, per bench size: the fewest seconds per byte (per rank, every rank at once) of two
  STREAM kernels over m bytes, counted as STREAM counts them: copy (``xp.copyto``: 2 m
  bytes) and add in place (``xp.add(z, x, out=z)``: 3 m bytes).  Each is timed only among
  the algorithms, in the state of the caches they run in (`StreamKernel`); or, if less, the
  sum of the best times of its 1 MiB pieces over those calls.

`probes` gives the bench the two STREAM kernels, a Barrier, and a ring step and an addition
at the sizes where beta_best and gamma_best were found, to time among the algorithms call by
call: each keeps its best over the whole run, so the primitives are sampled in the same
moments as the algorithms.

The buffers hold ones: never-written zeros all map to one page of the kernel's, which a copy
reads from cache.
"""
from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from .wire import make_wire

BIG = 64 << 20                                       # bytes of the textbook model's beta and gamma
TRANSFER_SIZES = (256 << 10, 1 << 20, 4 << 20)       # message sizes for beta_best
ADD_SIZES = (16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)   # sizes for gamma_best
REPEATS = 10
PIECE = 1 << 20                                      # bytes per piece of a StreamKernel


def measure(comm, device, cuda_aware=None, repeats: int = REPEATS) -> dict:
    """This machine's primitives (see the module docstring): alpha (s per message), beta and
    beta_best (s per byte sent), gamma and gamma_best (s per byte added), the sizes at which
    the best were measured, and the figures the bench prints (_us, _gbs)."""
    p, xp, sync = comm.Get_size(), device.xp, device.wait
    wire = make_wire(comm, xp, cuda_aware)
    machine = {"alpha": 0.0, "beta": 0.0, "beta_best": 0.0, "one_way_gbs": None,   # 1 rank: no partner
               "beta_bytes": TRANSFER_SIZES[0], "wire": wire, "device": device}
    if p > 1:
        alpha = machine["alpha"] = latency(wire, 30 * repeats)
        machine["beta"] = max(ring_step(wire, BIG, repeats) - alpha, 1e-12) / BIG
        machine["one_way_gbs"] = BIG / max(round_trip(wire, BIG, repeats) / 2 - alpha, 1e-12) / 1e9
        per_byte = {s: lower_beta(float("inf"), alpha, min(ring_step(wire, s, repeats),
                                                           round_trip(wire, s, repeats) / 2), s)
                    for s in TRANSFER_SIZES}
        machine["beta_bytes"] = min(per_byte, key=per_byte.get)
        machine["beta_best"] = min(per_byte[machine["beta_bytes"]], local_copy(comm, device, repeats))
    a, b = xp.ones(BIG // 4, np.float32), xp.ones(BIG // 4, np.float32)
    machine["gamma"] = slowest_best(comm, lambda: (xp.add(a, b, out=a), sync()), repeats) / BIG
    machine["copy_gbs"] = BIG / slowest_best(comm, lambda: (xp.copyto(a, b), sync()), repeats) / 1e9
    per_byte = {s: add_seconds(comm, device, s, repeats) / s for s in ADD_SIZES}
    machine["gamma_bytes"] = min(per_byte, key=per_byte.get)
    machine["gamma_best"] = per_byte[machine["gamma_bytes"]]
    return machine


def figures(machine) -> dict:
    """The primitives as the bench prints them and its JSON carries them: us and GB/s."""
    rate = lambda per_byte: 1 / per_byte / 1e9 if per_byte else None
    return {"alpha_us": machine["alpha"] * 1e6, "beta_gbs": rate(machine["beta"]),
            "one_way_gbs": machine["one_way_gbs"], "gamma_gbs": rate(machine["gamma"]),
            "copy_gbs": machine["copy_gbs"], "beta_best_gbs": rate(machine["beta_best"]),
            "gamma_best_gbs": rate(machine["gamma_best"])}


def probes(machine, x) -> list:
    """Primitives to time again among the algorithms, call by call (bench.py), so that they
    are sampled in the same moments, and in the same state of the caches, as the algorithms:
    every rank copying x and adding x to an array in place (the memory limit's STREAM
    kernels, `StreamKernel`), the addition at the size where gamma_best was measured, and on
    more than one rank a Barrier (alpha per round) and the ring step at beta_best's size.  A
    list of (call, keep): keep(t) takes the call's best time t into `machine` (copy_s, add_s
    and byte_s, the memory limit's seconds per byte, for x's size)."""
    wire, device = machine["wire"], machine["device"]
    xp, sync, comm = device.xp, device.wait, wire.comm
    machine.pop("byte_s", None)                          # this size's, from its own kernels
    kernels = [StreamKernel(kind, comm, x, device, machine) for kind in StreamKernel.COUNTED]
    found = [(kernel, kernel.keep) for kernel in kernels]
    a, b = xp.ones(machine["gamma_bytes"] // 4, np.float32), xp.ones(machine["gamma_bytes"] // 4, np.float32)
    found.append((lambda: (xp.add(a, b, out=a), sync()),
                  lambda t: machine.update(gamma_best=min(machine["gamma_best"], t / machine["gamma_bytes"]))))
    if wire.size > 1:
        rounds = (wire.size - 1).bit_length()
        found.append((comm.Barrier, lambda t: machine.update(alpha=min(machine["alpha"], t / rounds))))
        size, p, rank = machine["beta_bytes"], wire.size, wire.rank
        c, d = xp.ones(size // 4, np.float32), xp.ones(size // 4, np.float32)
        found.append((lambda: wire.sendrecv(c, (rank + 1) % p, d, (rank - 1) % p),
                      lambda t: machine.update(beta_best=lower_beta(machine["beta_best"], machine["alpha"],
                                                                    t, size))))
    return found


def lower_beta(beta, alpha, t, size):
    """beta (seconds per byte), or a transfer's if fewer: `size` bytes in t seconds, less
    alpha.  A transfer no longer than alpha (under load alpha can be measured larger than a
    quiet transfer) says nothing about beta: beta stays as it was (at most a local copy's,
    `local_copy`, in measure)."""
    if t <= alpha:
        return beta
    return min(beta, (t - alpha) / size)


class StreamKernel:
    """A STREAM kernel on every rank at once, for the memory limit: ``copy`` (target = x:
    reads m bytes and writes m, counted 2 m) or ``add`` (target += x, in place: reads 2 m
    and writes m, counted 3 m), as STREAM counts its Copy and Add (McCalpin,
    https://www.cs.virginia.edu/stream/ref.html, "Counting Bytes and FLOPS": 16 and 24 bytes
    per iteration of 8-byte words, write-allocate traffic not counted).  Timed only among
    the algorithms' calls, never alone: alone, back to back, x and the target stay in a
    cache that the calls do not get (the bench's calls take turns, each with its own output
    array, so each finds its arrays where the calls before it left them, and so does this
    kernel: its source is the calls' own input, its target untouched since the last round,
    like each call's output).

    Each call also times the kernel in pieces of `piece` bytes and keeps each piece's best
    time over the calls but the first (the first follows the copy made when x was taken, in
    a cache as hot as alone).  A rank's kernel takes at least the sum of its pieces' best
    times and, where the ranks share C cores, all of them take at least the sum over ranks
    over C: a floor that load cannot lift, since a 1 MiB piece fits in the time slice a busy
    machine gives a process and a 64 MiB pass does not.  keep(t) takes the lesser of that
    floor and t, the best time of a whole call (the slowest rank's), into machine[kind_s],
    and the seconds per byte counted into machine["byte_s"] if fewer than the other
    kernel's."""

    COUNTED = {"copy": 2, "add": 3}                  # bytes counted per byte of x

    def __init__(self, kind, comm, x, device, machine, piece: int = PIECE):
        self.kind, self.comm, self.device, self.machine = kind, comm, device, machine
        self.nbytes = x.nbytes
        self.target = x.copy()
        n = max(1, piece // x.itemsize)
        self.cuts = [(x[i:i + n], self.target[i:i + n]) for i in range(0, x.size, n)]
        self.best = [float("inf")] * len(self.cuts)
        self.calls = 0

    def __call__(self):
        xp, sync = self.device.xp, self.device.wait
        for j, (source, target) in enumerate(self.cuts):
            start = time.perf_counter()
            if self.kind == "copy":
                xp.copyto(target, source)
            else:
                xp.add(target, source, out=target)
            sync()
            if self.calls:
                self.best[j] = min(self.best[j], time.perf_counter() - start)
        self.calls += 1

    def keep(self, whole: float):
        """The lesser of the best whole call and the pieces' floor (every rank calls this,
        after the calls)."""
        mine = sum(self.best)
        floor = self.comm.allreduce(mine, op=MPI.MAX)
        if self.machine.get("cores"):
            floor = max(floor, self.comm.allreduce(mine, op=MPI.SUM) / self.machine["cores"])
        seconds = self.machine[f"{self.kind}_s"] = min(whole, floor)
        per_byte = seconds / (self.COUNTED[self.kind] * self.nbytes) if self.nbytes else 0.0
        self.machine["byte_s"] = min(self.machine.get("byte_s", per_byte), per_byte)


def shared_cores(comm, device: str):
    """The cores the ranks share, for the bound's cores limit: os.cpu_count() when every rank
    runs on this machine's CPU; None otherwise (GPUs add, and a network card moves bytes
    between machines, without a core)."""
    one_machine = comm.Split_type(MPI.COMM_TYPE_SHARED).Get_size() == comm.Get_size()
    return os.cpu_count() if device == "cpu" and one_machine else None


def latency(wire, repeats):
    """alpha: the cheaper of half the best 8-byte round trip (0 <-> 1) and the best Barrier
    per round of messages."""
    comm = wire.comm
    rounds = (comm.Get_size() - 1).bit_length()              # ceil(log2 p)
    return min(round_trip(wire, 8, repeats) / 2, slowest_best(comm, comm.Barrier, repeats) / rounds)


def round_trip(wire, nbytes, repeats):
    """The best of repeats round trips of nbytes between ranks 0 and 1, the others asleep."""
    rank = wire.rank
    a = wire.xp.ones(nbytes // 4, np.float32)

    def ping_pong():
        if rank == 0:
            wire.send(a, 1)
            wire.recv(a, 1)
        elif rank == 1:
            wire.recv(a, 0)
            wire.send(a, 0)
    return alone_best(wire.comm, ping_pong, repeats)


def ring_step(wire, nbytes, repeats):
    """Every rank sends nbytes right and receives nbytes from the left, all at once: the
    slowest rank's best time."""
    p, rank, xp = wire.size, wire.rank, wire.xp
    a, b = xp.ones(nbytes // 4, np.float32), xp.ones(nbytes // 4, np.float32)
    return slowest_best(wire.comm, lambda: wire.sendrecv(a, (rank + 1) % p, b, (rank - 1) % p),
                        repeats)


def local_copy(comm, device, repeats):
    """The fewest seconds per byte of a copy within one rank (``xp.copyto``) over the
    TRANSFER_SIZES, the best over repeats and ranks.  A message between ranks of one machine
    is at least one such copy by some core, so this is a floor for beta_best; it needs one
    process on a core, not two at once, so load cannot hide it as it hides a quiet moment
    for a ping-pong."""
    xp, sync, best = device.xp, device.wait, float("inf")
    for nbytes in TRANSFER_SIZES:
        a, b = xp.ones(nbytes // 4, np.float32), xp.ones(nbytes // 4, np.float32)
        best = min(best, best_local(lambda: (xp.copyto(b, a), sync()), repeats) / nbytes)
    return comm.allreduce(best, op=MPI.MIN)


def best_local(work, repeats):
    """The best of repeats + 1 runs of `work` in this rank alone, no other rank waited for."""
    best = float("inf")
    for _ in range(repeats + 1):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def add_seconds(comm, device, nbytes, repeats):
    """The best time of adding two arrays of nbytes (``xp.add(a, b, out=a)``), every rank at
    once or rank 0 alone (the others asleep), whichever was faster."""
    xp, sync = device.xp, device.wait
    a, b = xp.ones(nbytes // 4, np.float32), xp.ones(nbytes // 4, np.float32)
    work = lambda: (xp.add(a, b, out=a), sync())
    alone = lambda: work() if comm.Get_rank() == 0 else None
    return min(slowest_best(comm, work, repeats), alone_best(comm, alone, repeats))


def slowest_best(comm, work, repeats):
    """Every rank runs `work` at once, repeats + 1 times; the best of the slowest rank's
    times, the first round left out (it warms up)."""
    times = []
    for _ in range(repeats + 1):
        comm.Barrier()
        start = MPI.Wtime()
        work()
        times.append(comm.allreduce(MPI.Wtime() - start, op=MPI.MAX))
    return min(times[1:])


def alone_best(comm, work, repeats):
    """The best of repeats + 1 runs of `work` (which does something on rank 0, maybe on rank
    1, nothing elsewhere), timed on rank 0, the first left out.  Ranks with nothing to do
    wait asleep (`quiet_barrier`), not spinning in MPI: on a machine with more ranks than
    cores a spinning rank would take a core from the work measured."""
    times = []
    for _ in range(repeats + 1):
        comm.Barrier()
        start = MPI.Wtime()
        work()
        times.append(MPI.Wtime() - start)
        quiet_barrier(comm)
    return comm.bcast(min(times[1:]), root=0)


def quiet_barrier(comm, nap: float = 1e-4):
    """A Barrier that waits asleep (MPICH's blocking calls spin on the CPU)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(nap)
