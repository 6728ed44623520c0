"""ZeRO stage 2: gradients sharded too (Rajbhandari et al., "ZeRO", SC 2020, section 5.2).

Each GPU keeps only its 1/n of the reduced gradient, besides its 1/n of the optimizer state
(dpsim.memory divides both): once a bucket is reduce-scattered, the rest of it is freed.
The exchange is ZeRO-1's (zero1.py): a reduce-scatter of each bucket as backward produces it,
an update of 1/n of the parameters, an all-gather of each bucket before the next forward.
Cost per bucket of m_b bytes: (n-1)(alpha + m_b/n beta + m_b/n gamma) + (n-1)(alpha + m_b/n beta),
2(n-1)/n m bytes sent per GPU: the same time and bytes as ZeRO-1 (ZeRO, section 7.2); stage 2
saves memory, not communication (dpsim.analytic.zero12_iteration).
"""
from .zero1 import allreduce, before_forward, broadcast_weights, check, update_fraction  # noqa: F401
