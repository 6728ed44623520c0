"""The lower bound of mpi_impl.bench: a time no correct implementation of an algorithm's steps
can beat on this machine, from primitives measured on it (primitives.py).

An algorithm is a chain of steps; a step sends what the step before it finished (the ring's
step s + 1 passes on the partial sum that step s added; halving-doubling's next window is the
half this step kept).  Step i moves t_i bytes into each rank and adds a_i of them (the busiest
rank's, rounded down).  Inside a step segments may overlap their transfer with their
addition, so the step is at least its per-message latency plus the slower of the two:

    step_i  >=  alpha + max(t_i beta, a_i gamma)              (the pipelined step)
    path     =  sum over the steps of step_i                  (the critical path)

Whatever the segments, a step waits for at least one message (alpha), its bytes arrive no
faster than the fastest transfer rate measured (beta: seconds per byte, the best over message
sizes, with every rank sending at once and with one rank alone), and its additions run no
faster than the fastest add rate measured (gamma: seconds per byte of result, the best over
sizes from L1 to memory, every rank at once and one alone).  Overlapping the two can at best
hide the faster one completely, hence the max.

Independently of the steps, the bytes read and written at the level the arrays live in
(cache or memory, by their size) take the node's memory bandwidth with every rank streaming
at once.  An algorithm reads and writes at least B bytes (`traffic`: a step reads what it
receives from the sender's array, reads the base it adds to, writes its result once; never
less than every rank reading its input and writing its result, 2 p m), none of them
write-allocate traffic (a non-temporal store needs none).  byte_s, the fewest seconds per
byte of two STREAM kernels over the bench's own m bytes, counted as STREAM counts them
(copy: reads m, writes m, 2 m bytes; add in place: reads 2 m, writes m, 3 m bytes;
primitives.StreamKernel), timed among the algorithms' calls (so in the state of the caches
they run in), with every rank at once, prices them:

    memory  =  B / p  byte_s                                   (the memory-traffic limit)

For the ring on p ranks B = 5 (p - 1) m: per rank the reduce-scatter reads (p - 1) chunks
received and (p - 1) bases and writes (p - 1) sums, the all-gather reads and writes (p - 1)
chunks: 5 (p - 1) chunks of m / p.  On 2 ranks that is 2.5 m per rank: 1.25 copies, or
0.83 in-place adds, whichever kernel moved its bytes faster.  The shared-memory two
(shm_ring.py, shm_halving_doubling.py) hand each finished piece to the next rank while it is
in cache, so their first all-gather hop reads nothing from memory: B = (5p - 6) m, 2 p m on
2 ranks.

On one machine, without a copy engine, a core copies every byte a message carries (MPI's
shared-memory cells and its single-copy path alike) and a core adds every byte added.  With
S bytes sent and A added by all ranks together, and C cores (os.cpu_count(): the most any
implementation could use, threads included):

    cores   =  (S beta + A gamma) / C                         (the cores' work limit)

    bound  =  max(path, memory, cores)

The path limit holds for any implementation of these steps, whatever its segments; one
that starts step s + 1 on the first segments of step s runs another schedule, which only the
memory and cores limits cover.

Load from other programs only makes a measurement slower, so every primitive is the best of
many repeats, the one nearest the machine's own speed; the STREAM kernels are timed among the
algorithms, call by call, so the moments they ran fastest are moments they were timed too.
The textbook model (``mpi_impl.seconds``: every transfer and every addition one after the
other, with beta and gamma of 64 MiB) is not a bound: a pipelined step can beat it.
"""
from __future__ import annotations

from .mpi_builtin import choice
from .recursive_doubling import largest_power_of_two


def steps(algo: str, count: int, itemsize: int, p: int, sent: int = 0) -> list:
    """The (bytes in, bytes added) of every step on `algo`'s critical path, for `count`
    elements on p ranks.  `sent`: bytes a rank sends per call (1bit only: its compressed
    messages, as the bench measured them)."""
    if p == 1:
        return []
    m = count * itemsize
    if algo in ("ring", "nccl"):
        c = count // p * itemsize
        return [(c, c)] * (p - 1) + [(c, 0)] * (p - 1)
    if algo == "ring-shm":            # adds from the neighbour's window, hands back, copies from it
        c = count // p * itemsize
        return [(0, c)] * (p - 2) + [(c, c)] + [(c, 0)] * (p - 2)
    if algo == "sharded-ps":
        c = count // p * itemsize
        return [((p - 1) * c, (p - 1) * c), ((p - 1) * c, 0)]
    if algo == "ps":                  # the server receives and adds p - 1 buffers, then sends
        return [((p - 1) * m, (p - 1) * m), (m, 0)]
    if algo == "1bit":                # all-to-all of signs, then all-gather: additions not counted
        return [(sent // 2, 0), (sent // 2, 0)]
    if algo == "mpi":
        algo = choice(count, itemsize, p)
    q = largest_power_of_two(p)
    halves = [count // q * (q >> k) * itemsize for k in range(1, q.bit_length())]     # m/2 .. m/q
    if algo == "halving-doubling-shm":     # p = q: the halving adds from the partner's window
        *first, last = halves
        return [(0, h) for h in first] + [(last, last)] + [(h, 0) for h in reversed(first)]
    fold, unfold = ([(m, m)], [(m, 0)]) if q < p else ([], [])
    if algo == "recursive-doubling":
        return fold + [(m, m)] * (q.bit_length() - 1) + unfold
    if algo == "halving-doubling":
        return fold + [(h, h) for h in halves] + [(h, 0) for h in reversed(halves)] + unfold
    raise ValueError(f"no lower bound for algorithm {algo!r}")


def path_seconds(chain: list, alpha: float, beta: float, gamma: float) -> float:
    """The critical path: every step's latency plus the slower of its transfer and addition."""
    return sum(alpha + max(t * beta, a * gamma) for t, a in chain)


def bytes_added(algo: str, count: int, itemsize: int, p: int) -> int:
    """Bytes of result all ranks together add in one call (1bit: its sums not counted)."""
    m = count * itemsize
    if algo == "mpi":
        algo = choice(count, itemsize, p)
    if algo == "1bit" or p == 1:
        return 0
    if algo == "recursive-doubling":
        q = largest_power_of_two(p)
        return q * (q.bit_length() - 1) * m + (p - q) * m
    return (p - 1) * m                 # every value is summed once: p - 1 additions


ANY_P = ("ring", "ring-shm", "nccl", "ps", "sharded-ps", "halving-doubling-shm")      # no fold: traffic() counts them on any p


def traffic(algo: str, count: int, itemsize: int, p: int) -> float:
    """Bytes all ranks together read and write at the level their arrays live in, at least,
    in one call: a step reads what it receives from the sender's array and writes the result
    once; a step that adds also reads its own base (the segment that landed is added while
    still in cache: not counted).  Never less than every rank reading its m input bytes and
    writing its m result bytes, which is all that is counted where p is not a power of two,
    for 1bit and for MPI's choice."""
    m = count * itemsize
    least = 2 * p * m
    if algo == "mpi":
        algo = choice(count, itemsize, p)
    if p == 1 or (p & (p - 1) and algo not in ANY_P):
        return least
    per_rank = {"ring": 5 * (p - 1) / p * m, "nccl": 5 * (p - 1) / p * m,
                "ring-shm": (5 * p - 6) / p * m, "halving-doubling-shm": (5 * p - 6) / p * m,
                "halving-doubling": 5 * (p - 1) / p * m,
                "recursive-doubling": 3 * (p.bit_length() - 1) * m,
                "sharded-ps": (3 * p - 1) / p * m, "ps": 5 * (p - 1) / p * m}.get(algo, 0)
    return max(least, p * per_rank)


def seconds(algo: str, count: int, itemsize: int, p: int, machine: dict, byte_s: float,
            sent: int = 0, sent_total: int = 0, cores: int | None = None) -> dict:
    """The bound of one call and its three limits, in seconds: {"bound", "path", "memory",
    "cores"}.  machine: primitives.measure's figures (alpha, beta_best, gamma_best); byte_s:
    the seconds per byte a rank streams with every rank at once (the faster STREAM kernel
    over count * itemsize bytes); sent: bytes the busiest rank sends, sent_total: all ranks
    together (1bit: as measured); cores: the cores the ranks share when all are on one
    machine and compute on its CPU (else no cores limit)."""
    alpha, beta, gamma = machine["alpha"], machine["beta_best"], machine["gamma_best"]
    path = path_seconds(steps(algo, count, itemsize, p, sent), alpha, beta, gamma)
    work = 0.0
    if cores:
        work = (sent_total * beta + bytes_added(algo, count, itemsize, p) * gamma) / cores
    memory = traffic(algo, count, itemsize, p) / p * byte_s
    return {"bound": max(path, memory, work), "path": path, "memory": memory, "cores": work}
