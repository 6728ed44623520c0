"""The timeline: one list of spans (lane, name, start, end, bytes) for compute and transfers.

Lanes are endpoints ("gpu0", "host0") for work done on a device, and channels ("gpu0>pcisw0.0")
for bytes on a link: one span per channel a transfer crosses.
"""
from dataclasses import dataclass, field


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

    def span(self, lane, name, start, end, nbytes=0.0):
        if end > start:
            self.spans.append(Span(lane, name, start, end, nbytes))

    def transfer(self, flow, end):
        for ch in flow.route:
            self.span(ch.name, flow.label or "transfer", flow.started, end, flow.size)
