"""ZeRO stage 3 / FSDP: parameters sharded too (Rajbhandari et al., "ZeRO", SC 2020, section 5.3;
Zhao et al., "PyTorch FSDP", VLDB 2023, section 3).

Each GPU keeps 1/n of the parameters, gradients and optimizer state (dpsim.memory). The model
is cut into units, the gradient buckets of dpsim.workload (layers in backward order up to
`sync.bucket_mib`, as FSDP's size-based wrapping groups them; bucket_mib = 0: one unit), and:
  forward:   before a unit computes, its parameters are all-gathered (m_u bytes), then freed
             after use;
  backward:  each unit's parameters are all-gathered again, its backward computes, and its
             gradient is reduce-scattered (each GPU keeps its 1/n of the sum);
  update:    each GPU updates its 1/n (hook `update_fraction`); nothing is gathered after it.
With `sync.overlap = true` the next unit's all-gather is issued when a unit starts computing
(FSDP's forward and backward prefetch), so it hides behind that unit's compute, and the
reduce-scatters run one after another on their own stream beside the gathers (sharing the
links with them). With overlap off: gather, compute, gather, compute, ..., then every
reduce-scatter after backward.
Cost with overlap off (a_u = (n-1)(alpha + m_u/n beta), r_u = a_u + (n-1) m_u/n gamma,
f_u and b_u the unit's forward and backward compute):
  sum_u (a_u + f_u) + sum_u (a_u + b_u) + sum_u r_u + update / n    (analytic.zero3_iteration)
Bytes sent per GPU: 3 (n-1)/n m, 1.5x an all-reduce's (ZeRO, section 7.2.2).
With overlap, backward's gathers and reduce-scatters share the links, so on the fast path they
run `together` (Machine.together: dpsim.duet times them beside each other without SimPy).
"""
from .zero1 import all_gather, allreduce, check, reduce_scatter, update_fraction  # noqa: F401


def units(work, seconds):
    """(bytes, compute seconds) of each unit in forward order; `seconds` (forward's or backward's)
    shared out as backward's time is between the buckets (dpsim.workload: ready_s)."""
    ready = [0.0] + [b.ready_s for b in work.buckets]
    share = [(after - before) / work.backward_s if work.backward_s else 1 / len(work.buckets)
             for before, after in zip(ready, ready[1:])]
    return [(b.nbytes, s * seconds) for b, s in zip(work.buckets, share)][::-1]


def gathered_then_computed(machine, ranks, parts, compute, prefetch, after=None):
    """Each (bytes, seconds) part: all-gather its parameters, then compute; with prefetch the
    next part's all-gather starts as this one's compute does. after(nbytes): run once a part
    has computed (backward's reduce-scatter), as its own process, one after another; the
    gathers then run `together` with it (Machine.together)."""
    env, previous, together = machine.env, None, after is not None
    gather = env.process(all_gather(machine, ranks, parts[0][0], together)) if prefetch else None
    for i, (nbytes, seconds) in enumerate(parts):
        if prefetch:
            yield gather
            if i + 1 < len(parts):
                gather = env.process(all_gather(machine, ranks, parts[i + 1][0], together))
        else:
            yield from all_gather(machine, ranks, nbytes)
        yield compute(seconds)
        if after is not None:
            previous = env.process(_after(previous, after(nbytes)))
    if previous is not None:
        yield previous


def _after(previous, gen):
    if previous is not None:
        yield previous
    yield from gen


def forward_pass(machine, ranks, work, compute, overlap, sync):
    """Forward unit by unit, each gathered first (prefetched with overlap)."""
    yield from gathered_then_computed(machine, ranks, units(work, work.forward_s), compute, overlap)


def backward_pass(machine, ranks, work, compute, overlap, sync):
    """Backward in reverse, each unit gathered again, its gradient reduce-scattered by `sync`
    as soon as it is computed (overlap), else all after backward."""
    parts = units(work, work.backward_s)[::-1]
    if overlap:
        rs = (lambda nbytes: reduce_scatter(machine, ranks, nbytes, together=True)) if sync is allreduce else \
            (lambda nbytes: sync(machine, ranks, nbytes))
        yield from gathered_then_computed(machine, ranks, parts, compute, True, after=rs)
        return
    yield from gathered_then_computed(machine, ranks, parts, compute, False)
    for nbytes, _ in parts:
        yield from sync(machine, ranks, nbytes)


def broadcast_weights(machine, ranks, work):
    """One sync on its own (Engine.sync_alone) counts forward's and backward's all-gathers."""
    for _ in range(2):
        for bucket in work.buckets:
            yield from all_gather(machine, ranks, bucket.nbytes)
