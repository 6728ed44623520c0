"""Results, as the result contract in DESIGN.md lists them."""
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Result:
    iteration_time_s: float
    throughput_samples_per_s: float
    speedup: float                 # against the same scenario on one GPU
    scaling_efficiency: float      # speedup / GPUs
    sync_time_s: float             # one gradient synchronisation on its own
    bytes_sent_per_gpu: float      # per iteration, mean over GPUs
    breakdown_s: dict              # compute, data_wait, exposed_comm, update: sums to iteration_time_s
    scenario: dict                 # the resolved config
    gpus: int = 0
    trace: object = field(default=None, repr=False, compare=False)
    # with compression: the same scenario without it (iteration_time_s, breakdown_s, bytes_sent_per_gpu)
    uncompressed: dict | None = None

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
            **({"uncompressed": self.uncompressed} if self.uncompressed else {}),
        }
