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
With the update on the CPU server too, add (params x 20 bytes) / host memory bandwidth: it
runs bucket by bucket while the GPUs are still in backward, so with overlap it is hidden.
"""


def allreduce(machine, ranks, nbytes, location="gpu0", update_s_per_param=0.0):
    """update_s_per_param > 0: the server also applies the update and sends back weights
    (MXNet's kvstore with the optimizer on the CPU); the GPUs then skip their own update."""
    server = ranks[0] if location == "gpu0" else "host0"
    senders = [r for r in ranks if r != server]
    yield machine.send([(r, server, nbytes) for r in senders], "ps-gather")
    summands = len(senders) if location == "gpu0" else len(senders) - 1
    yield machine.reduce([server], summands * nbytes)
    if update_s_per_param:
        yield machine.update(server, nbytes / 4, update_s_per_param)
    yield machine.send([(server, r, nbytes) for r in senders], "ps-broadcast")
