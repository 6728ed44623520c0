"""What a simulation returns: a Run (the engine's measurements of one scenario) and a Result
(a Run set against one GPU, as `dpsim run --json` prints it; README.md lists its keys)."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Run:
    """Per-iteration means over the measured iterations of one simulated run."""
    iteration_time_s: float
    breakdown_s: dict              # the parts of dpsim.vocabulary.BREAKDOWN: they sum to iteration_time_s
    bytes_sent_per_gpu: float

    def to_dict(self) -> dict:
        return {"iteration_time_s": self.iteration_time_s, "breakdown_s": dict(self.breakdown_s),
                "bytes_sent_per_gpu": self.bytes_sent_per_gpu}


@dataclass(frozen=True)
class Result:
    iteration_time_s: float
    throughput_samples_per_s: float
    speedup: float                 # against the same scenario on one GPU
    scaling_efficiency: float      # speedup / GPUs
    sync_time_s: float             # one gradient synchronisation on its own
    bytes_sent_per_gpu: float      # per iteration, mean over GPUs
    breakdown_s: dict              # the parts of dpsim.vocabulary.BREAKDOWN: they sum to iteration_time_s
    scenario: dict                 # the resolved config
    gpus: int = 0
    trace: object = field(default=None, repr=False, compare=False)
    uncompressed: Run | None = None    # with compression: the same scenario without it
    memory_per_gpu_bytes: dict = field(default_factory=dict)   # dpsim.memory.PARTS and their total
    fits_in_memory: bool | None = None  # total within the GPU's memory; None: the GPU's memory is not given

    def to_dict(self) -> dict:
        return {
            "iteration_time_s": self.iteration_time_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "speedup": self.speedup,
            "scaling_efficiency": self.scaling_efficiency,
            "sync_time_s": self.sync_time_s,
            "bytes_sent_per_gpu": self.bytes_sent_per_gpu,
            "breakdown_s": dict(self.breakdown_s),
            "gpus": self.gpus,
            "scenario": self.scenario,
            **({"uncompressed": self.uncompressed.to_dict()} if self.uncompressed else {}),
            "memory_per_gpu_bytes": dict(self.memory_per_gpu_bytes),
            "fits_in_memory": self.fits_in_memory,
        }
