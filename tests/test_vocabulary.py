"""One vocabulary across both halves: each name defined once, the same algorithm under the same
name in dpsim, mpi_impl and course, and the packages free of import cycles."""
import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

import dpsim
from dpsim import analytic, config, vocabulary
from dpsim.engine import Engine

from dpsim_helpers import star

ROOT = pathlib.Path(__file__).parent.parent
PACKAGES = ("dpsim", "mpi_impl", "course")


def sources(*roots):
    """(path, text) of every Python file and notebook cell source under the given folders."""
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            yield path, path.read_text()
        for path in sorted((ROOT / root).rglob("*.ipynb")):
            cells = json.loads(path.read_text())["cells"]
            yield path, "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


# ------------------------------------------------------------------ one definition each

def test_the_breakdown_parts_are_spelled_out_once():
    # three parts in a row as string literals is a (re)definition of the list
    part = r"""["'](?:compute|data_wait|exposed_comm|compression|straggler_wait|update)["']"""
    pattern = re.compile(rf"{part}\s*,\s*{part}\s*,\s*{part}")
    where = [p.relative_to(ROOT).as_posix() for p, text in sources(*PACKAGES, "lectures") if pattern.search(text)]
    assert where == ["dpsim/vocabulary.py"]


def test_the_onebit_block_is_defined_once():
    pattern = re.compile(r"^\s*\w*(BLOCK|CHUNK|SCALE_EVERY)\w*\s*=\s*256\b", re.MULTILINE)
    where = [p.relative_to(ROOT).as_posix() for p, text in sources(*PACKAGES, "lectures") if pattern.search(text)]
    assert where == ["dpsim/vocabulary.py"]


def test_device_choice_is_defined_once():
    where = [p.relative_to(ROOT).as_posix() for p, text in sources(*PACKAGES) if "def pick_device" in text]
    assert where == ["mpi_impl/device.py"]


def test_every_algorithm_name_is_in_the_vocabulary():
    import mpi_impl
    simulated = set(config.STRATEGIES) - {"none"}
    measured = set(mpi_impl.ALGORITHMS)
    named = set(vocabulary.ALGORITHMS) | set(vocabulary.SHARDED)
    assert simulated <= named and measured <= named
    # what both halves can do is named the same in both
    assert {"ring", "recursive-doubling", "halving-doubling", "ps", "sharded-ps", "mpi"} <= simulated & measured
    assert "tree" not in simulated | measured


def test_the_old_name_tree_is_refused_with_both_new_names():
    with pytest.raises(dpsim.ScenarioError) as e:
        dpsim.load_scenario("d2l-ps-vs-ring", {"sync.strategy": "tree"})
    assert "recursive-doubling" in str(e.value) and "halving-doubling" in str(e.value)


# ------------------------------------------------------------------ the doubling algorithms

def test_halving_doubling_written_out_from_the_textbook():
    m, n, lat_us, gbs = 64e6, 8, 3.0, 12.5
    alpha, beta = 2 * lat_us * 1e-6, 1 / (gbs * 1e9)        # GPU -> switch -> GPU: two hops
    gamma = 3 / (900e9)                                       # the V100 preset's 900 GB/s
    # 3 halving steps of 32, 16, 8 MB (each added), then 3 doubling steps of 8, 16, 32 MB
    by_hand = sum(alpha + s * beta + s * gamma for s in (32e6, 16e6, 8e6)) + \
        sum(alpha + s * beta for s in (8e6, 16e6, 32e6))
    simulated = Engine(dpsim.load_scenario(star(n, gbs, lat_us, params=int(m / 4),
                                                strategy="halving-doubling"))).sync_alone()
    assert simulated == pytest.approx(by_hand, rel=0.01)
    assert analytic.halving_doubling(n, m, alpha, beta, gamma) == pytest.approx(by_hand, rel=0.01)


@pytest.mark.parametrize("n, hd_factor, rd_factor", [(4, 1.5, 2), (8, 1.75, 3), (6, (4 * 1.5 + 4) / 6, (4 * 2 + 4) / 6)])
def test_bytes_per_gpu_of_the_doubling_algorithms(n, hd_factor, rd_factor):
    """Power of two: halving-doubling sends the ring's 2(p-1)/p m, recursive doubling m log2 p.
    n = 6: p = 4 ranks do that, and ranks 4, 5 fold into 0, 1 and get the result back: 4 m
    more in all, the mean taken over the 6."""
    m = 40e6
    sent = {s: dpsim.simulate(star(n, params=int(m / 4), strategy=s)).bytes_sent_per_gpu
            for s in ("halving-doubling", "recursive-doubling")}
    assert sent["halving-doubling"] == pytest.approx(hd_factor * m, rel=1e-9)
    assert sent["recursive-doubling"] == pytest.approx(rd_factor * m, rel=1e-9)


def mpich_allreduce_selection():
    """MPICH's own default choice for MPI_Allreduce, read from the selection tree compiled into
    the libmpi that the `mpich` wheel installed: the oracle for dpsim's `mpi` strategy."""
    libs = sorted(pathlib.Path(sys.prefix, "lib").glob("libmpi.so*")) + \
        sorted(pathlib.Path(sys.prefix, "lib").glob("libmpi.*.dylib"))
    assert libs, f"no libmpi under {sys.prefix}/lib: is the mpich wheel installed?"
    blob = max(libs, key=lambda p: p.stat().st_size).read_bytes()
    key = b'"collective=allreduce":{"comm_type=intra":{"avg_msg_size<=0"'
    at = blob.index(key)
    start, end = blob.rindex(b"\0", 0, at) + 1, blob.index(b"\0", at)
    tree = json.loads(blob[start:end])
    return tree["collective=allreduce"]["comm_type=intra"]


def test_mpi_is_simulated_as_the_algorithm_mpich_picks():
    intra = mpich_allreduce_selection()
    assert list(intra["avg_msg_size<=8"]) == ["algorithm=MPIR_Allreduce_intra_recursive_doubling"]
    built_in = intra["avg_msg_size=any"]["is_op_built_in=yes"]
    assert list(built_in["count<pow2"]) == ["algorithm=MPIR_Allreduce_intra_recursive_doubling"]
    assert list(built_in["count=any"]) == ["algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather"]
    from dpsim.strategies import mpi
    assert mpi.choice(4, 8) == "recursive-doubling"                  # <= 8 bytes
    assert mpi.choice(8, 4 * 7) == "recursive-doubling"              # 7 values < p = 8
    assert mpi.choice(8, 4 * 8) == "halving-doubling"
    m = 64e6
    for n in (3, 4, 8):
        t = {s: Engine(dpsim.load_scenario(star(n, params=int(m / 4), strategy=s))).sync_alone()
             for s in ("mpi", "halving-doubling")}
        assert t["mpi"] == pytest.approx(t["halving-doubling"], rel=1e-12)


# ------------------------------------------------------------------ course maps names straight across

@pytest.mark.parametrize("sync", ["recursive-doubling", "halving-doubling", "ring", "ps", "sharded-ps", "mpi"])
def test_compare_simulates_each_measured_algorithm_under_its_own_name(sync):
    from course import compare
    sc = dpsim.load_scenario(compare.scenario_for(PROFILE, 4, sync, "none"))
    assert sc.sync.strategy == sync


@pytest.mark.parametrize("sync, formula", [("recursive-doubling", analytic.recursive_doubling),
                                           ("halving-doubling", analytic.halving_doubling)])
@pytest.mark.parametrize("ranks", [2, 3, 4])
def test_compare_predicts_the_doubling_algorithms_by_their_closed_forms(sync, formula, ranks):
    from course import compare
    sc = dpsim.load_scenario(compare.scenario_for(PROFILE, ranks, sync, "none"))
    m = 4 * PROFILE["model"]["params"]
    alpha, beta, gamma = 2 * 2e-6, 1 / 5e9, 3 / 10e9          # two hops of the profile's link; its memory
    # halving-doubling's steps are pipelined in mpi_impl's segments, as mpi_impl runs them
    piped = {"segment": vocabulary.SEGMENT_BYTES} if sync == "halving-doubling" else {}
    assert Engine(sc).sync_alone() == pytest.approx(formula(ranks, m, alpha, beta, gamma, **piped), rel=0.01)


PROFILE = {"cluster": {"gpu": {"fp32_tflops": 0.1, "mem_bw_gbs": 10.0},
                       "intra": {"bandwidth_gbs": 5.0, "latency_us": 2.0},
                       "host_link": {"bandwidth_gbs": 5.0, "latency_us": 2.0}},
           "model": {"params": 1_000_000, "flops_per_sample": 1e6}}


# ------------------------------------------------------------------ the packages' shape

def top_level_imports(path, package):
    """Modules of our packages that a file imports when it is loaded (not inside functions)."""
    tree = ast.parse(path.read_text())
    here = path.relative_to(ROOT).with_suffix("").parts
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - node.level] if here[-1] != "__init__" else here[:len(here) - node.level + 1]
                mod = ".".join(base + ((node.module,) if node.module else ()))
            else:
                mod = node.module
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}
    return found


def module_graph():
    files = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return {name: {m for m in top_level_imports(path, name) if m in files and m != name}
            for name, path in files.items()}


def test_no_import_cycles():
    graph = module_graph()
    state = {}

    def visit(node, stack):
        state[node] = "open"
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


def test_the_halves_import_only_the_shared_vocabulary_of_each_other():
    graph = module_graph()
    for name, imports in graph.items():
        if name.startswith("mpi_impl"):
            assert {m for m in imports if m.startswith("dpsim")} <= {"dpsim", "dpsim.vocabulary"}, name
        if name.startswith("dpsim"):
            assert not {m for m in imports if m.startswith(("mpi_impl", "course"))}, name
    text = "\n".join(p.read_text() for p in (ROOT / "dpsim").rglob("*.py"))
    assert not re.search(r"^\s*(import|from)\s+(mpi4py|cupy)\b", text, re.MULTILINE)


def test_importing_the_vocabulary_loads_nothing_else_of_dpsim():
    code = "import sys, dpsim.vocabulary; print(sorted(m for m in sys.modules if m.startswith('dpsim') or m == 'simpy'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['dpsim', 'dpsim.vocabulary']"


def test_the_function_simulate_does_not_hide_a_module():
    import importlib.util
    assert callable(dpsim.simulate)
    assert importlib.util.find_spec("dpsim.simulate") is None
