"""What course calibrate prints: each measurement and the profile key it became, the ranges of
the figures that moved between rounds, and the machine's load while it measured."""
import numpy as np

from course import spread
from course.measurements import STALLED, Measurements, unsteady


def summary(prof, measured):
    """What calibrate prints: each measurement and the key it became."""
    m = Measurements.from_sidecar(measured)
    prof = spread.values(prof)
    c, cl, g, link = prof["compute"], prof["cluster"], prof["cluster"]["gpu"], prof["cluster"]["intra"]
    unit = "cores" if m.cpu else "GPUs"
    rounds = len(m.probes[1])
    lines = [f"model {m.model['name']} width {m.model['width']} depth {m.model['depth']}: "
             f"{m.model['params']:,} parameters, {m.model['flops_per_sample']:,} FLOPs per sample (fwd+bwd)",
             f"  peak (matmul)   {g['fp32_tflops'] * 1e3:8.2f} GFLOP/s per device; {m.devices} {unit}",
             *(f"  batch {b:4d}      {t * 1e3:8.3f} ms forward+backward" for b, t in m.sweep),
             f"  fit             e_max {c['efficiency']:.3f}, half_batch {c['half_batch']:.2f} (batch {m.batch}: "
             f"the median of the sweep and {rounds} probes, the sweep scaled to it)",
             f"  SGD update      {m.update_s * 1e3:8.3f} ms -> mem_bw_gbs {g['mem_bw_gbs']:.2f}",
             f"  memory bus      2 ranks updating at once share {cl['node_mem_bw_gbs']:.1f} GB/s "
             f"(one alone: {g['mem_bw_gbs']:.1f}) -> node_mem_bw_gbs",
             f"  2 ranks         the slower computes {c['jitter'] / np.sqrt(np.pi):.1%} longer than the mean "
             f"-> compute.jitter {c['jitter']:.3f}",
             f"  overheads       {c['overhead_ms']:8.3f} ms (gradient / N + take a batch; the median of "
             f"the moments) -> compute.overhead_ms",
             f"  array copy      {m.copy_gbs:8.2f} GB/s -> host_mem_bw_gbs",
             f"  sharing         {m.sharing_ranks} ranks computing at once get {cl['devices_per_node']:.2f} "
             f"{unit}' worth -> devices_per_node",
             f"  link            {link['bandwidth_gbs']:8.3f} GB/s (ping-pong); a message in the loop's rhythm "
             f"costs {2 * link['latency_us']:.0f} us (fitted to the 2-rank ring sync) -> intra, host_link",
             f"  1-bit codec     {c['kernel_launch_us']:.1f} us per kernel, {c['codec_gbs']:.2f} GB/s on the bytes "
             f"its kernels touch -> kernel_launch_us, codec_gbs"]
    if "powersgd_gflops" in c:
        lines.append(f"  PowerSGD        its products and Gram-Schmidt at rank {m.probes[2][0].lowrank[0]} on the model's "
                     f"matrices: {c['powersgd_gflops']:.2f} GFLOP/s (a large matmul: {m.peak_flops / 1e9:.1f}) "
                     f"-> powersgd_gflops")
    if "timeslice_us" in cl:
        lines.append(scheduling_line(m, cl["timeslice_us"]))
    if "timeslice_overhead" in cl:
        lines.append(f"  time-slicing    ranks sharing a core compute {cl['timeslice_overhead']:.1%} slower than "
                     f"their share and finish {c['shared_jitter']:.1%} apart -> timeslice_overhead, shared_jitter")
    if "update_after_codec" in c:
        lines.append(f"  after 1-bit     the update runs {c['update_after_codec']:.1%} slower than after the ring "
                     f"(the codec evicted its arrays) -> update_after_codec")
    reprobed = [n for n, rs in measured["probes"].items() for p in rs if "reprobed" in p]
    if reprobed:
        lines.append(f"  stalled rounds  {len(reprobed)} probe(s) of {', '.join(sorted(set(reprobed)))} ranks probed "
                     f"again: their ring loop took over {STALLED}x the rounds' median")
    lines.append(f"  (medians of {rounds} rounds of probes)")
    lines += range_lines(measured.get("spread", {}), measured.get("machine_load"))
    for warning in unsteady(measured):
        lines.append(f"warning: the machine changed while calibrating: {warning}; other programs were "
                     f"running? calibrate again when it is quiet, or the predictions inherit this moment")
    return "\n".join(lines)


def range_lines(spreads, load):
    """Each figure's range (10-90% of the rounds' own fits), and the machine's load."""
    lines = ["  ranges (10-90% of each round's own fit; dpsim predicts a band from them):"] if spreads else []
    lines += [f"    {key:32s} {s['value']:.4g} ({s['low']:.4g} - {s['high']:.4g})" for key, s in spreads.items()]
    busy = spread.load_text(load)
    return lines + ([f"  {busy}"] if busy else [])


def scheduling_line(m, timeslice_us):
    n = 2 * m.sharing_ranks
    crowded = m.per_round(n, lambda p, _: p.message_mean_s)
    alone = m.per_round(2, lambda p, _: p.message_mean_s)
    ring = m.per_round(n, lambda p, _: p.ring_sync_s - p.straggler_s)
    return (f"  scheduling      {n} busy-polling ranks: a ping-pong's message waits {(crowded - alone) * 1e6:.0f} us "
            f"more on average; their ring sync takes {ring * 1e3:.2f} ms in the loop's rhythm "
            f"-> timeslice_us {timeslice_us:.0f}")
