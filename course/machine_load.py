"""How busy the machine is with work that is not ours, read from Linux's /proc.

Timings are only worth predicting on a quiet machine: a calibration taken while another
program compiles or installs packages measures that program as much as this one. Two figures
say how busy the machine is:

    others_cores   CPU seconds that processes outside this run's process tree used per second
                   of wall time (0.5 = another program kept half a core busy); from the
                   utime + stime of every /proc/<pid>/stat, sampled twice
    run_queue      threads ready to run at the sampled moment (procs_running of /proc/stat),
                   ours included; above the core count, someone waits for a core

`sample(seconds)` measures them once; `Monitor` samples in a background thread while a
measurement runs and reports their mean and maximum. Where /proc is not there (macOS), both
are None: unknown, never zero.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

PROC = Path("/proc")


def process_table(proc=PROC) -> dict:
    """{pid: (parent pid, CPU seconds used so far)} of every process we can read."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    table = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:                             # ended while we looked
            continue
        fields = text[text.rindex(")") + 2:].split()   # the name may hold spaces and brackets
        table[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return table


def tree(table: dict, root: int) -> set:
    """`root` and every process descended from it."""
    children = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo += children.get(pid, [])
    return out


def others_cpu_s(before: dict, after: dict, ours: set) -> float:
    """CPU seconds used between two process tables by processes that are not ours (a process
    that started in between counts from zero)."""
    total = 0.0
    for pid, (_, cpu) in after.items():
        if pid not in ours:
            total += cpu - before[pid][1] if pid in before else cpu
    return total


def run_queue(proc=PROC) -> int | None:
    try:
        for line in (proc / "stat").read_text().splitlines():
            if line.startswith("procs_running "):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def readable(proc=PROC) -> bool:
    return (proc / "stat").exists() and (proc / str(os.getpid()) / "stat").exists()


def sample(seconds=1.0, root=None, proc=PROC, sleep=time.sleep, clock=time.monotonic) -> dict:
    """{"others_cores", "run_queue"} over `seconds`; None where /proc cannot be read.
    `root`: the process whose tree is ours (default: this process)."""
    if not readable(proc):
        return {"others_cores": None, "run_queue": None}
    root = os.getpid() if root is None else root
    t0, before = clock(), process_table(proc)
    sleep(seconds)
    t1, after = clock(), process_table(proc)
    ours = tree(before, root) | tree(after, root)
    return {"others_cores": max(0.0, others_cpu_s(before, after, ours) / max(t1 - t0, 1e-9)),
            "run_queue": run_queue(proc)}


class Monitor:
    """Samples the machine's load every `every` seconds in a background thread while a
    measurement runs:

        with Monitor() as load:
            ...measure...
        load.summary()   # {"others_cores": {"mean", "max"}, "run_queue": {...}, "samples"}
    """

    def __init__(self, every=0.5, proc=PROC):
        self.every, self.proc, self.samples = every, proc, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(sample(self.every, proc=self.proc, sleep=self._stop.wait))

    def __enter__(self):
        if readable(self.proc):
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return False

    def summary(self) -> dict:
        out = {"samples": len(self.samples)}
        for key in ("others_cores", "run_queue"):
            values = [s[key] for s in self.samples if s[key] is not None]
            out[key] = {"mean": sum(values) / len(values), "max": max(values)} if values else None
        return out
