"""Where the time went: phase totals per epoch, and spans for a Chrome trace.

Every timed piece of work is a span (name, start, end) on a track of this rank: track 0 is
the training loop, track 1.. are the loader workers, and the communication thread (when
overlapping) has its own track. Each span also counts towards one phase total:

  load           producing batches (reading + per-sample decode), wherever it runs
  data_wait      the training loop blocked waiting for the next batch
  compute        forward + loss + backward
  communication  gradient all-reduce work (may run concurrently with compute)
  compression    1-bit quantisation work (part of the sync, reported on its own)
  update         the optimizer step
  exposed_comm   the training loop blocked on gradient synchronisation after backward

compute + data_wait + exposed_comm + update is the training loop's own time, the same
four keys as the simulator's breakdown; load, communication and compression are amounts
of work that can hide behind them.

The trace is Chrome's trace event format: {"traceEvents": [complete events]}, one process
(pid) per rank, one thread (tid) per track; times in microseconds since the common start
(all ranks take their zero right after a barrier). Open it in ui.perfetto.dev or
chrome://tracing.
"""
import json
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

PHASES = ("load", "data_wait", "compute", "communication", "compression", "update", "exposed_comm")
TRACK_NAMES = {0: "training loop", 99: "communication"}
COMM_TRACK = 99


class Timeline:
    """Spans and phase totals of one rank. Thread-safe: loader and communication threads
    add spans too. `sync` (optional) is called before reading the clock at the end of a
    span, e.g. to wait for the GPU so that its work is counted where it happened."""

    def __init__(self, rank, sync=None, keep_spans=True):
        self.rank = rank
        self.sync = sync
        self.keep_spans = keep_spans
        self.zero = time.perf_counter()
        self.spans = []
        self.totals = defaultdict(float)
        self._lock = threading.Lock()

    def start(self):
        """Set time zero (call right after a barrier) and forget everything before."""
        with self._lock:
            self.zero = time.perf_counter()
            self.spans.clear()
            self.totals.clear()

    def add(self, name, start, end, phase=None, track=0, **args):
        with self._lock:
            if phase:
                self.totals[phase] += end - start
            if self.keep_spans:
                self.spans.append((name, start - self.zero, end - start, track, args))

    def count(self, phase, seconds):
        """Add to a phase total without a span of its own."""
        with self._lock:
            self.totals[phase] += seconds

    @contextmanager
    def span(self, name, phase=None, track=0, **args):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            self.add(name, start, time.perf_counter(), phase=phase, track=track, **args)

    def take_totals(self):
        """Phase totals (seconds) since the last call, every phase present; then reset."""
        with self._lock:
            totals = {phase: self.totals.get(phase, 0.0) for phase in PHASES}
            self.totals.clear()
        return totals

    def chrome_events(self):
        """This rank's spans as Chrome complete events."""
        return [{"name": name, "ph": "X", "ts": round(start * 1e6, 3), "dur": round(dur * 1e6, 3),
                 "pid": self.rank, "tid": track,
                 "args": {"rank": self.rank, "track": TRACK_NAMES.get(track, f"loader {track - 1}"),
                          **args}}
                for name, start, dur, track, args in self.spans]


def write_chrome_trace(path, events_per_rank):
    """Write one trace file from the event lists gathered from every rank."""
    events = [event for rank_events in events_per_rank for event in rank_events]
    events.sort(key=lambda e: (e["pid"], e["ts"]))
    with open(path, "w") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
