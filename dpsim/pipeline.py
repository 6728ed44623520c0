"""The input pipeline: loader workers decoding batches on the node's CPU cores, a prefetch
queue, and the copy from host memory to the GPU.

Per training process (dpsim.derived.processes_per_node: one per GPU, unless one process drives
several GPUs, as DataParallel, MXNet and TensorFlow's towers do, and loads the batches of all
of them) there are `workers` loader processes, as in PyTorch's DataLoader(num_workers=...). Each worker builds whole batches: a batch of b samples takes
b x decode_ms_per_sample on one core. Workers put finished batches in a queue of
`prefetch_batches` and wait when it is full, so with W workers a batch is ready every
b x decode / W in steady state while the GPU computes.
Cores are shared: the node's cpu_cores minus one per training process are left for loaders;
if more workers want them than there are, each runs proportionally slower (processor
sharing).
`workers = 0` loads inside the training loop: the training process decodes its batch
itself, on its own core, while its GPU waits (story 4's starving GPUs).
`source = "synthetic"` has no loading and no copy: the data is made on the GPU (story 3).
Every real batch is then copied host -> GPU over the PCIe path (b x input bytes), sharing
the PCIe uplinks with everything else.
"""
import simpy

from . import derived


class InputPipeline:
    def __init__(self, env, sc, machine, work, ranks):
        self.env, self.machine, self.ranks = env, machine, ranks
        data, c = sc.data, sc.cluster
        self.real = data.source == "real"
        if not self.real:
            return
        batch, per_process = sc.training.batch_per_gpu, derived.gpus_per_process(sc)
        # (GPU the batch is copied to, samples per batch) for each training process: its first GPU
        self.consumers = [(ranks[i], batch * len(ranks[i:i + per_process]))
                          for i in range(0, len(ranks), per_process)]
        processes_per_node = derived.processes_per_node(sc)
        loader_cores = max(c.cpu_cores - processes_per_node, 1)
        wanting = data.workers * processes_per_node
        self.slowdown = max(1.0, wanting / loader_cores) if data.workers else \
            max(1.0, processes_per_node / c.cpu_cores)
        self.decode_s = data.decode_ms_per_sample / 1e3
        self.input_bytes = work.input_bytes
        self.inline = data.workers == 0
        self.queues = []
        if not self.inline:
            for gpu, samples in self.consumers:
                queue = simpy.Store(env, capacity=data.prefetch_batches)
                self.queues.append(queue)
                for _ in range(data.workers):
                    env.process(self._worker(queue, samples * self.decode_s * self.slowdown))

    def _worker(self, queue, batch_s):
        while True:
            yield self.env.timeout(batch_s)
            yield queue.put(batch_s)

    def next_batch(self):
        """Wait until every training process has its next batch on its GPU (a "load" span on
        every GPU's timeline: they all wait for it). The training loop asks at the start of every
        iteration, so this is where the trace notes that an iteration begins."""
        start = self.env.now
        if self.machine.trace is not None:
            self.machine.trace.iteration_starts.append(start)
        if not self.real:
            return
        if self.inline:
            yield self.env.timeout(max(s for _, s in self.consumers) * self.decode_s * self.slowdown)
        else:
            yield self.env.all_of([q.get() for q in self.queues])
        host = lambda gpu: f"host{self.machine.cluster.node_of(gpu)}"
        yield self.machine.copy([(host(g), g, s * self.input_bytes) for g, s in self.consumers], "host-to-device")
        if self.machine.trace is not None:
            for gpu in self.ranks:
                self.machine.trace.span(gpu, "load", start, self.env.now)
