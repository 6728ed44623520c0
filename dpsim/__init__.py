"""dpsim: a discrete-event simulator of synchronous data-parallel deep-learning training.

    import dpsim
    sc = dpsim.load_scenario("cntk-1bit-k80", overrides={"sync.strategy": "ps"})
    res = dpsim.simulate(sc)             # res.to_dict(): the result contract in README.md
    seconds = dpsim.collective_time(sc, 2**30, "ring")    # one all-reduce of 1 GiB, alone
    runs = dpsim.sweep(sc, gpus=[1, 2, 4, 8])

The names below, and submodules such as dpsim.plot, are imported on first use, so that
`from dpsim.vocabulary import ...` (what mpi_impl does, under mpiexec) loads that one small
file and nothing else.
"""
import importlib
import importlib.util

_HOME = {
    "Scenario": "config", "load_scenario": "config",
    "ScenarioError": "errors",
    "Result": "results", "Run": "results",
    "simulate": "simulation",
    "collective_time": "collective",
    "sweep": "sweeps", "sweep_grid": "sweeps",
}
__all__ = list(_HOME)


def __getattr__(name):
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    if importlib.util.find_spec(f"{__name__}.{name}") is not None:    # dpsim.plot, dpsim.diagnosis, ...
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'dpsim' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_HOME))
