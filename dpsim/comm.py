"""What a synchronisation strategy sees: move bytes between endpoints, add arrays, wait.

Strategies are SimPy generator functions `allreduce(comm, ranks, nbytes)` that finish when
every rank holds the sum. They are written in lock-step: each step starts a set of transfers
at once and waits for all of them, which is exact when the ranks are symmetric and is how the
textbooks draw these algorithms.

Reduction cost (the gamma of alpha-beta-gamma models): adding two arrays reads two and
writes one, so reducing n bytes costs 3n bytes of memory traffic at the device's memory
bandwidth; on the CPU, the host's memory bandwidth.
"""


class Comm:
    def __init__(self, env, net, cluster, gpu_mem_bw_gbs: float, host_mem_bw_gbs: float, trace=None):
        self.env, self.net, self.cluster, self.trace = env, net, cluster, trace
        self._gamma = {"gpu": 3 / (gpu_mem_bw_gbs * 1e9), "host": 3 / (host_mem_bw_gbs * 1e9)}

    def gamma(self, endpoint: str) -> float:
        """Seconds per byte reduced on this endpoint."""
        return self._gamma["host" if endpoint.startswith("host") else "gpu"]

    def send(self, moves, label=""):
        """Start every (src, dst, nbytes) transfer at once; an event for when all have arrived."""
        events = [self.net.transfer(self.cluster.route(s, d), s, d, n, label) for s, d, n in moves]
        return self.env.all_of(events)

    def reduce(self, endpoints, nbytes, label="reduce"):
        """Each endpoint adds nbytes of incoming data into its own, all at once."""
        now = self.env.now
        seconds = max((self.gamma(e) * nbytes for e in endpoints), default=0.0)
        if self.trace is not None:
            for e in endpoints:
                self.trace.span(e, label, now, now + self.gamma(e) * nbytes)
        return self.env.timeout(seconds)
