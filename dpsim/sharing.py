"""Ranks that share a device: more training processes than CPU cores, or several on one GPU.

N ranks of a node run on C devices (cluster.devices_per_node; 0 means one device per rank).
The operating system (or the GPU's time-slicing, without MPS) shares a device among the ranks
that want it, equally: processor sharing (Kleinrock, "Time-shared systems: a theoretical
treatment", JACM 14(2), 1967). In synchronous data-parallel training every rank wants its
device at the same moments (all compute, then all reduce), so with N > C each runs at C/N of
its speed:

    device work on a shared device = (its time alone) x N / C          (N > C)

Device work is forward, backward, the update, the reductions of the sync and the codec's
kernels; with `cluster.shared_memory_messages` (MPI between CPU processes, whose messages are
memory copies made by the ranks' own cores) the copies too, so the node's links carry C/N of
their bandwidth per rank.

A rank that waits for a message and busy-polls (`sync.busy_poll`: MPI on CPU cores) keeps
its device busy, so the rank the message comes from may not be running. At any instant a
rank runs with probability C/N; when it does not, it waits for a time slice to end, on
average half of one:

    wait per message = (1 - C/N) x timeslice / 2                        (N > C, busy-polling)

Yielding ranks (a GPU shared by ranks that wait on their own CPU cores) pay no such wait.
dpsim.analytic.shared_ring writes the ring all-reduce under both; tests hold the engine to it.
"""


def ranks_per_device(ranks: int, devices: int) -> float:
    """N / C, at least 1 (devices = 0: one device per rank)."""
    return max(1.0, ranks / devices) if devices else 1.0


def wakeup_s(ranks: int, devices: int, timeslice_s: float) -> float:
    """Mean wait of a message for its busy-polling receiver: (1 - C/N) x timeslice / 2."""
    share = ranks_per_device(ranks, devices)
    return (1 - 1 / share) * timeslice_s / 2
