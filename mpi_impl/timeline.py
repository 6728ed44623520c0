"""Where the time went: totals per epoch, and spans for a Chrome trace.

Every timed piece of work is a span (name, start, end) on a track of this rank: track 0 is
the training loop, track 1.. are the loader workers, and the communication thread (when
overlapping) has its own track. A span, or a count without a span, adds to one total:

the parts of an iteration, dpsim.vocabulary.BREAKDOWN (their meanings: vocabulary.MEANING),
as far as one rank can tell them
  data_wait       the training loop blocked waiting for the next batch
  compute         forward + loss + backward
  exposed_comm    the loop blocked on communication: the gradient sync after backward,
                  ZeRO-1/2's all-gather of the parameters
                  inside the update, ZeRO-3's gathers and reduce-scatters inside forward
                  and backward (count(..., inside=...) takes them out of the span around
                  them), less ...
  compression     ... the encode/decode time inside that wait (vocabulary.split_sync_wait,
                  applied step by step in mpi_impl/sgd.py's GradientAverager.finish)
  update          the optimizer step
  straggler_wait  stays 0 here: it needs every rank's compute times, and
                  mpi_impl/train_results.py moves it out of exposed_comm at the end of
                  each epoch

and WORK, amounts of work that can hide behind the loop (they are not parts of it):
  load            producing batches (reading + per-sample decode), wherever it runs
  communication   gradient all-reduce work, less the codec (may run during compute)
  codec           1-bit encode/decode work (may run during compute)

The loop's time not in any part is vocabulary.OTHER, worked out in train_results.py.

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

from dpsim.vocabulary import BREAKDOWN

from mpi_impl import files

WORK = ("load", "communication", "codec")
PHASES = BREAKDOWN + WORK              # every total a span or a count can add to
TRACK_NAMES = {0: "training loop", 99: "communication"}
COMM_TRACK = 99


class Timed:
    """What ``with timeline.span(...) as timed:`` gives: timed.seconds, once the block ended."""
    seconds = 0.0


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
        """A span; it adds end - start to the total `phase` (one of PHASES), if given."""
        _check(phase)
        with self._lock:
            if phase:
                self.totals[phase] += end - start
            if self.keep_spans:
                self.spans.append((name, start - self.zero, end - start, track, args))

    def count(self, phase, seconds, inside=None):
        """Add to a total (one of PHASES) without a span of its own. `inside`: the phase of a
        span around this time (the update span around ZeRO's all-gather of the parameters),
        which would count it too: it is taken out of that phase, so that no second is counted
        twice."""
        _check(phase)
        _check(inside)
        with self._lock:
            self.totals[phase] += seconds
            if inside:
                self.totals[inside] -= seconds

    @contextmanager
    def span(self, name, phase=None, track=0, **args):
        """Time the block as a span (see add); yields a Timed with the block's seconds."""
        timed = Timed()
        start = time.perf_counter()
        try:
            yield timed
        finally:
            if self.sync is not None:
                self.sync()
            end = time.perf_counter()
            timed.seconds = end - start
            self.add(name, start, end, phase=phase, track=track, **args)

    def take_totals(self):
        """Totals (seconds) since the last call, every one of PHASES present; then reset."""
        with self._lock:
            totals = {phase: self.totals.get(phase, 0.0) for phase in PHASES}
            self.totals.clear()
        return totals

    def chrome_events(self):
        """This rank's spans as Chrome complete events, after metadata events that name the
        process ("rank R") and each of its threads (its tracks), so that a viewer shows names
        (as dpsim's simulated traces do) and lists ranks in order."""
        tracks = sorted({track for _, _, _, track, _ in self.spans})
        names = {track: TRACK_NAMES.get(track, f"loader {track - 1}") for track in tracks}
        meta = [{"name": "process_name", "ph": "M", "pid": self.rank, "tid": 0, "args": {"name": f"rank {self.rank}"}},
                {"name": "process_sort_index", "ph": "M", "pid": self.rank, "tid": 0, "args": {"sort_index": self.rank}}]
        for track in tracks:
            meta += [{"name": "thread_name", "ph": "M", "pid": self.rank, "tid": track, "args": {"name": names[track]}},
                     {"name": "thread_sort_index", "ph": "M", "pid": self.rank, "tid": track,
                      "args": {"sort_index": track}}]
        return meta + [{"name": name, "ph": "X", "ts": round(start * 1e6, 3), "dur": round(dur * 1e6, 3),
                        "pid": self.rank, "tid": track, "args": {"rank": self.rank, "track": names[track], **args}}
                       for name, start, dur, track, args in self.spans]


def _check(phase):
    if phase is not None and phase not in PHASES:
        raise ValueError(f"unknown total {phase!r}; one of {', '.join(PHASES)}")


def write_chrome_trace(path, events_per_rank):
    """Write one trace file from the event lists gathered from every rank."""
    events = [event for rank_events in events_per_rank for event in rank_events]
    events.sort(key=lambda e: (e["pid"], e["ph"] != "M", e.get("ts", 0)))       # names first
    files.write_new(path, lambda f: json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f))
