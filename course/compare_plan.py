"""Which configurations course compare runs, in which order, and what each is called.

A configuration is (ranks, sync, compress). One rank syncs nothing, so it appears once. 1-bit
and top-k ignore --sync (1-bit's all-to-all and all-gather, top-k's all-gather), so each
appears once per rank count, under the first all-reduce sync. PowerSGD wraps an all-reduce, so
it pairs with every all-reduce sync. ZeRO reduce-scatters full-precision gradients, so it pairs
with no compression; when --sync names only ZeRO stages, the compressions run over the ring
(RING_NOTE). Each compression runs with the same settings in both halves (SETTINGS). Runs go
round after round, every configuration once a round, so a busy minute hits different
configurations in different rounds.
"""
from dpsim.vocabulary import ONEBIT_EXCHANGE_STEPS, ONEBIT_OWN_EXCHANGE, SHARDED

OWN_EXCHANGE = ("1bit", "topk")        # compressions whose exchange ignores --sync (an all-to-all, an all-gather)
RING = "ring"                          # the all-reduce the compressions run over when --sync names only ZeRO

# Each compression's own settings, one value for both halves: (dpsim's scenario key, mpi_impl.train's
# option, the value). Rank 1 is PyTorch's PowerSGD default and both halves' default; top-k's 1% too.
SETTINGS = {"powersgd": (("powersgd_rank", "--powersgd-rank", 1),),
            "topk": (("topk_ratio", "--topk-ratio", 0.01),)}

ONEBIT_NOTE = (f"1bit: mpi_impl's {ONEBIT_OWN_EXCHANGE} ({ONEBIT_EXCHANGE_STEPS}) "
               "whatever --sync says, and so does dpsim's: one run per rank count, not one per sync")


def ring_note(compresses):
    """The note for compressions that wrap an all-reduce, asked with only ZeRO syncs."""
    return (f"{', '.join(compresses)}: compression wraps an all-reduce and --sync names only ZeRO stages "
            f"(which reduce-scatter full-precision gradients), so {'they run' if len(compresses) > 1 else 'it runs'} "
            f"over {RING}")


def compress_syncs(syncs):
    """The syncs a compression runs over: the all-reduces of --sync, else the ring."""
    return [s for s in syncs if s not in SHARDED] or [RING]


def configurations(ranks, syncs, compresses):
    """(ranks, sync, compress); one rank has nothing to sync, so it appears once; 1-bit and
    top-k ignore the sync (ONEBIT_NOTE; top-k all-gathers), so each appears once per rank
    count, under the first all-reduce sync; ZeRO reduce-scatters full-precision gradients, so it
    pairs with no compression (both halves refuse the others), and a compression asked with only
    ZeRO syncs runs over the ring (ring_note)."""
    reduce_syncs = compress_syncs(syncs)
    out = []
    for n in ranks:
        if n == 1:
            out.append((1, "ring", "none"))
            continue
        for s in syncs:
            for c in compresses:
                if s in SHARDED and c != "none" or c in OWN_EXCHANGE and s != reduce_syncs[0]:
                    continue
                out.append((n, s, c))
        if reduce_syncs[0] not in syncs:                 # only ZeRO asked: compressions over the ring
            out += [(n, RING, c) for c in compresses if c != "none"]
    return out


def notes(syncs, compresses):
    """The lines under compare's table that say how a configuration was run."""
    out = [ONEBIT_NOTE] if len(syncs) > 1 and "1bit" in compresses else []
    compressed = [c for c in compresses if c != "none" and c not in OWN_EXCHANGE]
    if compressed and all(s in SHARDED for s in syncs):
        out.append(ring_note(compressed))
    return out


def train_options(compress):
    """mpi_impl.train's options for a compression's settings (SETTINGS)."""
    return [str(x) for _, option, value in SETTINGS.get(compress, ()) for x in (option, value)]


def sync_keys(compress):
    """dpsim's sync keys for the same settings."""
    return {key: value for key, _, value in SETTINGS.get(compress, ())}


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
