"""2D-torus all-reduce (Mikami et al., "Massively Distributed SGD: ImageNet/ResNet-50 Training
in a Flash", arXiv:1811.05233, Sony 2018): the GPUs form an X x Y grid.
  1. reduce-scatter along every horizontal ring of X GPUs: each GPU owns 1/X of its row's sum;
  2. all-reduce that 1/X along every vertical ring of Y GPUs (all X columns at once);
  3. all-gather along the horizontal rings.
Rows are X consecutive ranks (`sync.torus_x`; 0 = the GPUs of a node, which makes it the
hierarchical all-reduce). Cost with X Y = n:
  2(X-1) (alpha_h + m/(X B_h)) + 2(Y-1) (alpha_v + m/(X Y B_v)) + gammas
Only 2(X-1) + 2(Y-1) steps pay a latency, against 2(n-1) for one ring.
"""
from ..errors import ScenarioError
from . import ring


def grid(machine, ranks, x):
    """(rows, columns) of x-wide rows, built once per run (Machine.memo: ring.shape reads each once)."""
    key = ("torus2d", x)
    memo = machine.memo.get(key)
    if memo is None or memo[0] != ranks:
        rows = [ranks[i:i + x] for i in range(0, len(ranks), x)]
        memo = machine.memo[key] = (ranks, rows, [[row[c] for row in rows] for c in range(x)])
    return memo[1:]


def allreduce(machine, ranks, nbytes, width=0):
    """width: X, the GPUs of a row (sync.torus_x); 0 = a node's GPUs."""
    x = width or machine.cluster.gpus_per_node
    rows, columns = grid(machine, ranks, x)
    yield from ring.reduce_scatter(machine, rows, nbytes)
    if len(rows) > 1:
        yield from ring.reduce_scatter(machine, columns, nbytes / x)
        yield from ring.all_gather(machine, columns, nbytes / x)
    yield from ring.all_gather(machine, rows, nbytes)


def check(sc):
    x = sc.sync.torus_x or sc.cluster.gpus_per_node
    if sc.gpus % x:
        raise ScenarioError("sync.torus_x", f"the grid's width must divide the {sc.gpus} GPUs, got {x}")
