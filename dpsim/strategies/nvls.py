"""NVLink SHARP (NCCL's NVLS algorithm): the NVSwitch adds the gradients, not the GPUs.

On an NVSwitch of the third generation (H100, H200) a GPU can ask the switch for the sum of
one address on every GPU (a multimem load-reduce) and write one value to every GPU at once
(a multimem store); NCCL's NVLS all-reduce is built from the two (NVIDIA, "NVLink SHARP",
NCCL 2.17 release notes; NVIDIA Hopper architecture whitepaper).
With n GPUs and m bytes, GPU i owns chunk i (m/n):
  load-reduce:  the switch reads chunk i from every GPU and hands GPU i the sum: every GPU's
                port sends the (n-1) chunks others own, (n-1)/n m, and receives m/n;
  store:        GPU i sends its summed chunk once (m/n) and the switch copies it to all:
                every port receives the (n-1) chunks of the others.
So each GPU's port carries m each way and no GPU adds anything:
Cost:  2 alpha + m beta        (ring: 2(n-1) alpha + 2 (n-1)/n m beta + (n-1)/n m gamma)
Bus bandwidth 2 (n-1)/n x the port's rate: above the port's rate, as NCCL reports NVLS.
dpsim moves the m bytes each way as one transfer per GPU through the switch (to the next
GPU, so that every port carries it once each way), at `efficiency` of the port's copy rate
(sync.nvls_efficiency): NCCL's tuning model credits NVLS with 0.85 of the NVLink bandwidth
on Hopper and 0.74 on Blackwell (NVIDIA/nccl src/graph/tuning.cc, nvlsEfficiency), the
multimem operations being slower than plain copies. So the step's time T (latency and bytes) becomes T / e:
    (2 alpha + m beta) / e.
"""
from ..errors import ScenarioError


def allreduce(machine, ranks, nbytes, efficiency=1.0):
    n, start = len(ranks), machine.env.now
    yield machine.send([(ranks[i], ranks[(i + 1) % n], nbytes) for i in range(n)], "nvls")
    yield machine.env.timeout((machine.env.now - start) * (1 / efficiency - 1))


def check(sc):
    if sc.link_spec("intra").kind != "nvswitch" or sc.cluster.nodes > 1:
        raise ScenarioError("sync.strategy", "nvls needs one node whose GPUs hang off an NVSwitch "
                            "(cluster.intra of kind nvswitch, nodes = 1)")
