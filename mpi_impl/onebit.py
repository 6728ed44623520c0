"""1-bit compressed all-reduce with two-level error feedback, as in CNTK's 1-bit SGD
(Seide, Fu, Droppo, Li & Yu, "1-Bit Stochastic Gradient Descent and its Application to
Data-Parallel Distributed Training of Speech DNNs", Interspeech 2014).

The buffer is cut into p stripes; rank j owns stripe j and plays "server" for it.

1. **Worker quantisation.**  Each rank adds its worker residual to its gradient,
   ``w = g + e_worker``, and quantises w stripe by stripe: one sign bit per element
   (``packbits``, eight to a byte) and one scale per block of ``block`` elements.  What was
   lost, ``w - decode(encode(w))``, becomes the new worker residual.
2. **Exchange (all-to-all).**  Stripe j of every rank goes to rank j.
3. **Owner sum.**  Rank j decodes the p copies of its stripe and adds them in rank order,
   then adds its server residual.
4. **Server quantisation.**  The owner quantises that sum again; what is lost becomes the
   server residual.
5. **All-gather and decode.**  Every rank receives every quantised stripe and decodes it.
   The result is an approximation of the sum over ranks, the same on every rank.

Steps 2-3 and step 5 are pipelined (``Wire.exchange``): all messages are posted at once and
each copy is decoded as soon as it (and every copy posted before it) has landed, while the
later ones are still travelling.  The decoded copies are added in rank order, so the result
does not depend on which message came first.

With ``error_feedback=False`` the residuals stay zero (plain sign compression).

**Non-finite values.**  A NaN or inf in the gradient makes that call's result non-finite
(the caller's business), and would also enter the residuals and from there every later
call.  So after each call the residuals are checked: if either holds a NaN or inf, both are
reset to zero, and the instance says so once, in one line on stderr (``residual_resets``
counts the calls after which it happened).

**The quantiser** (our choice; CNTK used two values per matrix column, the mean of the
positive and of the negative entries): an element becomes ``+s`` if it is >= 0, else
``-s``, where s is the mean absolute value of its block of ``block`` consecutive elements
(default dpsim.vocabulary.ONEBIT_BLOCK = 256, the simulator's block too); blocks start at
each stripe's beginning, and a stripe's last block may be shorter.  An all-zero block
decodes to zeros.  (A stripe is a "chunk" in ring.py's sense: 1/p of the buffer.)

**Cost.**  Each rank sends (p - 1)/p of the buffer twice, at 1/8 byte per element plus one
scale per block (4 bytes for float32):

    T_1bit = 2 (p - 1) alpha  +  2 (p - 1)/p  n (1/8 + s/block) beta  +  encode/decode time

i.e. 1/32 + s/(4 block) of the fp32 ring's bytes: 0.035 with float32 and block = 256
(below 1/25), at the price of p - 1 messages per phase (Thakur, Rabenseifner & Gropp 2005
give the alpha-beta cost of the all-to-all and all-gather used here).  Whether that wins
depends on whether the wire or the arithmetic is the bottleneck (lectures/04_one_bit_sgd.ipynb).
``OneBitAllreduce.codec_s`` adds up the seconds an instance spent in encode/decode, so that
the codec's share of the time can be told apart from MPI's.  (On a GPU encode/decode only
launch kernels; their run time shows up where the next MPI call waits for the GPU.)
"""
from __future__ import annotations

import sys
import time

from dpsim.vocabulary import ONEBIT_BLOCK
from mpi4py import MPI

from . import wire as wire_module
from .device import array_module, chunk_bounds, is_gpu_array
from .errors import FLOAT_DTYPES, check_arguments


# -- the codec: one sign bit per element, one scale per block -----------------------------
def block_count(n: int, block: int = ONEBIT_BLOCK) -> int:
    """Scales for n values: one per block, the last block possibly shorter."""
    return -(-n // block)


def encode(v, block: int = ONEBIT_BLOCK):
    """Quantise 1-D v to (signs, scales): packed bits (1 = non-negative) and block means of |v|."""
    xp = array_module(v)
    signs = xp.packbits(v >= 0)
    magnitude = xp.abs(v)
    full = v.size // block
    scales = xp.empty(block_count(v.size, block), v.dtype)
    if full:
        scales[:full] = magnitude[:full * block].reshape(full, block).mean(axis=1)
    if v.size % block:
        scales[full] = magnitude[full * block:].mean()
    return signs, scales


def decode(signs, scales, n: int, out, block: int = ONEBIT_BLOCK):
    """Write the n values that (signs, scales) stand for into out: +scale or -scale each."""
    xp = array_module(out)
    unit = xp.asarray([-1, 1], dtype=out.dtype)
    xp.take(unit, xp.unpackbits(signs)[:n], out=out)   # bit 1 -> +1.0, bit 0 -> -1.0
    full = n // block
    if full:
        by_block = out[:full * block].reshape(full, block)
        xp.multiply(by_block, scales[:full, None], out=by_block)   # +-1 * s is exact
    if n % block:
        out[full * block:] *= scales[full]
    return out


def seconds(count: int, itemsize: int, p: int, alpha: float, beta: float, gamma: float,
            block: int = ONEBIT_BLOCK) -> float:
    """T_1bit above without the codec: the messages, plus the owner's p - 1 additions of its
    stripe at gamma.  Encode/decode time is measured (codec_s), not modelled here."""
    if p == 1:
        return 0.0
    wire_bytes = count * (1 / 8 + itemsize / block)
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * wire_bytes * beta \
        + (p - 1) / p * count * itemsize * gamma


# -- the distributed exchange -------------------------------------------------------------
class _Plan:
    """Stripe layout and residuals for one (buffer size, dtype, array module)."""

    def __init__(self, xp, n, dtype, p, rank, block):
        self.stripes = chunk_bounds(n, p)
        lengths = [self.stripes[j + 1] - self.stripes[j] for j in range(p)]
        self.sign_counts = [-(-L // 8) for L in lengths]            # bytes per stripe
        self.scale_counts = [block_count(L, block) for L in lengths]
        self.own = lengths[rank]
        self.worker_residual = xp.zeros(n, dtype)
        self.server_residual = xp.zeros(self.own, dtype)
        self.work = xp.empty(n, dtype)
        self.decoded = xp.empty(n, dtype)
        self.signs_out = xp.empty(sum(self.sign_counts), xp.uint8)
        self.scales_out = xp.empty(sum(self.scale_counts), dtype)
        self.signs_in = xp.empty(p * self.sign_counts[rank], xp.uint8)
        self.scales_in = xp.empty(p * self.scale_counts[rank], dtype)
        self.owner_sum = xp.empty(self.own, dtype)
        self.owner_decoded = xp.empty(self.own, dtype)
        self.copies = xp.empty(p * self.own, dtype)                # decoded copies of my stripe

    @staticmethod
    def stripe_of(packed, counts, j):
        """Stripe j's part of an array holding every stripe's signs (or scales) in order."""
        start = sum(counts[:j])
        return packed[start:start + counts[j]]

    def signs_of(self, j):
        """Stripe j's signs in this rank's wire format (what goes to its owner, or comes
        back from it)."""
        return self.stripe_of(self.signs_out, self.sign_counts, j)

    def scales_of(self, j):
        """Stripe j's scales in this rank's wire format."""
        return self.stripe_of(self.scales_out, self.scale_counts, j)

    @staticmethod
    def from_rank(a, size, sender):
        """The part of `a` (one run of `size` per rank, in rank order) that came from sender."""
        return a[sender * size:(sender + 1) * size]


class OneBitAllreduce:
    """Approximate all-reduce (sum) with 1-bit quantisation and error feedback.

    One instance keeps one pair of residuals per buffer size and dtype, carried from call to
    call; use one instance per gradient buffer.  ``bytes_sent`` counts what this rank has
    sent so far, ``codec_s`` the seconds this instance has spent in encode/decode.
    ``block``: values per scale (every rank must use the same).
    """

    def __init__(self, comm=None, error_feedback: bool = True, block: int = ONEBIT_BLOCK,
                 cuda_aware: bool | None = None):
        if int(block) < 1:
            raise ValueError(f"block must be a positive number of elements, not {block!r}")
        self.comm = comm if comm is not None else MPI.COMM_WORLD
        self.error_feedback = bool(error_feedback)
        self.block = int(block)
        self.cuda_aware = wire_module.cuda_aware_from_env() if cuda_aware is None else bool(cuda_aware)
        self.bytes_sent = 0
        self.codec_s = 0.0
        self.residual_resets = 0        # calls after which non-finite residuals were zeroed
        self._plans: dict = {}

    def reset(self):
        """Forget all residuals (e.g. when training restarts)."""
        self._plans.clear()

    def residuals(self, like):
        """(worker residual, server residual) for buffers like `like`, or None before the
        first call on one; the worker residual has like.size elements, the server residual
        one per element of this rank's stripe.  For checkpoints."""
        xp = array_module(like)
        plan = self._plans.get((like.size, str(like.dtype), xp.__name__))
        return None if plan is None else (plan.worker_residual, plan.server_residual)

    def residual_sizes(self, n: int) -> tuple[int, int]:
        """(worker, server) residual lengths for an n-element buffer on this rank."""
        stripes = chunk_bounds(n, self.comm.Get_size())
        rank = self.comm.Get_rank()
        return n, stripes[rank + 1] - stripes[rank]

    def set_residuals(self, like, worker, server):
        """Start from saved residuals (as returned by residuals()) for buffers like `like`."""
        xp = array_module(like)
        p, rank = self.comm.Get_size(), self.comm.Get_rank()
        plan = _Plan(xp, like.size, like.dtype, p, rank, self.block)
        plan.worker_residual[...] = xp.asarray(worker).reshape(-1)
        plan.server_residual[...] = xp.asarray(server).reshape(-1)
        self._plans[(like.size, str(like.dtype), xp.__name__)] = plan

    def __call__(self, x):
        xp = array_module(x)
        if xp.__name__ == "numpy":
            x = xp.asarray(x)
        check_arguments(x, self.comm, dtypes=FLOAT_DTYPES, device=is_gpu_array(x),
                        same={"block": self.block, "error_feedback": self.error_feedback})
        key = (x.size, str(x.dtype), xp.__name__)
        if key not in self._plans:
            p, rank = self.comm.Get_size(), self.comm.Get_rank()
            self._plans[key] = _Plan(xp, x.size, x.dtype, p, rank, self.block)
        plan = self._plans[key]
        wire = wire_module.make_wire(self.comm, xp, self.cuda_aware)
        self._quantise_stripes(xp, plan, x)                          # 1.
        total = self._sum_own_stripe(xp, plan, wire)                 # 2-3.
        signs, scales = self._quantise_sum(xp, plan, total)          # 4.
        out = self._gather_stripes(xp, plan, wire, x, signs, scales)    # 5.
        if self.error_feedback:
            self._keep_residuals_finite(xp, plan)
        self.bytes_sent += wire.bytes_sent
        return out

    def _quantise_stripes(self, xp, plan, x):
        """1. worker: add the residual, quantise stripe by stripe into the wire format, keep
        what was lost as the new worker residual."""
        st, w = plan.stripes, plan.work
        xp.add(x.reshape(-1), plan.worker_residual, out=w)
        for j in range(len(st) - 1):
            signs, scales = self._encode(w[st[j]:st[j + 1]])
            plan.signs_of(j)[...] = signs
            plan.scales_of(j)[...] = scales
            if self.error_feedback:
                self._decode(signs, scales, st[j + 1] - st[j], plan.decoded[st[j]:st[j + 1]])
        if self.error_feedback:
            xp.subtract(w, plan.decoded, out=plan.worker_residual)

    def _sum_own_stripe(self, xp, plan, wire):
        """2-3. all-to-all: stripe j of every rank goes to rank j.  As each copy of my stripe
        lands, I decode it, and add the decoded copies up in rank order (the same bits
        whatever order they arrive in), then add my server residual.  Returns the sum."""
        p, rank = wire.size, wire.rank
        nb, ns, own = plan.sign_counts[rank], plan.scale_counts[rank], plan.own
        total, mine = plan.owner_sum, plan.from_rank
        waiting, added = [2] * p, [0]                  # messages still due per sender; senders summed

        def landed(sender):
            waiting[sender] -= 1
            if waiting[sender]:
                return                                 # its signs or its scales are still due
            self._decode(mine(plan.signs_in, nb, sender), mine(plan.scales_in, ns, sender), own,
                         mine(plan.copies, own, sender))
            while added[0] < p and not waiting[added[0]]:
                copy = mine(plan.copies, own, added[0])
                xp.copyto(total, copy) if added[0] == 0 else xp.add(total, copy, out=total)
                added[0] += 1

        peers = [j for j in range(p) if j != rank]
        sends = [(plan.signs_of(j), j) for j in peers] + [(plan.scales_of(j), j) for j in peers]
        receives = [(mine(plan.signs_in, nb, j), j) for j in peers] + \
                   [(mine(plan.scales_in, ns, j), j) for j in peers]
        xp.copyto(mine(plan.signs_in, nb, rank), plan.signs_of(rank))
        xp.copyto(mine(plan.scales_in, ns, rank), plan.scales_of(rank))
        landed(rank), landed(rank)                     # my own copy needs no message
        wire.exchange(sends, receives, lambda k: landed(receives[k][1]))
        xp.add(total, plan.server_residual, out=total)
        return total

    def _quantise_sum(self, xp, plan, total):
        """4. owner: quantise the sum again, keep what was lost as the server residual."""
        signs, scales = self._encode(total)
        if self.error_feedback:
            self._decode(signs, scales, plan.own, plan.owner_decoded)
            xp.subtract(total, plan.owner_decoded, out=plan.server_residual)
        return signs, scales

    def _gather_stripes(self, xp, plan, wire, x, my_signs, my_scales):
        """5. all-gather the quantised stripes, decoding each in turn as it lands, into a new
        array shaped like x."""
        p, rank, st = wire.size, wire.rank, plan.stripes
        out = xp.empty(x.shape, x.dtype)
        flat = out.reshape(-1)
        waiting = [2] * p

        def gathered(j):
            waiting[j] -= 1
            if not waiting[j]:
                self._decode(plan.signs_of(j), plan.scales_of(j), st[j + 1] - st[j], flat[st[j]:st[j + 1]])

        self._decode(my_signs, my_scales, plan.own, flat[st[rank]:st[rank + 1]])
        peers = [j for j in range(p) if j != rank]
        receives = [(plan.signs_of(j), j) for j in peers] + [(plan.scales_of(j), j) for j in peers]
        wire.exchange([(my_signs, j) for j in peers] + [(my_scales, j) for j in peers],
                      receives, lambda k: gathered(receives[k][1]))
        return out

    def _keep_residuals_finite(self, xp, plan):
        """Zero both residuals if either holds a NaN or inf, so that one bad gradient does
        not poison every later call; warn the first time this instance does it."""
        if bool(xp.isfinite(plan.worker_residual).all()) and \
                bool(xp.isfinite(plan.server_residual).all()):
            return
        plan.worker_residual[...] = 0
        plan.server_residual[...] = 0
        self.residual_resets += 1
        if self.residual_resets == 1:
            print(f"warning: rank {self.comm.Get_rank()}: a NaN or inf entered the 1-bit "
                  f"error-feedback residuals; they were reset to zero", file=sys.stderr, flush=True)

    # the codec, clocked: codec_s is the time spent here
    def _encode(self, v):
        start = time.perf_counter()
        try:
            return encode(v, self.block)
        finally:
            self.codec_s += time.perf_counter() - start

    def _decode(self, signs, scales, n, out):
        start = time.perf_counter()
        try:
            return decode(signs, scales, n, out, self.block)
        finally:
            self.codec_s += time.perf_counter() - start
