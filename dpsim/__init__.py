"""dpsim: a discrete-event simulator of synchronous data-parallel deep-learning training.

    import dpsim
    sc = dpsim.load_scenario("cntk-1bit-k80", overrides={"sync.strategy": "ps"})
    res = dpsim.simulate(sc)             # res.to_dict() follows DESIGN.md's result contract
    runs = dpsim.sweep(sc, gpus=[1, 2, 4, 8])
"""
from .config import Scenario, load_scenario
from .errors import ScenarioError
from .results import Result
from .simulate import simulate, sweep, sweep_grid

__all__ = ["Scenario", "ScenarioError", "Result", "load_scenario", "simulate", "sweep", "sweep_grid"]
