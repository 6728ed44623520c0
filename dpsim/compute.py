"""How long a GPU computes: FLOPs / (peak x efficiency), efficiency falling for small batches.

Efficiency curve (saturating, like Michaelis-Menten or a half-performance length):
    efficiency(b) = e_max * b / (b + b_half)
e_max is the fraction of peak that the model reaches with a big per-GPU batch, b_half the
per-GPU batch at which it reaches half of that. Rationale: a small batch leaves streaming
multiprocessors idle and does not amortise kernel launches and weight reads; measured
throughput against batch size rises steeply and then flattens (Canziani, Paszke & Culurciello,
"An Analysis of Deep Neural Network Models for Practical Applications", 2016, Fig. 4-5).
It is Hockney's r_inf / n_1/2 model for vector computers applied to batches: the time is
    t(b) = F (b + b_half) / (P e_max),
a fixed cost worth b_half samples plus a cost per sample. Calibration (course/) fits e_max and
b_half from two measured batch sizes.

Forward is a third of the compute and backward two thirds (backward computes gradients with
respect to both inputs and weights: two matrix products per forward one).
The weight update (momentum SGD) is memory-bound: per parameter it reads weight, gradient
and momentum and writes weight and momentum, 5 x 4 = 20 bytes at the GPU's memory bandwidth.
"""

UPDATE_BYTES_PER_PARAM = 20


def efficiency(batch: float, e_max: float, b_half: float) -> float:
    return e_max * batch / (batch + b_half)


def compute_time_s(flops_per_sample: float, batch: int, peak_tflops: float,
                   e_max: float, b_half: float) -> float:
    """Forward + backward time of one iteration on one GPU."""
    return flops_per_sample * batch / (peak_tflops * 1e12 * efficiency(batch, e_max, b_half))


def update_time_s(params: int, mem_bw_gbs: float) -> float:
    return params * UPDATE_BYTES_PER_PARAM / (mem_bw_gbs * 1e9)


def efficiency_from_rate(samples_per_s: float, batch: int, flops_per_sample: float, peak_tflops: float,
                         b_half: float, fixed_s: float) -> float:
    """e_max such that one GPU trains at samples_per_s at `batch`: a step takes batch / rate,
    of which fixed_s (update, overheads) is not forward + backward; the rest is
    t(b) = F (b + b_half) / (P e_max), so e_max = F (b + b_half) / (P t)."""
    step = batch / samples_per_s
    t = step - fixed_s
    if t <= 0:
        raise ValueError(f"{samples_per_s:g} samples/s at batch {batch} is {step * 1e3:.3g} ms a step, no more than "
                         f"the update and overheads alone ({fixed_s * 1e3:.3g} ms)")
    return flops_per_sample * (batch + b_half) / (peak_tflops * 1e12 * t)
