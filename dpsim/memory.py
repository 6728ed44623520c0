"""Memory per GPU: the model states (parameters, gradients, optimizer state), the parameters
ZeRO-3 gathers, the activations; and how sharding divides them.

Bytes per parameter (Rajbhandari et al., "ZeRO", SC 2020, section 3.1: mixed-precision training
with Adam holds 2 + 2 + K bytes per parameter, K = 12 for the FP32 master weights, momentum and
variance):

  compute.precision     parameters  gradients  optimizer state (training.optimizer)
  fp32                  4           4          sgd 4 (momentum), adam 8 (momentum, variance)
  fp16 (mixed)          2           2          sgd 8 (master weights, momentum), adam 12

Sharded over N GPUs (ZeRO, section 5 and Figure 1): zero1 divides the optimizer state by N,
zero2 the gradients too, zero3 the parameters too. zero3 also holds the full parameters of the
units it has gathered (strategies/zero3.py): the largest unit, and with prefetch
(sync.overlap) the largest pair of consecutive units, at the parameters' width.
Activations: models.ACTIVATIONS values per sample x training.batch_per_gpu x 4 bytes (fp32) or
2 (fp16); an estimate that counts one tensor per recorded layer, so below what a framework
holds. Double buffering (training.double_buffering) holds the activations of half the batch and
two gradients: the half being computed and the half being synchronised. Not counted:
temporary buffers (gradient buckets, a collective's chunks, the codec's), the CUDA context
and fragmentation (ZeRO's "residual states", section 3.2).
"""
from . import workload

PARAMETER_BYTES = {"fp32": 4, "fp16": 2}
GRADIENT_BYTES = {"fp32": 4, "fp16": 2}
OPTIMIZER_BYTES = {("fp32", "sgd"): 4, ("fp32", "adam"): 8, ("fp16", "sgd"): 8, ("fp16", "adam"): 12}
SHARDED = {"zero1": ("optimizer_state",), "zero2": ("optimizer_state", "gradients"),
           "zero3": ("optimizer_state", "gradients", "parameters")}
PARTS = ("parameters", "gradients", "optimizer_state", "gathered_parameters", "activations")


def model_states(params, gpus, precision="fp32", optimizer="sgd", strategy="ring") -> dict:
    """Bytes per GPU of the parameters, gradients and optimizer state, each divided by the GPUs
    where `strategy` shards it (a strategy that is not ZeRO shards none)."""
    states = {"parameters": PARAMETER_BYTES[precision] * params, "gradients": GRADIENT_BYTES[precision] * params,
              "optimizer_state": OPTIMIZER_BYTES[precision, optimizer] * params}
    return {k: v / gpus if k in SHARDED.get(strategy, ()) else float(v) for k, v in states.items()}


def gathered_parameters(units_params, precision, prefetch) -> float:
    """ZeRO-3's full parameters of the units in use: the largest unit, or with prefetch the
    largest sum of two consecutive units."""
    sizes = list(units_params)
    held = max(sizes) if not prefetch or len(sizes) < 2 else max(a + b for a, b in zip(sizes, sizes[1:]))
    return PARAMETER_BYTES[precision] * held


def per_gpu(sc) -> dict:
    """Every part of a scenario's memory per GPU (bytes, dpsim.memory.PARTS) and their total."""
    model, precision, gpus = sc.model_spec(), sc.compute.precision, sc.gpus
    strategy = sc.sync.strategy if gpus > 1 else "none"
    out = model_states(model.params, gpus, precision, sc.training.optimizer, strategy)
    out["gathered_parameters"] = 0.0
    if strategy == "zero3":
        units = [b.nbytes / workload.GRAD_BYTES_PER_PARAM for b in workload.build(sc).buckets]
        out["gathered_parameters"] = gathered_parameters(units, precision, sc.sync.overlap)
    halves = 2 if sc.training.double_buffering else 1
    out["gradients"] *= halves
    out["activations"] = float(model.activation_values * sc.training.batch_per_gpu / halves * PARAMETER_BYTES[precision])
    out["total"] = sum(out[k] for k in PARTS)
    return out


def capacity_bytes(sc) -> float:
    """The GPU's memory in bytes; 0 where the preset or table gives none."""
    return sc.gpu_spec().memory_gb * 1e9


def fits(sc, memory: dict) -> bool | None:
    """Whether the total fits the GPU's memory; None where the GPU's memory is not given."""
    capacity = capacity_bytes(sc)
    return None if not capacity else memory["total"] <= capacity


def does_not_fit(sc, memory: dict) -> str:
    """One line: what the scenario needs against what the GPU has, and what would help."""
    gpu = sc.gpu_spec()
    biggest = max(PARTS, key=memory.get)
    return (f"needs {memory['total'] / 1e9:.3g} GB per GPU ({biggest.replace('_', ' ')} "
            f"{memory[biggest] / 1e9:.3g} GB), more than the {gpu.name}'s {gpu.memory_gb:g} GB; "
            + ("shard it over more GPUs" if sc.sync.strategy == "zero3" else
               "shard it (sync.strategy = zero1, zero2, zero3)") + " or shrink training.batch_per_gpu")
