"""NCCL's double binary tree on the fast path: its steps between nodes are no dpsim.symmetry
shape (a heap and its mirror), so each is simulated transfer by transfer the first time and
replayed after. At 131,072 GPUs a step is 262,128 transfers, so the fast path routes a tree's
edges once for every bucket size (network.Pairs, Sending.resized) and owes a replay's bytes
until they are read (ledger.Replayed). Checked here against the detailed path (every step
simulated, its bytes booked as they move) and against the bytes the tree must send."""
import pytest

from dpsim import network
from dpsim.bench import scenario as bench_scenario
from dpsim.engine import Engine
from dpsim.strategies import tree

SIZES = (3e6, 5e6, 3e6, 7e6, 5e6)     # bucket sizes, some again: replayed steps among them


def uneven(nodes=5, per_node=4):
    """V100s on NVLink 2, EDR between nodes; 5 nodes: trees with a one-child node, N not a power of 2."""
    return bench_scenario(8 * nodes).with_overrides({"cluster.gpus_per_node": per_node, "training.iterations": 2,
                                                    "training.warmup_iterations": 1, "sync.strategy": "double-tree"})


def run_tree(sc, fast):
    """Tree all-reduces of SIZES one after another; (seconds, the engine)."""
    eng = Engine(sc, fast=fast)

    def main():
        for nbytes in SIZES:
            yield from tree.allreduce(eng.machine, eng.cluster.gpus, nbytes)
    eng.env.run(eng.env.process(main()))
    return eng.env.now, eng


def tree_degree(node, nodes):
    """Edges of both trees at a node: its parent in each (none at a root) and its children."""
    a, b = tree.parents(nodes)
    return sum((c == node) + (p == node) for c, p in a + b)


@pytest.mark.parametrize("nodes, per_node", [(5, 4), (4, 8), (7, 2)])
def test_tree_steps_give_the_detailed_answer_and_bytes(nodes, per_node):
    """Same finishing time, the same bytes from every endpoint and over every channel."""
    sc = uneven(nodes, per_node)
    (t_fast, fast), (t_full, full) = run_tree(sc, True), run_tree(sc, False)
    assert fast.machine.replayed_rounds > 0                   # some steps were replayed, not simulated
    assert t_fast == pytest.approx(t_full, rel=1e-12)
    sent_before = {g: fast.machine.sent(g) for g in fast.cluster.gpus}
    fast.machine.settle()
    full.machine.settle()
    assert sent_before == pytest.approx(full.net.bytes_sent, rel=1e-12)
    assert fast.net.bytes_sent == pytest.approx(full.net.bytes_sent, rel=1e-12)
    carried = lambda eng: {k: ch.bytes_carried for k, ch in eng.cluster.channels.items()}
    assert carried(fast) == pytest.approx(carried(full), rel=1e-12, abs=1e-6)


def test_every_gpu_sends_what_the_two_trees_ask():
    """GPU l of node k sends the ring's 2 (g-1)/g m inside its node and m / (2g) on each tree
    edge at node k (up to its parent, down to each child), for every all-reduce of m bytes."""
    nodes, g = 5, 4
    _, eng = run_tree(uneven(nodes, g), True)
    total = sum(SIZES)
    for k in range(nodes):
        expected = 2 * (g - 1) / g * total + tree_degree(k, nodes) * total / (2 * g)
        for gpu in eng.cluster.gpus_of_node(k):
            assert eng.machine.sent(gpu) == pytest.approx(expected, rel=1e-12)


def test_a_tree_is_routed_once_for_every_bucket_size(monkeypatch):
    """Each direction's transfers are made into a Sending once per run (then resized), however
    many bucket sizes travel them: what keeps 131,072 GPUs within a minute."""
    made = []
    sending = network.Network.sending

    def counted(self, moves, routes, overhead=0.0, weights=None):
        made.append(len(moves))
        return sending(self, moves, routes, overhead, weights)
    monkeypatch.setattr(network.Network, "sending", counted)
    nodes = 6
    run_tree(uneven(nodes, 2), True)
    tree_sendings = [n for n in made if n == 2 * 2 * (nodes - 1)]
    assert len(tree_sendings) == 2                            # up and down, for three sizes


def test_the_rings_inside_the_nodes_have_their_shape_found_once(monkeypatch):
    """Every bucket's ring steps inside the nodes go over one list of rings per run, so
    ring.shape (the symmetry of a step) is worked out once, not per bucket: rebuilding the
    list per call made double-tree 5x slower at 16,384 GPUs."""
    from dpsim.strategies import ring
    shapes = []
    found = ring.shape

    def counted(machine, rings):
        shapes.append(id(rings))
        return found(machine, rings)
    monkeypatch.setattr(ring, "shape", counted)
    _, eng = run_tree(uneven(4, 4), True)
    assert len(shapes) >= 2 * len(SIZES) and len(set(shapes)) == 1
    assert ring.node_rings(eng.machine) is ring.node_rings(eng.machine)


def test_a_training_run_on_the_tree_gives_the_detailed_answer():
    sc = uneven(5, 4)
    fast, full = Engine(sc).run(), Engine(sc, fast=False).run()
    assert fast.iteration_time_s == pytest.approx(full.iteration_time_s, rel=1e-9)
    assert fast.bytes_sent_per_gpu == pytest.approx(full.bytes_sent_per_gpu, rel=1e-9)


def test_a_remembered_step_replayed_inside_replayed_rounds_is_owed_every_time():
    """A step seen before, sent again in each of 4 identical rounds (Machine.repeat): the first
    round replays it (its bytes owed once), the other 3 rounds are one wait (owed 3 more times).
    Every GPU's bytes and every channel's, against the detailed path and against 5 sends."""
    moves = [("gpu0", "gpu9", 2e6), ("gpu9", "gpu18", 3e6), ("gpu18", "gpu0", 5e6), ("gpu3", "gpu12", 1e6)]
    results = []
    for fast in (True, False):
        eng = Engine(uneven(3, 8), fast=fast)

        def main():
            yield eng.machine.send(list(moves))
            yield from eng.machine.repeat(4, lambda: (yield eng.machine.send(list(moves))))
        eng.env.run(eng.env.process(main()))
        eng.machine.settle()
        results.append((eng.env.now, dict(eng.net.bytes_sent),
                        {k: ch.bytes_carried for k, ch in eng.cluster.channels.items()}))
    if results[0][0] == 0:
        pytest.fail("nothing simulated")
    assert results[0][1] == pytest.approx({s: 5 * n for s, _, n in moves}, rel=1e-12)
    assert results[0][1] == pytest.approx(results[1][1], rel=1e-12)
    assert results[0][2] == pytest.approx(results[1][2], rel=1e-12, abs=1e-6)
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-12)
