"""The layer rules of docs/ARCHITECTURE.md, checked on the source: which package may import
which, and no import cycle among the project's modules.

Every import counts, a function-level (lazy) one included: it runs as surely as one at the top,
only later. Importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first, so a module
depends on the packages above what it imports, except the packages it is itself inside (they are
already being imported when it runs).
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("dpsim", "mpi_impl", "course")

# What a package may not import (a prefix forbids the module and everything under it).
FORBIDDEN = {
    "dpsim": ("mpi4py", "cupy", "cupyx", "mpi_impl", "course"),
    "mpi_impl": ("course",),
}
# What a package may import from another project package, where not everything is allowed.
ONLY_FROM = {("mpi_impl", "dpsim"): ("dpsim.vocabulary",)}

# dpsim's layers, lowest first (docs/ARCHITECTURE.md): a module imports only from its own layer
# or the layers below. Every dpsim module is in one: a new module must be placed here.
DPSIM_LAYERS = {
    "words and tables": ("vocabulary", "errors", "files", "limits", "hardware", "models", "results", "compute",
                         "sharing", "nvlink", "transports", "software", "contention", "nccl_tuning"),
    "the wires": ("maxmin", "network", "ledger", "duet", "replay", "symmetry", "cluster", "trace"),
    "the algorithms": ("strategies", "strategies.*"),
    "the scenario": ("specs", "sections", "overrides", "bands", "derived", "config"),
    "the simulation": ("machine", "workload", "memory", "pipeline", "analytic", "engine", "diagnosis"),
    "what users call": ("simulation", "collective", "sweeps", "validate", "bench", "report", "plot",
                        "scenario_file", "cli_sweep", "cli", "__main__", ""),
}


def module_name(root, path):
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(root, path, project):
    """The modules `path` imports, as absolute dotted names."""
    name = module_name(root, path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            for a in node.names:                # `from pkg import mod` imports the module pkg.mod
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in project else base)
    return out


def dependencies(name, imported):
    """Every module that importing `imported` runs, seen from module `name`."""
    mine = name.split(".")
    inside = {".".join(mine[:i]) for i in range(1, len(mine) + 1)}
    parts = imported.split(".")
    above = {".".join(parts[:i]) for i in range(1, len(parts))}
    return {imported} | (above - inside)


def import_graph(root=ROOT, packages=PACKAGES):
    """{module: the modules its import statements name}."""
    files = {module_name(root, p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    return {name: imports_of(root, path, files) for name, path in files.items()}


def rule_breaks(graph):
    """(importer, imported, rule) for every import against FORBIDDEN or ONLY_FROM."""
    out = []
    for name, deps in graph.items():
        package = name.split(".")[0]
        for d in sorted(deps):
            top = d.split(".")[0]
            if any(d == f or d.startswith(f + ".") for f in FORBIDDEN.get(package, ())):
                out.append((name, d, f"{package} never imports {top}"))
            allowed = ONLY_FROM.get((package, top))
            if allowed is not None and d not in allowed:
                out.append((name, d, f"{package} imports only {', '.join(allowed)} from {top}"))
    return out


def layer_of(module, layers=DPSIM_LAYERS):
    """The index of the dpsim layer that holds `module` ("dpsim.strategies.ring"), or None."""
    name = module[len("dpsim."):] if module.startswith("dpsim.") else "" if module == "dpsim" else None
    for i, members in enumerate(layers.values()):
        for m in members:
            if name == m or m.endswith(".*") and name.startswith(m[:-1]):
                return i
    return None


def layer_breaks(graph, layers=DPSIM_LAYERS):
    """(importer, imported, why) for every dpsim module in no layer, and every import upwards."""
    names = list(layers)
    out = []
    for module, deps in sorted(graph.items()):
        if module.split(".")[0] != "dpsim":
            continue
        mine = layer_of(module, layers)
        if mine is None:
            out.append((module, "", "in no layer of DPSIM_LAYERS"))
            continue
        for d in sorted(deps):
            theirs = layer_of(d, layers) if d.split(".")[0] == "dpsim" else None
            if theirs is not None and theirs > mine:
                out.append((module, d, f"'{names[mine]}' imports from a layer above, '{names[theirs]}'"))
    return out


def cycles(graph):
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    project = set(graph)
    runs = {m: set().union(set(), *(dependencies(m, d) for d in deps)) for m, deps in graph.items()}
    edges = {m: sorted(d for d in deps if d in project and d != m) for m, deps in runs.items()}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


# ---------------------------------------------------------------- the project itself

def test_no_package_imports_against_the_rules():
    assert rule_breaks(import_graph()) == []


def test_no_import_cycles():
    assert cycles(import_graph()) == []


def test_dpsim_imports_only_downwards():
    assert layer_breaks(import_graph()) == []


# ---------------------------------------------------------------- the checks can fail

def write(root, files):
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


CLEAN = {"dpsim/__init__.py": "", "dpsim/vocabulary.py": "", "dpsim/engine.py": "from . import vocabulary\n",
         "mpi_impl/__init__.py": "", "mpi_impl/ring.py": "from dpsim.vocabulary import MIB\n",
         "course/__init__.py": "", "course/compare.py": "import dpsim\nimport mpi_impl.ring\n"}


def test_a_clean_tree_passes(tmp_path):
    write(tmp_path, CLEAN)
    graph = import_graph(tmp_path)
    assert rule_breaks(graph) == [] and cycles(graph) == []


@pytest.mark.parametrize("rel,text,rule", [
    ("dpsim/engine.py", "def f():\n    import mpi4py.MPI\n", "dpsim never imports mpi4py"),
    ("dpsim/engine.py", "import cupy\n", "dpsim never imports cupy"),
    ("dpsim/engine.py", "from course import compare\n", "dpsim never imports course"),
    ("mpi_impl/ring.py", "from dpsim import engine\n", "mpi_impl imports only dpsim.vocabulary from dpsim"),
    ("mpi_impl/ring.py", "import dpsim\n", "mpi_impl imports only dpsim.vocabulary from dpsim"),
    ("mpi_impl/ring.py", "from course.compare import x\n", "mpi_impl never imports course"),
])
def test_an_import_against_the_rules_is_found(tmp_path, rel, text, rule):
    write(tmp_path, {**CLEAN, rel: text})
    breaks = rule_breaks(import_graph(tmp_path))
    assert len(breaks) == 1 and rule in breaks[0][2]


def test_a_cycle_is_found_through_a_lazy_import_and_a_package(tmp_path):
    write(tmp_path, {**CLEAN, "dpsim/strategies/__init__.py": "from . import ring\n",
                     "dpsim/strategies/ring.py": "from ..machine import Machine\n",
                     "dpsim/machine.py": "def cost():\n    from .strategies.ring import steps\n"})
    assert cycles(import_graph(tmp_path)) == [["dpsim.machine", "dpsim.strategies", "dpsim.strategies.ring"]]


def test_siblings_importing_each_other_through_their_package_are_not_a_cycle(tmp_path):
    write(tmp_path, {**CLEAN, "mpi_impl/__init__.py": "from .ring import allreduce\n",
                     "mpi_impl/ring.py": "from . import wire\n", "mpi_impl/wire.py": ""})
    assert cycles(import_graph(tmp_path)) == []


def test_an_import_upwards_in_dpsim_is_found(tmp_path):
    write(tmp_path, {**CLEAN, "dpsim/network.py": "def rates():\n    from .engine import Engine\n"})
    breaks = layer_breaks(import_graph(tmp_path))
    assert breaks == [("dpsim.network", "dpsim.engine", "'the wires' imports from a layer above, 'the simulation'")]


def test_a_dpsim_module_in_no_layer_is_found(tmp_path):
    write(tmp_path, {**CLEAN, "dpsim/newthing.py": ""})
    assert [b[0] for b in layer_breaks(import_graph(tmp_path))] == ["dpsim.newthing"]


def test_architecture_doc_places_every_module():
    """docs/ARCHITECTURE.md names every module of the three packages, and each dpsim layer's row
    lists exactly the modules DPSIM_LAYERS puts in it."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for pkg in PACKAGES:
        for path in (ROOT / pkg).glob("*.py"):
            if path.name != "__init__.py" and pkg != "dpsim":
                assert f"`{path.name}`" in doc, path
    for i, (layer, members) in enumerate(DPSIM_LAYERS.items(), start=1):
        row = next(line for line in doc.splitlines() if line.startswith(f"| {i}. {layer} |"))
        named = set(re.findall(r"`([\w./*]+)`", row.split("|")[2]))
        assert named == {m.replace("strategies.*", "strategies/*") for m in members if m and m != "strategies"} \
            | ({"strategies/*"} if "strategies" in members else set()), layer
