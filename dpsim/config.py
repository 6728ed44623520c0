"""Scenarios: TOML files, built-in names or dicts, validated into frozen dataclasses.

The sections and the rule of every key are in dpsim.sections, presets given by name or inline
in dpsim.specs, `--set` overrides in dpsim.overrides. Anything a user gets wrong raises
ScenarioError naming the key and what is allowed; nothing here ever lets a bad value reach
the simulator. What the simulator computes from a scenario is dpsim.derived's.
"""
import dataclasses
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from . import bands, derived, hardware, limits, models, nvlink, strategies
from .errors import ScenarioError
from .files import read_regular, shown
from .overrides import apply_overrides, parse_sets, parse_value  # noqa: F401  (config.parse_sets: the CLI's)
from .sections import (SECTIONS, STRATEGIES, TOP_LEVEL, ClusterConfig, ComputeConfig,  # noqa: F401
                       DataConfig, ModelConfig, SyncConfig, TrainingConfig, build_section, replace_section)
from .specs import resolve_gpu, resolve_link

SCENARIO_DIR = Path(__file__).parent / "scenarios"


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    source: str
    cluster: ClusterConfig
    model: ModelConfig
    compute: ComputeConfig
    training: TrainingConfig
    data: DataConfig
    sync: SyncConfig

    @property
    def gpus(self) -> int:
        return self.cluster.nodes * self.cluster.gpus_per_node

    # The strategy's process policy, read by lecture 5 and its checks (dpsim.derived computes it)
    @property
    def processes_per_node(self) -> int:
        return derived.processes_per_node(self)

    @property
    def gpus_per_process(self) -> int:
        return derived.gpus_per_process(self)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def with_overrides(self, overrides: dict) -> "Scenario":
        """A new scenario with dotted keys replaced, e.g. {"sync.strategy": "ps"}; validated again.
        The new values are checked and the scenario rebuilt section by section; a value that
        fails is reported as from_dict reports it for the same scenario written out whole."""
        try:
            return _override(self, overrides or {})
        except ScenarioError:
            return from_dict(apply_overrides(self.to_dict(), overrides))

    # Resolved hardware and model, for the simulator (validated when the scenario was built).
    def gpu_spec(self) -> hardware.GPU:
        return resolve_gpu(self.cluster.gpu)

    def link_spec(self, key: str) -> hardware.Link:
        return resolve_link(getattr(self.cluster, key), f"cluster.{key}")

    def model_spec(self) -> models.Model:
        m = self.model
        if m.params:
            return models.custom_model(m.params, m.flops_per_sample, m.layers, matrices=m.matrices)
        return models.get_model(m.preset)


def from_dict(data: dict) -> Scenario:
    """Validate a scenario given as a dict with the TOML's keys."""
    if not isinstance(data, dict):
        raise ScenarioError("", f"a scenario must be a table, got {type(data).__name__}")
    allowed = (*TOP_LEVEL, *SECTIONS)
    for k in data:
        if k not in allowed:
            raise ScenarioError(k, f"unknown key; allowed: {', '.join(allowed)}")
    tops = {}
    for k in TOP_LEVEL:
        v = data.get(k, "custom" if k == "name" else "")
        if not isinstance(v, str):
            raise ScenarioError(k, f"expected a string, got {v!r}")
        tops[k] = v
    sections = {name: build_section(name, data.get(name, {})) for name in SECTIONS}
    sc = _checked(Scenario(**tops, **sections), data.get("model", {}).get("preset", "custom"))
    return _resolve_rate(sc)


def _checked(sc: Scenario, given_preset: str) -> Scenario:
    """The checks that span sections, then what follows from the names: a model given by its
    parameters is "custom", a global batch is split over the GPUs."""
    limits.check_scenario(sc)
    _check_resolves(sc, given_preset)
    if sc.model.params > 0:
        sc = dataclasses.replace(sc, model=dataclasses.replace(sc.model, preset="custom"))
    return _resolve_global_batch(sc)


CUSTOM_MODEL_KEYS = ("params", "flops_per_sample", "layers", "matrices")


def _override(sc: Scenario, overrides: dict) -> Scenario:
    """sc with dotted keys replaced (as apply_overrides sets them in a dict), each new value
    checked by its field's rule and the whole scenario checked again. Raises ScenarioError, with
    no promise about the message, on whatever from_dict would reject."""
    tops, changes = {}, {}
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if not key:
            if section not in TOP_LEVEL or not isinstance(value, str):
                raise ScenarioError(dotted, "not a top-level string")
            tops[section] = value
            continue
        if section not in SECTIONS:
            raise ScenarioError(dotted, "unknown section")
        table = changes.setdefault(section, {})
        if section == "model" and key == "preset" and value != "custom":     # a preset replaces a custom model
            table.update({k: ModelConfig.__dataclass_fields__[k].default for k in CUSTOM_MODEL_KEYS})
        if section == "model" and key in ("params", "flops_per_sample"):
            table["preset"] = "custom"                                       # and the other way round
        table[key] = value
    new = dataclasses.replace(sc, **tops, **{name: replace_section(getattr(sc, name), name, table)
                                             for name, table in changes.items()})
    new = _checked(new, new.model.preset)
    same_rate = (new.compute, new.model, new.cluster.gpu, new.cluster.node_mem_bw_gbs) == \
        (sc.compute, sc.model, sc.cluster.gpu, sc.cluster.node_mem_bw_gbs)
    return new if same_rate else _resolve_rate(new)      # the same inputs give the same efficiency


def _resolve_global_batch(sc: Scenario) -> Scenario:
    """training.global_batch split over the GPUs: it must split evenly."""
    t = sc.training
    if not t.global_batch:
        return sc
    per_gpu, rest = divmod(t.global_batch, sc.gpus)
    if rest or not per_gpu:
        raise ScenarioError("training.global_batch", f"{t.global_batch} does not split evenly over {sc.gpus} GPUs "
                            f"({t.global_batch / sc.gpus:g} per GPU); choose a multiple of the GPU count")
    return dataclasses.replace(sc, training=dataclasses.replace(t, batch_per_gpu=per_gpu))


def _resolve_rate(sc: Scenario) -> Scenario:
    """compute.samples_per_s at rate_batch sets compute.efficiency (dpsim.derived.efficiency_from_rate)."""
    c = sc.compute
    if not c.samples_per_s:
        return sc
    try:
        e_max, batch = derived.efficiency_from_rate(sc)
    except ValueError as e:
        raise ScenarioError("compute.samples_per_s", str(e)) from None
    return dataclasses.replace(sc, compute=dataclasses.replace(c, efficiency=e_max, rate_batch=batch))


def notes(sc: Scenario) -> list[str]:
    """One line each about choices a reader of a result should know (dpsim show and run print them)."""
    c, out = sc.compute, []
    if c.samples_per_s:
        out.append(f"compute from a measured rate: {c.samples_per_s:g} samples/s on one GPU at batch {c.rate_batch} "
                   f"(compute.samples_per_s), efficiency {c.efficiency:.3f} of peak implied")
    if c.efficiency > 1:
        out.append(f"compute.efficiency {c.efficiency:.3f} is above the GPU's FLOP peak: the model's kernels beat "
                   f"its nominal FLOP count (Winograd convolutions do), or the FLOPs per sample are too low")
    if sc.training.global_batch:
        out.append(f"strong scaling: global batch {sc.training.global_batch} over {sc.gpus} GPUs = "
                   f"{sc.training.batch_per_gpu} per GPU")
    return out


INTRA_KINDS = ("pcie", "nvlink", "nvswitch")     # what dpsim.cluster can join a node's GPUs with


def _check_resolves(sc: Scenario, given_preset: str):
    """Presets exist, inline tables are complete, the model is one or the other."""
    sc.gpu_spec()
    for key in ("intra", "inter", "host_link", "socket_link"):
        sc.link_spec(key)
    intra, g = sc.link_spec("intra"), sc.cluster.gpus_per_node
    if intra.kind not in INTRA_KINDS:
        raise ScenarioError("cluster.intra", f"a link of kind {intra.kind!r} cannot join GPUs inside a node: "
                            f"use one of kind {', '.join(INTRA_KINDS)} (dpsim list)")
    for key in ("inter", "host_link"):
        if sc.link_spec(key).kind == "socket":
            raise ScenarioError(f"cluster.{key}", "a socket link joins two CPU sockets: set it as "
                                "cluster.socket_link, with cluster.sockets = 2")
    if intra.kind == "nvlink":
        try:
            nvlink.graph(g, intra.links_per_gpu(g))
        except ValueError as e:
            raise ScenarioError("cluster.intra", str(e)) from None
    custom = sc.model.params > 0 or sc.model.flops_per_sample > 0
    if custom:
        if given_preset != "custom":
            raise ScenarioError("model.preset", "give either a preset or params and flops_per_sample, not both")
        if not (sc.model.params > 0 and sc.model.flops_per_sample > 0):
            raise ScenarioError("model.params", "a custom model needs both params > 0 and flops_per_sample > 0")
        if sc.model.layers > sc.model.params:
            raise ScenarioError("model.layers", f"at most model.params ({sc.model.params}) layers, got {sc.model.layers}")
        _check_matrices(sc.model)
    elif sc.model.matrices:
        raise ScenarioError("model.matrices", f"describes a custom model's weights; preset {sc.model.preset!r} has "
                            "its own: remove model.matrices, or give params and flops_per_sample")
    else:
        try:
            models.get_model(sc.model.preset)
        except ValueError as e:
            raise ScenarioError("model.preset", str(e)) from None
    if len(sc.cluster.gpu_speed) > sc.gpus:
        raise ScenarioError("cluster.gpu_speed", f"{len(sc.cluster.gpu_speed)} factors for {sc.gpus} GPUs")
    if sc.sync.update_location == "cpu" and not (sc.sync.strategy == "ps" and sc.sync.ps_location == "cpu"):
        raise ScenarioError("sync.update_location", "'cpu' needs the parameter server on the CPU: "
                            "strategy = \"ps\" and ps_location = \"cpu\"")
    strategies.hook(sc.sync.strategy, "check")(sc)
    if sc.cluster.server_nodes and sc.sync.strategy not in ("byteps", "none"):
        raise ScenarioError("cluster.server_nodes", "server machines run BytePS's summation servers: "
                            "set sync.strategy = \"byteps\", or server_nodes = 0")
    if sc.sync.ps_pull == "before-forward" and sc.gpus > 1 and sc.sync.strategy not in strategies.PULLS_BEFORE_FORWARD:
        raise ScenarioError("sync.ps_pull", f"'before-forward' needs a strategy with a server to pull from: "
                            f"{', '.join(strategies.PULLS_BEFORE_FORWARD)}")
    if sc.sync.compression == "powersgd":
        strategies.powersgd.check(sc, sc.model_spec())
    if sc.sync.strategy == "none" and sc.gpus > 1:
        raise ScenarioError("sync.strategy", f"'none' means one GPU, but the cluster has {sc.gpus}; "
                            f"choose one of: {', '.join(s for s in STRATEGIES if s != 'none')}")
    if sc.training.double_buffering:
        _check_double_buffering(sc)


def _check_double_buffering(sc: Scenario):
    """Double buffering overlaps a half's sync with the next half's forward and backward: a
    strategy that moves weights around those passes, or accumulation, leaves nothing to overlap."""
    t, s = sc.training, sc.sync
    if t.accumulation_steps > 1:
        raise ScenarioError("training.double_buffering", "cannot be combined with training.accumulation_steps > 1: "
                            "choose one")
    moves = [name for name in ("before_forward", "after_forward", "forward_pass", "backward_pass")
             if strategies.hook(s.strategy, name) is not strategies.DEFAULT_HOOKS[name]]
    if moves or s.ps_pull == "before-forward":
        raise ScenarioError("training.double_buffering", f"strategy {s.strategy!r} moves weights around forward and "
                            "backward, which a half's sync would have to wait for; use an all-reduce strategy")


def _check_matrices(m: ModelConfig):
    """A custom model's matrices: one per layer, their values within model.params."""
    if not m.matrices:
        return
    if len(m.matrices) != m.layers:
        raise ScenarioError("model.matrices", f"{len(m.matrices)} matrices for model.layers = {m.layers}: give one "
                            f"[rows, columns] per layer and set model.layers = {len(m.matrices)}")
    values = sum(rows * cols for rows, cols in m.matrices)
    if values > m.params:
        raise ScenarioError("model.matrices", f"their rows x columns add up to {values:,}, more than model.params "
                            f"({m.params:,}); the matrices are part of the parameters (the rest are vectors)")


def builtin_names() -> list[str]:
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def read_toml(path: Path) -> dict:
    """A scenario file: a regular file of at most limits.SCENARIO_BYTES (dpsim.files), TOML."""
    data = read_regular(path, "scenario file", limits.SCENARIO_BYTES)
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ScenarioError("", f"{shown(path)}: not a text file (TOML is UTF-8 text)")
    except RecursionError:
        raise ScenarioError("", f"{shown(path)}: tables nested too deeply")
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError("", f"{shown(path)}: not valid TOML: {e}")
    except ValueError:                  # an integer of more digits than Python reads from text
        raise ScenarioError("", f"{shown(path)}: an integer of more than {sys.get_int_max_str_digits():,} digits; "
                                "no key allows that many") from None


def load_scenario(source, overrides: dict | None = None) -> Scenario:
    """A built-in scenario name, a path to a .toml file, a dict, or a Scenario; then overrides.
    Ranges ({value, low, high}) are taken out: the scenario holds their values (load_ranged)."""
    if isinstance(source, Scenario):
        return source.with_overrides(overrides or {})
    return load_ranged(source, overrides)[0]


def load_ranged(source, overrides: dict | None = None) -> tuple:
    """(Scenario, dpsim.bands.Ranged): the scenario at the values of its ranges, and the
    ranges beside it, each checked (ordered, finite, both ends allowed where the value is)."""
    if isinstance(source, Scenario):
        return source.with_overrides(overrides or {}), bands.Ranged(source.to_dict(), {})
    if isinstance(source, dict):
        data = source
    elif isinstance(source, (str, Path)) and (str(source).endswith(".toml") or Path(source).exists()):
        data = read_toml(Path(source))
    elif isinstance(source, str) and source in builtin_names():
        data = read_toml(SCENARIO_DIR / f"{source}.toml")
    else:
        raise ScenarioError("scenario", f"no built-in scenario or file {source!r}; "
                            f"built-ins: {', '.join(builtin_names())}")
    ranged = bands.split(apply_overrides(data, overrides or {}))
    sc = from_dict(ranged.data)
    if ranged.ranges:
        bands.check_ends(ranged, from_dict)
    return sc, ranged
