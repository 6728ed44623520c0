"""The timeline: one list of spans (lane, name, start, end, bytes) for compute and transfers.

Lanes are endpoints ("gpu0", "host0") for work done on a device, and channels ("gpu0>pcisw0.0")
for bytes on a link: one span per channel a transfer crosses. The trace covers every simulated
iteration, warm-up included: `iteration_starts` holds when each began (the input pipeline
notes it when the training loop asks for the next batch), and the first `warmup_iterations`
of them are warm-up (`dpsim run` sets it from the engine's window; 0 when unknown).

`to_chrome()` writes the Chrome trace event format, as mpi_impl/timeline.py does for measured
runs, so the two open side by side in ui.perfetto.dev or chrome://tracing:
{"traceEvents": [...], "displayTimeUnit": "ms"} with complete events ("ph": "X", ts and dur in
microseconds, rounded to the nanosecond) and metadata events ("ph": "M") naming each process
and thread. One process per node, holding a thread per GPU and one for the host (CPU parameter
server); one process "network links" holding a thread per busy channel, each transfer with its
bytes in args; one process "iterations" with a span per iteration, "(warm-up)" in the name of
the warm-up ones, so the measured window is visible.
"""
import json
import re
from dataclasses import dataclass, field

from .errors import ScenarioError

LINKS_PID = 1_000_000      # the process holding one thread per link channel, after the nodes
ITERATIONS_PID = LINKS_PID + 1


@dataclass(frozen=True)
class Span:
    lane: str
    name: str
    start: float
    end: float
    nbytes: float = 0.0


def us(seconds: float) -> float:
    """Seconds to microseconds, rounded to the nanosecond (as mpi_impl/timeline.py writes them)."""
    return round(seconds * 1e6, 3)


@dataclass
class Trace:
    spans: list = field(default_factory=list)
    gpus_per_node: int = 1          # set by simulate(): which node a GPU lane belongs to
    iteration_starts: list = field(default_factory=list)
    warmup_iterations: int = 0

    def span(self, lane, name, start, end, nbytes=0.0):
        if end > start:
            self.spans.append(Span(lane, name, start, end, nbytes))

    def transfer(self, flow, end):
        for ch in flow.route:
            self.span(ch.name, flow.label or "transfer", flow.started, end, flow.size)

    def iterations(self):
        """(index, start, end, warm-up?) of every iteration; the last ends with the last span."""
        ends = self.iteration_starts[1:] + [max((s.end for s in self.spans), default=0.0)]
        return [(k, start, end, k < self.warmup_iterations)
                for k, (start, end) in enumerate(zip(self.iteration_starts, ends))]

    # -- Chrome trace event format
    def _process_of(self, lane: str):
        """(pid, process name) of a lane: its node for GPUs and hosts, else the links process."""
        gpu = re.fullmatch(r"gpu(\d+)", lane)
        host = re.fullmatch(r"host(\d+)", lane)
        if gpu:
            node = int(gpu.group(1)) // self.gpus_per_node
        elif host:
            node = int(host.group(1))
        else:
            return LINKS_PID, "network links"
        return node, f"node {node}"

    def to_chrome(self) -> dict:
        def order(lane):            # GPUs, then hosts, then links; numbers in numeric order
            pid, _ = self._process_of(lane)
            kind = 0 if lane.startswith("gpu") and pid != LINKS_PID else 1 if pid != LINKS_PID else 2
            return kind, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", lane)]

        lanes = sorted({s.lane for s in self.spans}, key=order)
        tid = {lane: i for i, lane in enumerate(lanes)}
        events, named = [], set()
        for lane in lanes:
            pid, pname = self._process_of(lane)
            if pid not in named:
                named.add(pid)
                events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": pname}})
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid[lane], "args": {"name": lane}})
        for s in self.spans:
            pid, _ = self._process_of(s.lane)
            event = {"name": s.name, "cat": "transfer" if s.nbytes else "compute", "ph": "X", "pid": pid,
                     "tid": tid[s.lane], "ts": us(s.start), "dur": us(s.end - s.start)}
            if s.nbytes:
                event["args"] = {"bytes": s.nbytes}
            events.append(event)
        if self.iteration_starts:
            events.append({"name": "process_name", "ph": "M", "pid": ITERATIONS_PID, "tid": 0,
                           "args": {"name": "iterations"}})
            events.append({"name": "thread_name", "ph": "M", "pid": ITERATIONS_PID, "tid": 0,
                           "args": {"name": "iterations"}})
            for k, start, end, warmup in self.iterations():
                events.append({"name": f"iteration {k}" + (" (warm-up)" if warmup else ""), "cat": "iteration",
                               "ph": "X", "pid": ITERATIONS_PID, "tid": 0, "ts": us(start), "dur": us(end - start),
                               "args": {"iteration": k, "warm_up": warmup}})
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_chrome(self, path):
        try:
            with open(path, "w") as f:
                json.dump(self.to_chrome(), f)
        except OSError as e:
            raise ScenarioError("--trace", f"cannot write {path}: {e.strerror or e}")
