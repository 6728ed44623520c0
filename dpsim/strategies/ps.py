"""Parameter server: every GPU sends its whole gradient to one place, which sums and sends back.

The d2l.ai lecture's first two designs: aggregate on GPU 0 (`ps_location = "gpu0"`) or on
the host CPU (`ps_location = "cpu"`, the host of node 0).
  gather:    the other ranks send m bytes each to the server at once; they share the
             server's incoming link, so this takes about (senders) m beta.
  sum:       the server adds (senders) arrays of m bytes (on the CPU at host memory speed).
  broadcast: the server sends the m-byte sum to every rank, sharing its outgoing link.
Cost on GPU 0:  2 alpha + 2 (n-1) m beta + (n-1) m gamma   -- grows with n.
On the CPU all n GPUs send and receive, and the GPUs under one PCIe switch share its uplink
to the host: 2 alpha + 2 (GPUs per switch) m beta_pcie + n m gamma_host when the uplinks are
the bottleneck.
With sync.ps_pull = "before-forward" (TensorFlow 1.x's parameter servers: a worker reads the
variables it needs at the start of the next step) the broadcast leaves the sync and runs before
forward, where backward cannot hide it.
With the update on the CPU server too, add (params x 20 bytes) / host memory bandwidth: it
runs bucket by bucket while the GPUs are still in backward, so with overlap it is hidden.
The gather and the broadcast are dpsim.symmetry.Star steps: node 0 apart, every other node
alike, simulated one flow per kind.
"""
from ..symmetry import Star


def server_of(ranks, location):
    return ranks[0] if location == "gpu0" else "host0"


def pull(machine, ranks, nbytes, location="gpu0"):
    """The workers fetch nbytes of summed gradient (or updated weights) from the server."""
    server = server_of(ranks, location)
    yield machine.send(Star(server, tuple(ranks), nbytes, inward=False), "ps-pull")


def allreduce(machine, ranks, nbytes, location="gpu0", update_s_per_param=0.0, with_pull=True):
    """update_s_per_param > 0: the server also applies the update and sends back weights
    (MXNet's kvstore with the optimizer on the CPU); the GPUs then skip their own update.
    with_pull False (sync.ps_pull = "before-forward", TensorFlow 1.x): push and sum only; the
    workers pull before the next forward (engine)."""
    server = server_of(ranks, location)
    senders = [r for r in ranks if r != server]
    yield machine.send(Star(server, tuple(ranks), nbytes, inward=True), "ps-gather")
    summands = len(senders) if location == "gpu0" else len(senders) - 1
    yield machine.reduce([server], summands * nbytes)
    if update_s_per_param:
        yield machine.update(server, nbytes / 4, update_s_per_param)
    if with_pull:
        yield machine.send(Star(server, tuple(ranks), nbytes, inward=False), "ps-broadcast")
