"""The timeline: one list of spans (lane, name, start, end, bytes) for compute and transfers.

Lanes are endpoints ("gpu0", "host0") for work done on a device, and channels ("gpu0>pcisw0.0")
for bytes on a link: one span per channel a transfer crosses. The trace covers every simulated
iteration, warm-up included (the first `training.warmup_iterations` of them).

`to_chrome()` writes the Chrome trace event format, as mpi_impl/timeline.py does for measured
runs, so the two open side by side in ui.perfetto.dev or chrome://tracing:
{"traceEvents": [...], "displayTimeUnit": "ms"} with complete events ("ph": "X", ts and dur in
microseconds) and metadata events ("ph": "M") naming each process and thread.
One process per node, holding a thread per GPU and one for the host (CPU parameter server);
one process "network links" holding a thread per busy channel, each transfer with its bytes.
"""
import json
import re
from dataclasses import dataclass, field

from .errors import ScenarioError

LINKS_PID = 1_000_000      # the process holding one thread per link channel, after the nodes


@dataclass(frozen=True)
class Span:
    lane: str
    name: str
    start: float
    end: float
    nbytes: float = 0.0


@dataclass
class Trace:
    spans: list = field(default_factory=list)
    gpus_per_node: int = 1          # set by the engine: which node a GPU lane belongs to

    def span(self, lane, name, start, end, nbytes=0.0):
        if end > start:
            self.spans.append(Span(lane, name, start, end, nbytes))

    def transfer(self, flow, end):
        for ch in flow.route:
            self.span(ch.name, flow.label or "transfer", flow.started, end, flow.size)

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
                     "tid": tid[s.lane], "ts": s.start * 1e6, "dur": (s.end - s.start) * 1e6}
            if s.nbytes:
                event["args"] = {"bytes": s.nbytes}
            events.append(event)
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def write_chrome(self, path):
        try:
            with open(path, "w") as f:
                json.dump(self.to_chrome(), f)
        except OSError as e:
            raise ScenarioError("--trace", f"cannot write {path}: {e.strerror or e}")
