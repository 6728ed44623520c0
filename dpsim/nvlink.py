"""NVLink inside a node: which GPU pairs are linked and by how many links, and the rings an
all-reduce lays over them.

  graph(g, links_per_gpu)  {(a, b): links} for a node of g GPUs (local indices, a < b)
  rings(graph, g)          directed rings over that graph, as NCCL builds its channels

A link is full duplex: one link between a and b carries a ring a -> b and another b -> a at
the same time, each at the link's bandwidth. Standard library only; nothing here knows about
the rest of dpsim.
"""

# DGX-1 with eight V100s: the "hybrid cube mesh", 6 NVLink 2.0 links per GPU, 24 in all.
# GPUs sit at the corners of a cube, all 12 edges linked (some by 2 links), and two opposite
# faces (GPUs 0-3 and 4-7) have their diagonals linked too (NVIDIA whitepaper "NVIDIA DGX-1
# With Tesla V100 System Architecture", section "DGX-1 NVLink Network Topology"). Which index
# sits where and which pairs have two links is `nvidia-smi topo -m` on DGX-1V machines (NV1 /
# NV2 per pair); three public copies agree with this table: the DGX-1 example in Microway's
# tech tip "nvidia-smi: Control Your GPUs", the DGX-1 output pasted into microsoft/msccl-tools'
# tests/test_topologies.py, and NCCL's topology dump in NVIDIA/nccl issue #671 (GPUs 0-3 of a
# DGX-1V by PCI bus id: 0 -> 1:1, 2:1, 3:2, 4:2; 1 -> 2:2, 3:1, 5:2). The pairs are the P100
# machine's below; the 8 doubled ones form the cycle 0-3-2-1-5-6-7-4. (msccl-tools' own
# dgx1() table is the same graph under another numbering of the GPUs.)
DGX1_V100 = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2,
    (1, 2): 2, (1, 3): 1, (1, 5): 2,
    (2, 3): 2, (2, 6): 1,
    (3, 7): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 2,
    (5, 6): 2, (5, 7): 1,
    (6, 7): 2,
}

# DGX-1 with eight P100s: 4 NVLink 1.0 links per GPU, 16 in all, one per linked pair: GPUs
# 0-3 and 4-7 each fully connected, and GPU i linked to GPU i + 4 (NVIDIA whitepaper "NVIDIA
# DGX-1 System Architecture", WP-08437-001, its hybrid cube-mesh figure; indices from
# `nvidia-smi topo -m` on the University of Sheffield's DGX-1 (P100), every linked pair NV1,
# printed in the Sheffield RSE course page "Lab 05: Multi-GPU and Benchmarking",
# /education/intro_dl_sharc_dgx1/lab05/).
DGX1_P100 = {
    (0, 1): 1, (0, 2): 1, (0, 3): 1, (1, 2): 1, (1, 3): 1, (2, 3): 1,
    (4, 5): 1, (4, 6): 1, (4, 7): 1, (5, 6): 1, (5, 7): 1, (6, 7): 1,
    (0, 4): 1, (1, 5): 1, (2, 6): 1, (3, 7): 1,
}

# Steps of the cycle search (one step: one GPU added to a partial cycle) before rings() settles
# for the best set it has found (about 0.1 s). The DGX-1s take under 60 steps, full meshes of up
# to 12 GPUs under 13,000; full meshes of 14 and 16 GPUs take 100,000-160,000, and with 4 or
# more links per pair some stop short (14 GPUs with 4 per pair: 50 cycles of 52).
SEARCH_STEPS = 200_000


def graph(g: int, links_per_gpu: int) -> dict[tuple[int, int], int]:
    """The NVLink graph of a node of g GPUs with `links_per_gpu` links each.

    1 GPU: no links. 8 GPUs with 6 links: DGX-1 (V100); with 4: DGX-1 (P100). When g - 1
    divides the links, a full mesh with links_per_gpu // (g - 1) links per pair (an HGX A100
    4-GPU board: 4 GPUs x 12 links, 4 per pair; a DGX Station V100: 4 x 6, 2 per pair; two GPUs
    put every link on their one pair). Any other shape raises ValueError."""
    if g < 1:
        raise ValueError(f"a node needs at least one GPU, not {g}")
    if g == 1:
        return {}
    if g == 8 and links_per_gpu == 6:
        return dict(DGX1_V100)
    if g == 8 and links_per_gpu == 4:
        return dict(DGX1_P100)
    if links_per_gpu > 0 and links_per_gpu % (g - 1) == 0:
        per_pair = links_per_gpu // (g - 1)
        return {(a, b): per_pair for a in range(g) for b in range(a + 1, g)}
    raise ValueError(
        f"no NVLink graph for {g} GPUs with {links_per_gpu} links each: known are a full mesh "
        f"(g - 1 divides the links) and the DGX-1's 8 GPUs with 4 or 6; GPUs joined by NVSwitch "
        f"(8 A100s or H100s) use intra = \"nvswitch\", or use intra = \"pcie4\"")


def rings(graph: dict[tuple[int, int], int], g: int) -> list[list[int]]:
    """Directed rings over an NVLink graph, as NCCL lays its ring channels inside a node.

    Model: the all-reduce's bytes are split evenly over the rings and the rings run at once.
    Each ring is a Hamiltonian cycle (every GPU once) that holds one link of every pair it
    crosses, in one direction; so with r rings and per-link bandwidth b every GPU sends at r*b
    and receives at r*b. Undirected cycles are found that share no link (a pair with two links
    can carry two of them) and each is returned in both directions, since a link is full
    duplex. NCCL's own search (its topology/search code) also tries trees, several speeds
    per channel and paths through the PCIe tree; none of that is here.

    The search: cycles are taken one after another, each by backtracking over the GPUs that
    still have a free link to the last one (lowest index first). Taking the first cycle found
    each time (greedy) can strand links: on the DGX-1 V100 it finds 2 cycles where 3 exist (the
    8 links its two cycles leave form shorter cycles, not one through all 8 GPUs), on
    4 GPUs with 2 or 4 links per pair it finds 2 of 3 and 4 of 6 (it repeats one cycle until
    its pairs run out), and on full meshes of 13 and 15 GPUs 5 of 6 and 6 of 7. So the search
    backtracks over the cycles already taken too, and stops at the first set that reaches the
    bound every GPU imposes (a cycle uses two of its links: at most links // 2 cycles), or at
    the best set found within SEARCH_STEPS. Full meshes of an odd number of GPUs skip the
    search: Walecki's construction splits them into (g - 1) / 2 cycles per link of a pair.

    Each ring is a list of local indices starting at 0. 1 GPU: [[0]]. 2 GPUs: one ring [0, 1]
    per link (a 2-ring uses its link both ways). No Hamiltonian cycle: [].
    """
    if g == 1:
        return [[0]]
    if g == 2:
        return [[0, 1] for _ in range(graph.get((0, 1), 0))]
    links = {(a, b): k for (a, b), k in graph.items() if k > 0}
    cycles = _walecki(links, g) or _decompose(links, g)
    out = []
    for c in cycles:
        out += [c, [c[0]] + c[:0:-1]]
    return out


def _walecki(links, g):
    """Walecki's Hamiltonian decomposition when the graph is a full mesh of an odd number of
    GPUs (k links per pair: k copies of it); None otherwise. GPUs 0..g-2 on a circle, g-1 at
    the centre; cycle i runs centre, i, i+1, i-1, i+2, i-2, ..., i+m, centre (m = (g-1)/2),
    and m such zigzags, i = 0..m-1, use every chord of the circle exactly once."""
    per_pair = set(links.values())
    if g % 2 == 0 or len(links) != g * (g - 1) // 2 or len(per_pair) != 1:
        return None
    m, centre = (g - 1) // 2, g - 1
    cycles = []
    for i in range(m):
        zigzag = [(i + (j + 1) // 2 if j % 2 else i - j // 2) % (2 * m) for j in range(2 * m)]
        cycles.append(_from_zero([centre] + zigzag))
    return cycles * per_pair.pop()


def _from_zero(cycle):
    """The same undirected cycle, started at GPU 0, its second GPU below its last."""
    i = cycle.index(0)
    c = cycle[i:] + cycle[:i]
    return c if c[1] < c[-1] else [0] + c[:0:-1]


class _OutOfSteps(Exception):
    pass


def _decompose(links, g):
    """Link-disjoint Hamiltonian cycles: the most found (see rings()), in the order taken."""
    free = dict(links)
    degree = [0] * g
    for (a, b), k in links.items():
        degree[a] += k
        degree[b] += k
    ceiling = min(degree) // 2
    best, taken, steps = [], [], [0]

    def use(cycle, d):
        for x, y in zip(cycle, cycle[1:] + cycle[:1]):
            free[min(x, y), max(x, y)] -= d
            degree[x] -= d
            degree[y] -= d

    def extend(after):
        nonlocal best
        if len(taken) > len(best):
            best = list(taken)
        if len(best) == ceiling or len(taken) + min(degree) // 2 <= len(best):
            return
        for cycle in _cycles(free, g, after, steps):
            use(cycle, 1)
            taken.append(cycle)
            extend(cycle)
            taken.pop()
            use(cycle, -1)
            if len(best) == ceiling:
                return

    try:
        extend(None)
    except _OutOfSteps:
        pass
    return best


def _cycles(free, g, after, steps):
    """Hamiltonian cycles over the pairs with a free link, each once (from 0, second GPU below
    the last), in lexicographic order and none before `after` (cycles are taken in order, so a
    set is not tried again as a permutation of itself)."""
    near = {a: [] for a in range(g)}
    for (a, b), k in sorted(free.items()):
        if k > 0:
            near[a].append(b)
            near[b].append(a)
    for a in near:
        near[a].sort()
    path, on = [0], [True] + [False] * (g - 1)

    def grow(tight):
        steps[0] += 1
        if steps[0] > SEARCH_STEPS:
            raise _OutOfSteps
        if len(path) == g:
            if 0 in near[path[-1]] and path[1] < path[-1]:
                yield list(path)
            return
        low = after[len(path)] if tight else -1
        for n in near[path[-1]]:
            if n >= low and not on[n]:
                path.append(n)
                on[n] = True
                yield from grow(tight and n == low)
                on[n] = False
                path.pop()

    yield from grow(after is not None)
