"""What a scenario implies: every quantity the simulator computes from a validated scenario.

dpsim.config checks a scenario and resolves the names in it (GPU, link and model presets);
what follows from those numbers is computed here, once, and read by dpsim.workload, the engine
and the machine:
  peak FLOP rate          the GPU's FP32 or FP16 peak, as compute.precision says
  efficiency from rate    compute.samples_per_s measured at rate_batch -> compute.efficiency
                          (config stores it in the scenario; dpsim.workload turns it back into
                          a time at any batch with the same peak)
  sharing                 how much slower a rank's device work runs when ranks share devices
  memory bandwidth        a rank's, when the node's devices share one memory bus
  wake-up time            what a message waits for its busy-polling receiver to be scheduled
  node links              the links inside a node as ranks on shared devices see them
  GPUDirect               cluster.gpudirect = "auto" decided by the inter-node link's kind
  processes               the strategy's policy: one training process per GPU, or per node
(the formulas of sharing are dpsim.sharing's, those of compute dpsim.compute's).
"""
import dataclasses

from . import compute, sharing, strategies


# ------------------------------------------------------------------ compute
def peak_tflops(sc) -> float:
    """The GPU's peak at the scenario's precision, TFLOP/s."""
    gpu = sc.gpu_spec()
    return gpu.fp32_tflops if sc.compute.precision == "fp32" else gpu.fp16_tflops


def powersgd_flops(sc) -> float:
    """FLOP/s of PowerSGD's products and orthogonalisation: compute.powersgd_gflops where given
    (course calibrate measures it), else the GPU's peak x compute.efficiency."""
    if sc.compute.powersgd_gflops:
        return sc.compute.powersgd_gflops * 1e9
    return peak_tflops(sc) * 1e12 * sc.compute.efficiency


def efficiency_from_rate(sc) -> tuple[float, int]:
    """(compute.efficiency, the batch it was measured at) that make one GPU train at
    compute.samples_per_s at rate_batch (0: the one-GPU batch, training.global_batch, else
    batch_per_gpu). ValueError if the rate leaves no time for forward and backward."""
    c = sc.compute
    batch = c.rate_batch or sc.training.global_batch or sc.training.batch_per_gpu
    gpu, model = sc.gpu_spec(), sc.model_spec()
    update_s = compute.update_time_s(model.params, sharing.memory_bw(gpu.mem_bw_gbs, sc.cluster.node_mem_bw_gbs, 1, 0))
    # double buffering: a step is two halves, each with its own update and overheads, so one
    # half of the batch takes half the step at the same rate
    halves = 2 if sc.training.double_buffering else 1
    e_max = compute.efficiency_from_rate(c.samples_per_s, batch / halves, model.flops_per_sample, peak_tflops(sc),
                                         c.half_batch, update_s + c.overhead_ms / 1e3)
    return e_max, batch


def cpu_update_s_per_param(sc) -> float:
    """The CPU parameter server's update cost per parameter, when it applies the update."""
    if sc.sync.update_location != "cpu":
        return 0.0
    return compute.UPDATE_BYTES_PER_PARAM / (sc.cluster.host_mem_bw_gbs * 1e9)


# ------------------------------------------------------------------ ranks sharing devices
def device_sharing(sc) -> float:
    """How much slower the slowest rank's device work runs (dpsim.sharing): what a lock-step
    operation on every rank waits for."""
    return sharing.ranks_per_device(sc.cluster.gpus_per_node, sc.cluster.devices_per_node)


def kernel_sharing(sc) -> float:
    """How much slower the slowest rank's kernels (the codec's, PowerSGD's products) run: the
    device's sharing, and where the ranks time-slice a device, the cost of that
    (cluster.timeslice_overhead) as their forward and backward pay it (dpsim.sharing)."""
    extra = 1.0 + sc.cluster.timeslice_overhead if any(shared_ranks(sc)) else 1.0
    return device_sharing(sc) * extra


def rank_sharing(sc) -> list[float]:
    """Per GPU (rank) of the cluster, how much slower its device work runs (dpsim.sharing)."""
    c = sc.cluster
    return sharing.rank_factors(c.gpus_per_node, c.devices_per_node) * c.nodes


def shared_ranks(sc) -> list[bool]:
    """Per GPU (rank) of the cluster, whether its device time-slices it with another rank."""
    c = sc.cluster
    return sharing.shares_device(c.gpus_per_node, c.devices_per_node) * c.nodes


def slowness(sc) -> list[float]:
    """Each GPU's compute-time multiplier before jitter: its sharing over its speed factor
    (cluster.gpu_speed, 1.0 for the GPUs it does not list), and for a rank that shares its
    device, the cost of time-slicing (cluster.timeslice_overhead)."""
    speeds = list(sc.cluster.gpu_speed) + [1.0] * (sc.gpus - len(sc.cluster.gpu_speed))
    extra = 1.0 + sc.cluster.timeslice_overhead
    return [f / v * (extra if shared else 1.0) for f, v, shared in zip(rank_sharing(sc), speeds, shared_ranks(sc))]


def memory_bw_gbs(sc) -> float:
    """The memory bandwidth a rank's memory-bound kernels (update, reductions) get: its
    device's, or its part of the node's when the devices share one (dpsim.sharing)."""
    c = sc.cluster
    return sharing.memory_bw(sc.gpu_spec().mem_bw_gbs, c.node_mem_bw_gbs, c.gpus_per_node, c.devices_per_node)


def wakeup_s(sc) -> float:
    """What a message waits, on average, for its busy-polling receiver to be scheduled."""
    c = sc.cluster
    if not sc.sync.busy_poll:
        return 0.0
    return sharing.wakeup_s(c.gpus_per_node, c.devices_per_node, c.timeslice_us / 1e6)


# ------------------------------------------------------------------ the cluster's links
def node_links(sc):
    """(intra, host_link) as the ranks see them: with shared_memory_messages on shared devices,
    each rank's copies get its device's share of the bandwidth (dpsim.sharing)."""
    intra, host = sc.link_spec("intra"), sc.link_spec("host_link")
    share = device_sharing(sc)
    if sc.cluster.shared_memory_messages and share > 1:
        intra, host = (dataclasses.replace(l, bandwidth_gbs=l.bandwidth_gbs / share) for l in (intra, host))
    return intra, host


def gpudirect(setting, inter) -> bool:
    """cluster.gpudirect: "auto" is on for RDMA links (InfiniBand, RoCE), off for TCP."""
    return setting == "on" or (setting == "auto" and inter.kind in ("infiniband", "roce"))


# ------------------------------------------------------------------ processes (the strategy's policy)
def processes_per_node(sc) -> int:
    """Training processes per node, each with its own loader workers, one host core, and the
    batches of gpus_per_process GPUs to load: one per node for a strategy that drives the
    node from one process (DataParallel), else one per GPU."""
    if sc.gpus > 1 and strategies.hook(sc.sync.strategy, "ONE_PROCESS_PER_NODE"):
        return 1
    return sc.cluster.gpus_per_node


def gpus_per_process(sc) -> int:
    return sc.cluster.gpus_per_node // processes_per_node(sc)


def gpus_per_host_thread(sc) -> int:
    """GPUs whose kernels one host thread issues: the node's under DataParallel, else
    compute.gpus_per_process (MXNet's engine and TensorFlow's towers issue them all from one
    process while every GPU keeps a loader of its own; mxnet-vs-tf-4gpu is fitted that way)."""
    return max(gpus_per_process(sc), min(sc.compute.gpus_per_process, sc.cluster.gpus_per_node))
