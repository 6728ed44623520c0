"""collective_time(): how long one collective takes on a scenario's cluster with nothing else running.

The scenario's cluster, links and [sync] settings (staging, segment, compression, message
overhead) stand; its gradient becomes nbytes of FP32 values in one layer, synchronised as one
bucket, and the engine times one synchronisation of it (Engine.sync_alone):

    import dpsim
    seconds = dpsim.collective_time("d2l-ps-vs-ring", 100 * 2**20, "ring")

`dpsim validate` times its bus-bandwidth cases this way, and course calibrate its probes.
"""
from .config import load_scenario
from .engine import Engine


def one_bucket(nbytes: int) -> dict:
    """Overrides that make a scenario's gradient nbytes of FP32 values (nbytes // 4 of them) in
    one layer (no weight matrix), synchronised as one bucket after backward."""
    return {"model.params": nbytes // 4, "model.flops_per_sample": 1.0, "model.layers": 1, "model.matrices": [],
            "sync.bucket_mib": 0, "sync.overlap": False}


def collective_time(scenario, nbytes: int, algorithm: str | None = None) -> float:
    """Seconds for one all-reduce of nbytes (FP32: nbytes // 4 values) by `algorithm`, a
    sync.strategy name (None: the scenario's own), on `scenario` (a built-in name, a .toml
    path, a dict or a Scenario); the scenario's compression, if any, applies."""
    overrides = one_bucket(nbytes)
    if algorithm is not None:
        overrides["sync.strategy"] = algorithm
    return Engine(load_scenario(scenario, overrides)).sync_alone()
