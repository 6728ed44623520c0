"""Which configurations course compare runs, in which order, and what each is called.

A configuration is (ranks, sync, compress). One rank syncs nothing, so it appears once. 1-bit
and top-k ignore --sync (1-bit's all-to-all and all-gather, top-k's all-gather), so each
appears once per rank count, under the first all-reduce sync. ZeRO reduce-scatters
full-precision gradients, so it pairs with no compression. Runs go round after round, every
configuration once a round, so a busy minute hits different configurations in different rounds.
"""
from dpsim.vocabulary import ONEBIT_EXCHANGE_STEPS, ONEBIT_OWN_EXCHANGE, SHARDED

OWN_EXCHANGE = ("1bit", "topk")        # compressions whose exchange ignores --sync (an all-to-all, an all-gather)


ONEBIT_NOTE = (f"1bit: mpi_impl's {ONEBIT_OWN_EXCHANGE} ({ONEBIT_EXCHANGE_STEPS}) "
               "whatever --sync says, and so does dpsim's: one run per rank count, not one per sync")


def configurations(ranks, syncs, compresses):
    """(ranks, sync, compress); one rank has nothing to sync, so it appears once; 1-bit and
    top-k ignore the sync (ONEBIT_NOTE; top-k all-gathers), so each appears once per rank
    count, under the first all-reduce sync; ZeRO reduce-scatters full-precision gradients, so it
    pairs with no compression (both halves refuse the others)."""
    reduce_syncs = [s for s in syncs if s not in SHARDED]
    out = []
    for n in ranks:
        if n == 1:
            out.append((1, "ring", "none"))
            continue
        for s in syncs:
            for c in compresses:
                if s in SHARDED and c != "none":
                    continue
                if c in OWN_EXCHANGE and (not reduce_syncs or s != reduce_syncs[0]):
                    continue
                out.append((n, s, c))
    return out


def name_of(ranks, sync, compress):
    if ranks == 1:
        return "1 rank (no sync)"
    if compress in OWN_EXCHANGE:
        return f"{ranks} ranks {compress}"
    return f"{ranks} ranks {sync}" + (f"+{compress}" if compress != "none" else "")


def probe_block(sync, compress):
    """The block course.probe times for a run: 1-bit's own, the run's all-reduce, or the ring
    standing in for the rhythm of ZeRO, PowerSGD and top-k (course.probe runs all-reduces)."""
    if compress == "1bit":
        return "1bit"
    return sync if compress == "none" and sync not in SHARDED else "ring"


def schedule(configs, repeats, probe=False):
    """The order of the work: round after round, every configuration once a round; with
    probe, a probe of the run's rank count and sync right before each run. Items:
    ("probe", ranks, syncs) or ("run", (ranks, sync, compress))."""
    items = []
    for _ in range(repeats):
        for n, sync, comp in configs:
            if probe:
                items.append(("probe", n, () if n == 1 else (probe_block(sync, comp),)))
            items.append(("run", (n, sync, comp)))
    return items
