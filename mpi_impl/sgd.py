"""Synchronous data-parallel SGD: average the gradient over ranks, then a momentum step.

Synchronous SGD on N ranks with b samples each is ordinary SGD with batch N*b: every rank
computes the mean gradient of its own b samples, the ranks sum those gradients with an
all-reduce and divide by N, and then every rank applies the same update to its own copy
of the weights, so the copies never drift apart.

`GradientAverager` does the averaging, with any of mpi_impl's all-reduce algorithms
(`--sync`), optionally 1-bit compressed (`--compress 1bit`), either after backward or
overlapped with it (`--overlap`). It picks one of three ways to run a bucket's all-reduce:

* `AfterBackward` (no overlap): one blocking all-reduce of the whole flat gradient, after
  backward.
* with overlap, the gradient is cut into buckets of about `bucket_mib` MiB, whole layers
  each, in backward order (the last layer's gradient is ready first). A bucket's
  all-reduce starts as soon as backward has finished all its layers, so communication of
  late layers runs while backward still computes early ones:
    - `NonBlockingMPI` (`--sync mpi` on the CPU): MPI's own non-blocking `Iallreduce` per
      bucket. MPICH only moves a non-blocking collective forward inside MPI calls, so the
      loop calls `Testall` after every layer to give it a push.
    - `CommThread` (every other case: the hand-written algorithms, NCCL, 1-bit, GPU
      arrays): a communication thread runs the blocking all-reduce of each bucket, in
      order, while the main thread continues backward (NumPy and MPI release the GIL while
      they work). Only one thread calls MPI at a time, so MPI_THREAD_SERIALIZED is enough;
      with less, the averager falls back to `AfterBackward`.
  `bucket_mib = 0` means one bucket, i.e. no overlap.

The training loop's wait in finish() is its sync time on the critical path. Each step it is
split with dpsim.vocabulary.split_sync_wait(wait, codec seconds of that step's buckets) into
the timeline's exposed_comm and compression; the work itself, wherever it ran, is counted as
"communication" and "codec" (see mpi_impl/timeline.py).

1-bit SGD keeps one `OneBitAllreduce` (with its own error-feedback residual and codec
clock, `codec_s`) per bucket, and sends full-precision gradients until `warmup_samples`
samples have been trained.  PowerSGD and top-k (powersgd.py, topk.py) run the same way: the
`compressor` argument makes one per bucket, called on the bucket like OneBitAllreduce.
ZeRO (zero.py) is not an averager of this kind: it reuses plan_buckets and the bucket runners.
"""
import queue
import threading
import time

import numpy as np
from dpsim.vocabulary import MIB, split_sync_wait
from mpi4py import MPI

import mpi_impl
from mpi_impl.nets import array_module
from mpi_impl.timeline import COMM_TRACK


class MomentumSGD:
    """v <- momentum * v + g;  w <- w - lr * v   (in place on the flat buffers).

    Cost: about 4 FLOPs and 5 memory passes per parameter; no communication.
    """

    def __init__(self, params, grads, lr, momentum):
        self.params, self.grads = params, grads
        self.lr, self.momentum = lr, momentum
        self.xp = array_module(params)
        self.velocity = params * 0
        self._step = params * 0                      # scratch, reused every step

    def step(self):
        v = self.velocity
        v *= self.momentum
        v += self.grads
        self.xp.multiply(v, self.lr, out=self._step)
        self.params -= self._step


def plan_buckets(layer_offsets, itemsize, bucket_mib):
    """Cut the flat gradient into buckets of whole layers, in backward order.

    layer_offsets: (layer, lo, hi) per layer with parameters, in forward order.
    Returns [(lo, hi), ...], the first bucket holding the LAST layers (ready first).
    Each bucket grows until it holds at least bucket_mib MiB (2**20 bytes, dpsim.vocabulary.MIB,
    as in the simulator's sync.bucket_mib); bucket_mib <= 0 gives one.
    """
    total = layer_offsets[-1][2]
    if bucket_mib <= 0:
        return [(0, total)]
    limit = bucket_mib * MIB / itemsize
    buckets, hi = [], total
    for _, lo, _ in reversed(layer_offsets):
        if hi - lo >= limit:
            buckets.append((lo, hi))
            hi = lo
    if hi > 0:
        buckets.append((0, hi))
    return buckets


def residual_names(b):
    """The names of bucket b's 1-bit error-feedback residuals in a checkpoint: (worker,
    server), as OneBitAllreduce.residuals returns them."""
    return f"worker_residual_{b}", f"server_residual_{b}"


class GradientAverager:
    """grads <- (sum over ranks of grads) / N, as configured; see the module docstring.

    Per step: begin(compressed) before backward, ready(lo) from backward's callback,
    finish() after backward. The timeline gets spans for the work where it runs, its
    "communication" and "codec" totals, and the loop's wait in finish() split into
    exposed_comm and compression.
    """

    def __init__(self, grads, layer_offsets, comm, sync="ring", compress="none",
                 error_feedback=True, overlap=False, bucket_mib=25.0, timeline=None,
                 compressor=None):
        self.grads, self.comm, self.sync, self.compress = grads, comm, sync, compress
        self.n = comm.Get_size()
        self.timeline = timeline
        self.buckets = plan_buckets(layer_offsets, grads.itemsize, bucket_mib if overlap else 0)
        self.onebit = None
        if compress == "1bit":
            self.onebit = [mpi_impl.OneBitAllreduce(comm=comm, error_feedback=error_feedback)
                           for _ in self.buckets]
        iallreduce = sync == "mpi" and compress == "none" and isinstance(grads, np.ndarray)
        threads_ok = MPI.Query_thread() >= MPI.THREAD_SERIALIZED
        if len(self.buckets) > 1 and not iallreduce and not threads_ok:
            # MPI calls from a second thread are not allowed: sync after backward instead.
            self.buckets = plan_buckets(layer_offsets, grads.itemsize, 0)
        # one compressor per bucket: 1-bit's, or compressor(lo, hi) (PowerSGD, top-k);
        # each is called on the bucket and returns the sum over ranks, like OneBitAllreduce
        self.compressors = self.onebit
        if compressor is not None:
            self.compressors = [compressor(lo, hi) for lo, hi in self.buckets]
        if len(self.buckets) == 1:
            self.runner = AfterBackward(self)
        elif iallreduce:
            self.runner = NonBlockingMPI(self)
        else:
            self.runner = CommThread(self)
        self.bytes_sent = 0                           # by this rank, cumulative
        self.compressed = False
        self.codec_s = 0.0                            # encode/decode seconds of this step
        self._first_call = True

    @property
    def mode(self):
        """How buckets are run: "blocking", "iallreduce" or "thread"."""
        return self.runner.name

    # ------------------------------------------------------------------ the per-step calls
    def begin(self, compressed):
        """Start a step; compressed=False sends full precision (1-bit warm-up)."""
        self.compressed = compressed and self.compressors is not None
        self.started = 0                              # buckets started so far this step
        self.codec_s = 0.0
        self.runner.begin()

    def ready(self, lo):
        """Backward has finished everything from offset lo on: start the buckets inside.
        (Without overlap there is one bucket, started by finish() after backward.)"""
        if self.runner.during_backward:
            self._start_buckets_from(lo)

    def _start_buckets_from(self, lo):
        while self.started < len(self.buckets) and self.buckets[self.started][0] >= lo:
            self.runner.start(self.started)
            self.started += 1
        self.runner.progress()

    def finish(self):
        """Block until the whole gradient is averaged. Returns the seconds waited, which the
        timeline counts as exposed_comm and compression (split_sync_wait)."""
        start = time.perf_counter()
        self._start_buckets_from(0)
        self.runner.wait()
        name = "gradient sync (blocking)" if self.mode == "blocking" else "wait for gradients"
        end = self._record(name, start, codec_s=self.codec_s)
        exposed, compression = split_sync_wait(end - start, self.codec_s)
        if self.timeline is not None:
            self.timeline.count("exposed_comm", exposed)
            self.timeline.count("compression", compression)
        return end - start

    # ------------------------------------------------------------------ the work
    def reduce_bucket(self, b):
        """Average bucket b in place with a blocking all-reduce (full or 1-bit)."""
        lo, hi = self.buckets[b]
        g = self.grads[lo:hi]
        start = time.perf_counter()
        codec_s = 0.0
        if self.compressed:
            coder = self.compressors[b]
            bytes_before, codec_before = coder.bytes_sent, coder.codec_s
            total = coder(g)
            self.bytes_sent += coder.bytes_sent - bytes_before
            codec_s = coder.codec_s - codec_before
            g[...] = total
            name = f"{'1-bit' if self.compress == '1bit' else self.compress} allreduce bucket {b}"
        else:
            mpi_impl.allreduce(g, algo=self.sync, comm=self.comm, out=g, check=self._first_call)
            self.bytes_sent += mpi_impl.bytes_sent(self.sync, hi - lo, g.itemsize, self.n,
                                                   self.comm.Get_rank())
            name = f"{self.sync} allreduce bucket {b}"
        self._first_call = False
        g *= 1.0 / self.n                             # sum -> mean
        end = self._record(name, start, track=self.runner.track, elements=hi - lo, codec_s=codec_s)
        self.codec_s += codec_s
        if self.timeline is not None:
            self.timeline.count("codec", codec_s)
            self.timeline.count("communication", end - start - codec_s)

    def _record(self, name, start, work=None, track=0, **args):
        """A span from start to now on the timeline (counted as `work` if given); returns now."""
        end = time.perf_counter()
        if self.timeline is not None:
            self.timeline.add(name, start, end, phase=work, track=track, **args)
        return end

    def close(self):
        self.runner.close()

    # ------------------------------------------------------------------ checkpoints
    def state(self):
        """1-bit error-feedback residuals by name (residual_names), for checkpoints."""
        arrays = {}
        for b, onebit in enumerate(self.onebit or []):
            residuals = onebit.residuals(self._bucket(b))
            if residuals is not None:
                worker, server = residual_names(b)
                arrays[worker], arrays[server] = residuals
        return arrays

    def load_state(self, arrays):
        for b, onebit in enumerate(self.onebit or []):
            worker, server = residual_names(b)
            if worker in arrays:
                onebit.set_residuals(self._bucket(b), arrays[worker], arrays[server])

    def state_shapes(self):
        """({name: (shape, dtype)} of every array state() can hold, [(worker, server) names
        per bucket]).  A bucket's pair exists from its first compressed step on."""
        shapes, pairs = {}, []
        for b, (onebit, (lo, hi)) in enumerate(zip(self.onebit or [], self.buckets)):
            worker, server = residual_names(b)
            worker_size, server_size = onebit.residual_sizes(hi - lo)
            shapes[worker] = ((worker_size,), self.grads.dtype)
            shapes[server] = ((server_size,), self.grads.dtype)
            pairs.append((worker, server))
        return shapes, pairs

    def _bucket(self, b):
        lo, hi = self.buckets[b]
        return self.grads[lo:hi]


# ---------------------------------------------------------------------- how buckets are run

class BucketRunner:
    """One way to run the buckets' all-reduces of a GradientAverager. start(b) is called for
    each bucket in order, progress() after each layer of backward, wait() in finish()."""
    name = ""
    during_backward = True         # ready() starts buckets while backward runs
    track = COMM_TRACK             # the trace track of the buckets' spans

    def begin(self):
        pass

    def start(self, b):
        raise NotImplementedError

    def progress(self):
        pass

    def wait(self):
        pass

    def close(self):
        pass


class AfterBackward(BucketRunner):
    """No overlap: finish() runs the one bucket's blocking all-reduce, on the loop's track."""
    name = "blocking"
    during_backward = False
    track = 0

    def __init__(self, averager):
        self.start = averager.reduce_bucket


class NonBlockingMPI(BucketRunner):
    """--sync mpi on CPU arrays, uncompressed: MPI's own Iallreduce per bucket into a second
    buffer, pushed along with Testall after every layer; Waitall and the division by N in
    finish()."""
    name = "iallreduce"

    def __init__(self, averager):
        self.averager = averager
        self.received = np.empty_like(averager.grads)
        self.requests = []

    def begin(self):
        self.requests = []

    def start(self, b):
        av = self.averager
        lo, hi = av.buckets[b]
        if not self.requests:
            self.first_post = time.perf_counter()
        self.requests.append(av.comm.Iallreduce(av.grads[lo:hi], self.received[lo:hi]))
        av.bytes_sent += mpi_impl.bytes_sent("mpi", hi - lo, av.grads.itemsize, av.n,
                                             av.comm.Get_rank())

    def progress(self):
        if self.requests:
            MPI.Request.Testall(self.requests)        # let MPICH make progress

    def wait(self):
        av = self.averager
        MPI.Request.Waitall(self.requests)
        # in flight from the first Iallreduce until Waitall returned (an upper bound)
        av._record(f"Iallreduce x{len(self.requests)} in flight", self.first_post,
                   work="communication", track=COMM_TRACK)
        np.multiply(self.received, 1.0 / av.n, out=av.grads)


class CommThread(BucketRunner):
    """One background thread that runs the averager's blocking all-reduce of each started
    bucket, in order, while backward goes on.

    A single thread keeps every rank's MPI calls in the same order (collectives must
    match). An exception in the thread is re-raised by the next wait()."""
    name = "thread"

    def __init__(self, averager):
        self.work = averager.reduce_bucket
        self.jobs = queue.Queue()
        self.error = None
        self.device = _current_cuda_device()
        self.thread = threading.Thread(target=self._run, daemon=True, name="gradient-sync")
        self.thread.start()

    def _run(self):
        if self.device is not None:
            import cupy
            cupy.cuda.Device(self.device).use()
        while True:
            b = self.jobs.get()
            try:
                if b is None:
                    return
                if self.error is None:
                    self.work(b)
            except BaseException as error:
                self.error = error
            finally:
                self.jobs.task_done()

    def start(self, b):
        self.jobs.put(b)

    def wait(self):
        self.jobs.join()
        if self.error is not None:
            raise RuntimeError(f"gradient synchronisation failed: {self.error}") from self.error

    def close(self):
        self.jobs.put(None)
        self.thread.join(timeout=5)


def _current_cuda_device():
    import sys
    if "cupy" not in sys.modules:
        return None
    try:
        import cupy
        return cupy.cuda.Device().id
    except Exception:
        return None
