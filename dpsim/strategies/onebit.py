"""1-bit SGD's exchange with error feedback, as CNTK does it (Seide et al., "1-Bit Stochastic
Gradient Descent and its Application to Data-Parallel Distributed Training of Speech DNNs",
Interspeech 2014), and as mpi_impl/onebit.py implements it.

Each of the n ranks owns one stripe (1/n) of the gradient.
  1. quantise: every rank adds its residual to its gradient and keeps one sign bit per value
     plus one FP32 scale per 256 values; what was lost becomes the new residual.
  2. all-to-all: stripe j of every rank goes to rank j.
  3. decode and sum: rank j decodes n-1 stripes and adds them to its own, adds its server
     residual, and quantises the sum again (the second quantisation, the second residual).
  4. all-gather: every rank receives every quantised, summed stripe, and decodes them all.
Bytes on the wire per value: 1/8 + 4/256 = 0.141, i.e. 0.035 of FP32 (1/32 + 1/256).
The messages go through MPI via host memory (CNTK's implementation; mpi_impl's default), so
each pays the staging copies and `sync.message_overhead_us` (see dpsim/machine.py). CNTK
quantises and exchanges every gradient matrix on its own: with small `bucket_mib` each layer
is a bucket, and a model of many small layers pays those fixed costs many times.

Cost: 2 alpha + 2 (n-1)/n m_q beta  +  the kernels, which are memory-bound. Per value (m/4
values in all), with a kernel launch each:
  quantise    reads gradient and residual, writes residual and bits: 12.125 bytes
  decode+sum  per received stripe value: reads bits, adds into the sum: 8.125 bytes (n-1 stripes
              of m/(4n)), then re-quantise the owned stripe: 12.125 bytes per stripe value
  decode      every value of the result: reads bits, writes FP32: 4.125 bytes
Kernel launches: quantise 2 (scales, then signs), decode+sum n-1 (one per received stripe)
plus 2 to re-quantise, final decode n (one per stripe): 2n + 3 per bucket.
The kernels cost the same whatever the network, the saving is (n-1)/n m beta x 0.965: 1-bit
wins only where beta is large next to 1/memory bandwidth, i.e. on a slow network.
"""

from ..symmetry import AllPairs
from ..vocabulary import ONEBIT_BLOCK, ONEBIT_OWN_EXCHANGE

# 1-bit replaces the all-reduce (strategies.allreduce_for), so sync.strategy does not change it:
# the one sentence dpsim prints where results coincide for that reason.
OWN_EXCHANGE = f"{ONEBIT_OWN_EXCHANGE}, whatever sync.strategy says"

BYTES_PER_VALUE = 1 / 8 + 4 / ONEBIT_BLOCK      # a sign bit per value, an FP32 scale per block


def quantised_bytes(nbytes: float) -> float:
    return nbytes / 4 * BYTES_PER_VALUE


def kernels(values, n):
    """(label, bytes touched, launches) of each kernel of one exchange of `values` on n ranks."""
    return [("quantise", 12.125 * values, 2),
            ("decode+sum+requantise", (8.125 * (n - 1) + 12.125) * values / n, n + 1),
            ("decode", 4.125 * values, n)]


def codec_cost(values, n):
    """(launches, bytes touched) of all of one exchange's kernels: course calibrate inverts it."""
    ks = kernels(values, n)
    return sum(k[2] for k in ks), sum(k[1] for k in ks)


def allreduce(machine, ranks, nbytes):
    n = len(ranks)
    stripe_q = quantised_bytes(nbytes) / n
    pairs = AllPairs(tuple(ranks), stripe_q)     # every rank sends a stripe to every other
    quantise, combine, decode = kernels(nbytes / 4, n)
    yield machine.kernel(ranks, *quantise)
    yield machine.send(pairs, "1bit-all-to-all", staged=True)
    yield machine.kernel(ranks, *combine)
    yield machine.send(pairs, "1bit-all-gather", staged=True)
    yield machine.kernel(ranks, *decode)
