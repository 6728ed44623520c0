"""Sharded parameter server: each GPU is the server for 1/n of the gradient (d2l.ai's third
design; a key-value store with its keys spread over the servers).

  scatter-reduce: every rank sends shard j (m/n bytes) to rank j, all at once, and each rank
                  sums the n-1 shards it receives.
  broadcast:      every rank sends its summed shard to every other rank.
Cost with every rank on its own link:  2 alpha + 2 (n-1)/n m beta + (n-1)/n m gamma.
The same bytes as the ring in two steps instead of 2(n-1), but n(n-1) transfers in flight at
once: it needs a network where all pairs can talk at full speed (a switch), and it loses to
the ring where links are shared (a PCIe uplink).
"""
from ..symmetry import AllPairs


def allreduce(machine, ranks, nbytes):
    n = len(ranks)
    shard = nbytes / n
    pairs = AllPairs(tuple(ranks), shard)        # every rank sends a shard to every other
    yield from machine.send_reduce(pairs, ranks, (n - 1) * shard, "shard-reduce")
    yield machine.send(pairs, "shard-broadcast")
