"""Ranks that share a device: more training processes than CPU cores, or several on one GPU.

N ranks of a node run on its devices (cluster.devices_per_node = C; 0 means one device per
rank). C may be fractional, a measured capacity: two vCPUs that run two busy processes at
1.9x one are C = 1.9, on ceil(C) = 2 devices.

Placement: rank r runs on device r mod ceil(C), as an operating system's per-core run queues
and GPU binding by local rank both end up doing, and a device time-slices the k ranks on it
equally (processor sharing; Kleinrock, "Time-shared systems: a theoretical treatment", JACM
14(2), 1967). While every device is busy they also get only C / ceil(C) of their speed. So a
rank's device work takes

    (its time alone) x k_r x max(1, busy / C),     busy = min(N, ceil(C)) devices in use

and with N a multiple of C every rank runs at C/N of its speed. N = 3 on 2 cores: one rank
has a core to itself and two share the other, so a synchronous step waits for the two: the
straggler that a fluid model (every rank at 2/3) would miss.

Device work is forward, backward, the update, the reductions of the sync and the codec's
kernels; with `cluster.shared_memory_messages` (MPI between CPU processes, whose messages are
memory copies made by the ranks' own cores) the copies too.

A rank that waits for a message and busy-polls (`sync.busy_poll`: MPI on CPU cores) keeps
its device busy, so the rank a message goes to may not be running. A rank sharing its device
with k - 1 others runs 1/k of the time, and when it does not, it waits half a time slice on
average; a step of the sync waits for the worst placed rank:

    wait per message = (1 - 1/k_max) x timeslice / 2                 (busy-polling ranks)

Memory-bound kernels (the update, the reductions) also share the node's memory bus when
the devices have one (`cluster.node_mem_bw_gbs`: CPU cores). The ranks of a synchronous
step update at the same moment, so each of the busy devices gets an equal part of it:

    bandwidth of a rank = min(its device's, node's / busy)

Time-slicing is not free. Each switch between two ranks on a core refills its caches, and a
rank that has finished its compute and polls takes slices from the one still computing; so
the forward and backward of a rank that shares its device, and its kernels (a codec's,
PowerSGD's products: long runs of device work like them), run (1 + overhead) slower than
the fluid share above (`cluster.timeslice_overhead`, measured by course calibrate's probe of
twice as many ranks as cores). The slices also end at different moments for each rank, so
ranks on one device finish their compute apart (`compute.shared_jitter`, dpsim.engine draws
it in place of compute.jitter for them).

Yielding ranks (a GPU shared by ranks that wait on their own CPU cores) pay no such wait.
dpsim.analytic.shared_ring writes the ring all-reduce under all of it; tests hold the engine to it.
"""
import math


def rank_factors(ranks: int, devices: float) -> list[float]:
    """How many times slower each rank's device work runs than alone (devices = 0: none shared)."""
    if not devices:
        return [1.0] * ranks
    per_slot = ranks_on_each_device(ranks, devices)
    contention = max(1.0, min(ranks, len(per_slot)) / devices)
    return [per_slot[r % len(per_slot)] * contention for r in range(ranks)]


def ranks_on_each_device(ranks: int, devices: float) -> list[int]:
    """How many ranks each of the ceil(devices) devices runs (rank r on device r mod ceil)."""
    slots = math.ceil(devices)
    return [ranks // slots + (1 if s < ranks % slots else 0) for s in range(slots)]


def ranks_per_device(ranks: int, devices: float) -> float:
    """The slowest rank's factor: what a lock-step operation (a reduction on every rank) waits for."""
    return max(rank_factors(ranks, devices))


def wakeup_s(ranks: int, devices: float, timeslice_s: float) -> float:
    """Mean wait of a message for its busy-polling receiver on the most crowded device."""
    if not devices:
        return 0.0
    slots = math.ceil(devices)
    k = -(-ranks // slots)
    return (1 - 1 / k) * timeslice_s / 2


def memory_bw(device_gbs: float, node_gbs: float, ranks: int, devices: float) -> float:
    """A rank's memory bandwidth when `busy` devices run memory-bound kernels at once
    (node_gbs = 0: each device has its own memory)."""
    if not node_gbs:
        return device_gbs
    busy = min(ranks, math.ceil(devices)) if devices else ranks
    return min(device_gbs, node_gbs / busy)


def shares_device(ranks: int, devices: float) -> list[bool]:
    """For each rank, whether its device time-slices it with another rank."""
    if not devices:
        return [False] * ranks
    per_slot = ranks_on_each_device(ranks, devices)
    return [per_slot[r % len(per_slot)] > 1 for r in range(ranks)]
