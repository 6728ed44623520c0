"""Mini-batches of one rank's shard, loaded inside the training loop or by background threads.

Each sample costs a configurable amount of preprocessing (`decode_ms`, busy CPU work that
stands in for JPEG decoding and augmentation). With `workers=0` the training loop does
that work itself before every step, so the device waits for it (GPUs starving while data
loads, as in lectures/05_input_pipeline.ipynb). With `workers=k` there are k threads; worker w prepares batches
w, w+k, w+2k, ... and keeps up to `prefetch` of them ready in its own queue, so loading
overlaps compute, and the loop only waits when the workers fall behind.

The busy work hashes a buffer with SHA-256, which releases Python's GIL, so a worker
thread really does run alongside the training loop (on a free core). Batches come out in
the same order whatever the number of workers, so results do not depend on it.

Cost model: loading one batch costs about batch * decode_ms milliseconds of one core;
k workers deliver at most k / (batch * decode_ms) batches per millisecond.
"""
import hashlib
import queue
import threading
import time

import numpy as np

_SCRAP = bytes(8 * 1024)        # one hash takes a few microseconds: fine-grained timing


def busy_work(ms):
    """Keep one core busy for about `ms` milliseconds (GIL released while hashing)."""
    if ms <= 0:
        return
    end = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < end:
        hashlib.sha256(_SCRAP).digest()


class Loader:
    """Batches from dataset (x, y) in the order given for each epoch."""

    def __init__(self, dataset, batch, workers=0, prefetch=2, decode_ms=0.0, timeline=None):
        self.dataset = dataset
        self.batch = batch
        self.workers = workers
        self.prefetch = max(1, prefetch)
        self.decode_ms = decode_ms
        self.timeline = timeline

    def make_batch(self, indices, track=0):
        """Gather and 'decode' one batch: the per-sample work happens here."""
        start = time.perf_counter()
        x = np.empty((len(indices), *self.dataset.shape), dtype=self.dataset.x.dtype)
        for row, i in enumerate(indices):
            busy_work(self.decode_ms)
            x[row] = self.dataset.x[i]
        y = self.dataset.y[indices]
        if self.timeline is not None:
            self.timeline.add("load batch", start, time.perf_counter(), phase="load", track=track)
        return x, y

    def epoch(self, order):
        """Yield (x, y) NumPy batches for this epoch; `order` lists the sample indices to use
        (its length is a multiple of the batch size)."""
        batches = [order[i:i + self.batch] for i in range(0, len(order), self.batch)]
        if self.workers == 0:
            for indices in batches:
                yield self.make_batch(indices)
            return
        yield from self._from_workers(batches)

    def _from_workers(self, batches):
        k = self.workers
        queues = [queue.Queue(maxsize=self.prefetch) for _ in range(k)]
        stop = threading.Event()

        def put(w, item):
            """Wait for room in queue w, but give up if the loop has stopped listening."""
            while not stop.is_set():
                try:
                    queues[w].put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def work(w):
            try:
                for j in range(w, len(batches), k):
                    if not put(w, self.make_batch(batches[j], track=1 + w)):
                        return
            except BaseException as error:          # hand it to the training loop
                put(w, error)

        threads = [threading.Thread(target=work, args=(w,), daemon=True, name=f"loader-{w}")
                   for w in range(k)]
        for t in threads:
            t.start()
        try:
            for j in range(len(batches)):
                item = queues[j % k].get()
                if isinstance(item, BaseException):
                    raise RuntimeError(f"data loader worker failed: {item}") from item
                yield item
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=5)
