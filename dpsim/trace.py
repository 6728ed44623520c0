"""The timeline: one list of spans (lane, name, start, end, bytes) for compute and transfers.

Lanes are endpoints ("gpu0", "host0") for work done on a device, and channels ("gpu0>pcisw0.0")
for bytes on a link: one span per channel a transfer crosses. The trace covers every simulated
iteration, warm-up included: `iteration_starts` holds when each began (the input pipeline
notes it when the training loop asks for the next batch), and the first `warmup_iterations`
of them are warm-up (the engine sets it from its measuring window; 0 when unknown).

`to_chrome()` writes the Chrome trace event format, as mpi_impl/timeline.py does for measured
runs, so the two open side by side in ui.perfetto.dev or chrome://tracing:
{"traceEvents": [...], "displayTimeUnit": "ms"} with complete events ("ph": "X", ts and dur in
microseconds, whole nanoseconds) and metadata events ("ph": "M") naming each process and
thread. One process per node, holding a thread per GPU and one for the host (CPU parameter
server); one process "network links" holding a thread per busy channel, each transfer with its
bytes in args; one process "iterations" with a span per iteration, "(warm-up)" in the name of
the warm-up ones, so the measured window is visible. mpi_impl has a process per rank instead
of per node; the span names of the steps are the simulator's own (forward, backward, ...).
Perfetto drops slices of one thread that overlap without nesting, so a lane whose spans
overlap is spread over several threads ("gpu0", "gpu0 (2)"; see to_chrome).
"""
import json
import re
from dataclasses import dataclass, field

from . import limits
from .errors import ScenarioError
from .files import shown, writing

LINKS_PID = 1_000_000      # the process holding one thread per link channel, after the nodes
ITERATIONS_PID = LINKS_PID + 1


@dataclass(frozen=True)
class Span:
    lane: str
    name: str
    start: float
    end: float
    nbytes: float = 0.0


def ns(seconds: float) -> int:
    return round(seconds * 1e9)


def complete(name, cat, pid, tid, start, end, args=None) -> dict:
    """A complete event ("ph": "X"). Times in microseconds, whole nanoseconds (as mpi_impl's
    timeline rounds them); the end is rounded, not the duration, so back-to-back spans touch."""
    a, b = ns(start), ns(end)
    event = {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid, "ts": a / 1000, "dur": (b - a) / 1000}
    if args:
        event["args"] = args
    return event


def metadata(kind, pid, tid, name, sort_index) -> list:
    """Metadata events naming a process or a thread (kind "process" / "thread") and fixing its
    place in the viewer's list (smaller sort_index first)."""
    return [{"name": f"{kind}_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}},
            {"name": f"{kind}_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": sort_index}}]


def without_overlaps(spans) -> list:
    """Spans in rows, first fit in order of start: no two spans of a row overlap (to the ns)."""
    rows, ends = [], []
    for s in sorted(spans, key=lambda s: (ns(s.start), -ns(s.end))):
        r = next((r for r, end in enumerate(ends) if end <= ns(s.start)), len(rows))
        if r == len(rows):
            rows.append([])
            ends.append(0)
        rows[r].append(s)
        ends[r] = ns(s.end)
    return rows


@dataclass
class Trace:
    spans: list = field(default_factory=list)
    gpus_per_node: int = 1          # set by simulate(): which node a GPU lane belongs to
    iteration_starts: list = field(default_factory=list)
    warmup_iterations: int = 0

    def span(self, lane, name, start, end, nbytes=0.0):
        if end > start:
            if len(self.spans) >= limits.TRACE_SPANS and not limits.lifted():
                raise ScenarioError("--trace", f"the timeline passed {limits.TRACE_SPANS:,} spans; trace fewer "
                                    f"iterations (--set training.iterations=1 --set training.warmup_iterations=0) "
                                    f"or fewer GPUs ({limits.LIFT}=1 lifts the limit)")
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

    def lanes(self) -> list:
        """Every lane that has spans: GPUs, then hosts, then link channels; numbers in numeric order."""
        def order(lane):
            kind = 2 if self._process_of(lane)[0] == LINKS_PID else 0 if lane.startswith("gpu") else 1
            return kind, [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", lane)]
        return sorted({s.lane for s in self.spans}, key=order)

    def to_chrome(self) -> dict:
        """The trace as Chrome trace event JSON (a dict). Slices on one thread must not overlap
        (Perfetto drops the ones that do not nest), so a lane whose spans overlap (kernels beside
        backward, transfers sharing a channel) gets more threads: "gpu0", "gpu0 (2)", ..."""
        by_lane = {}
        for s in self.spans:
            by_lane.setdefault(s.lane, []).append(s)
        events, named, tid = [], set(), 0
        for lane in self.lanes():
            pid, pname = self._process_of(lane)
            if pid not in named:
                named.add(pid)
                events += metadata("process", pid, 0, pname, pid)
            rows = without_overlaps(by_lane[lane])
            for r, row in enumerate(rows):
                events += metadata("thread", pid, tid + r, lane if r == 0 else f"{lane} ({r + 1})", tid + r)
                for s in row:
                    args = {"bytes": s.nbytes} if s.nbytes else None
                    events.append(complete(s.name, "transfer" if s.nbytes else "compute", pid, tid + r,
                                           s.start, s.end, args))
            tid += len(rows)
        if self.iteration_starts:
            events += metadata("process", ITERATIONS_PID, 0, "iterations", -1)      # on top
            events += metadata("thread", ITERATIONS_PID, 0, "iterations", 0)
            for k, start, end, warmup in self.iterations():
                events.append(complete(f"iteration {k}" + (" (warm-up)" if warmup else ""), "iteration",
                                       ITERATIONS_PID, 0, start, end, {"iteration": k, "warm_up": warmup}))
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_chrome(self, path):
        """The Chrome trace JSON at `path`, renamed into place when complete (dpsim.files.writing)."""
        try:
            with writing(path, "w", "--trace") as f:
                json.dump(self.to_chrome(), f)
        except OSError as e:
            raise ScenarioError("--trace", f"cannot write {shown(path)}: {e.strerror or e}") from None
