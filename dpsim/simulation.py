"""simulate(): run a scenario and set it against the same scenario on one GPU.

(dpsim.sweeps runs many scenarios at once, sharing what they have in common.)
"""
import dataclasses
import math

from . import limits, memory
from .config import Scenario, load_scenario
from .engine import Engine
from .errors import ScenarioError
from .results import Result, Run
from .trace import Trace


def single_gpu(sc: Scenario) -> Scenario:
    """The same scenario on one GPU: the baseline of speed-up."""
    return sc.with_overrides({"cluster.nodes": 1, "cluster.gpus_per_node": 1, "sync.strategy": "none",
                              "cluster.gpu_speed": sc.cluster.gpu_speed[:1], "sync.update_location": "gpu"})


def with_gpus(sc: Scenario, gpus: int) -> Scenario:
    """The scenario on `gpus` GPUs: fill one node first, then add whole nodes."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ScenarioError("gpus", f"GPU counts must be integers >= 1, got {gpus!r}")
    limits.at_most("gpus", gpus, limits.GPUS, "GPUs")
    if gpus == 1:
        return single_gpu(sc)
    per_node = sc.cluster.gpus_per_node
    if gpus <= per_node:
        nodes, per_node = 1, gpus
    elif gpus % per_node == 0:
        nodes = gpus // per_node
    else:
        raise ScenarioError("gpus", f"{gpus} GPUs do not fill whole nodes of {per_node}; "
                            f"use a multiple of {per_node} or at most {per_node}")
    strategy = sc.sync.strategy if sc.sync.strategy != "none" else "ring"
    return sc.with_overrides({"cluster.nodes": nodes, "cluster.gpus_per_node": per_node,
                              "sync.strategy": strategy, "cluster.gpu_speed": sc.cluster.gpu_speed[:gpus]})


def resolved(sc: Scenario) -> dict:
    """The scenario with every preset it names spelled out, so each number can be traced."""
    model = sc.model_spec()
    out = sc.to_dict()
    out["resolved"] = {
        "gpu": dataclasses.asdict(sc.gpu_spec()),
        **{k: dataclasses.asdict(sc.link_spec(k)) for k in ("intra", "inter", "host_link")},
        "model": {"name": model.name, "params": model.params, "flops_per_sample": model.flops_per_sample,
                  "layers": len(model.layers), "source": model.source},
    }
    return out


def simulate(scenario, overrides: dict | None = None, trace: bool = False, baseline: Result | None = None,
             progress=None) -> Result:
    """Simulate a scenario (name, path, dict or Scenario). `baseline`: a one-GPU result to reuse;
    progress(done, total): called after every iteration of the main run."""
    sc = load_scenario(scenario, overrides)
    memory_of(sc)                       # a scenario that must fit and does not ends here
    record = Trace(gpus_per_node=sc.cluster.gpus_per_node) if trace else None
    run = Engine(sc, record, progress=progress).run()
    sync_s = Engine(sc).sync_alone()
    if sc.gpus == 1:
        base = None
    elif baseline is not None:
        base = baseline.throughput_samples_per_s
    else:
        one = single_gpu(sc)            # the baseline's memory is not checked: it is not the user's scenario
        base = throughput(one, Engine(one).run())
    plain = None
    if compressed(sc):
        plain = Engine(uncompressed_twin(sc)).run()
    return make_result(sc, run, sync_s, base, plain, record)


def compressed(sc: Scenario) -> bool:
    return sc.sync.compression != "none" and sc.gpus > 1


def uncompressed_twin(sc: Scenario) -> Scenario:
    """The same scenario without compression: what a compressed result is compared with."""
    return sc.with_overrides({"sync.compression": "none"})


def make_result(sc, run: Run, sync_s, base_throughput, plain: Run | None, record=None) -> Result:
    """A Result from the engine's Run. base_throughput None: sc is its own baseline."""
    limits.check_finite("result", 1 / run.iteration_time_s if run.iteration_time_s > 0 else math.inf, sync_s,
                        run.bytes_sent_per_gpu, *run.breakdown_s.values(), *(plain.breakdown_s.values() if plain else ()))
    own = throughput(sc, run)
    speedup = own / (own if base_throughput is None else base_throughput)
    held, fits = memory_of(sc)
    return Result(run.iteration_time_s, own, speedup, speedup / sc.gpus, sync_s,
                  run.bytes_sent_per_gpu, run.breakdown_s, resolved(sc), sc.gpus, record, plain, held, fits)


def memory_of(sc: Scenario) -> tuple[dict, bool | None]:
    """(memory per GPU, whether it fits: dpsim.memory); with training.memory_check = "error" a
    scenario that does not fit is a ScenarioError."""
    held = memory.per_gpu(sc)
    fits = memory.fits(sc, held)
    if fits is False and sc.training.memory_check == "error":
        raise ScenarioError("training.memory_check", memory.does_not_fit(sc, held))
    return held, fits


def throughput(sc: Scenario, run: Run) -> float:
    return sc.gpus * sc.training.batch_per_gpu / run.iteration_time_s
