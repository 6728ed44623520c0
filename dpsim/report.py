"""Text output: a scenario in one line, a result as a table with bars, compression's verdict."""
import sys

from .memory import PARTS as MEMORY_PARTS
from .memory import does_not_fit


def describe(sc) -> str:
    c, s = sc.cluster, sc.sync
    gpu = c.gpu if isinstance(c.gpu, str) else sc.gpu_spec().name
    where = f"{c.nodes} nodes x {c.gpus_per_node}" if c.nodes > 1 else f"{c.gpus_per_node}"
    sync = s.strategy + (f" on {s.ps_location}" if s.strategy == "ps" else "")
    if s.compression != "none" and sc.gpus > 1:         # vocabulary.ONEBIT_OWN_EXCHANGE
        sync = "1-bit SGD (its own exchange)" if s.compression == "1bit" else f"{sync}, {s.compression}"
    return (f"{sc.name}: {where} x {gpu}, {sc.model.preset}, batch {sc.training.batch_per_gpu} per GPU, "
            f"sync {sync}, overlap {'on' if s.overlap else 'off'}")


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.3g} {unit}"
        n /= 1000


def print_result(sc, res, out=sys.stdout):
    print(describe(sc), file=out)
    it = res.iteration_time_s
    print(f"  iteration      {it * 1e3:10.3f} ms", file=out)
    print(f"  throughput     {res.throughput_samples_per_s:10,.0f} samples/s", file=out)
    print(f"  speed-up       {res.speedup:10.2f} x on {res.gpus} GPUs (scaling efficiency {res.scaling_efficiency:.0%})", file=out)
    print(f"  one sync       {res.sync_time_s * 1e3:10.3f} ms on its own; "
          f"{fmt_bytes(res.bytes_sent_per_gpu)} sent per GPU per iteration", file=out)
    print("  where an iteration's time goes:", file=out)
    for key, seconds in res.breakdown_s.items():
        share = seconds / it if it else 0.0
        bar = "#" * round(share * 40)
        print(f"    {key.replace('_', ' '):15s}{seconds * 1e3:10.3f} ms {share:5.0%}  {bar}", file=out)
    print_memory(sc, res, out)
    if res.uncompressed:
        print_compression(sc.sync.compression, res, res.uncompressed, out)


def print_memory(sc, res, out=sys.stdout):
    """Memory per GPU, part by part (dpsim.memory), against the GPU's; a scenario that does not fit says so."""
    mem = res.memory_per_gpu_bytes
    if not mem:
        return
    parts = ", ".join(f"{k.replace('_', ' ')} {fmt_bytes(mem[k])}" for k in MEMORY_PARTS if mem.get(k))
    capacity = sc.gpu_spec().memory_gb
    of = f" of {capacity:g} GB" if capacity else " (the GPU's memory is not given)"
    print(f"  memory per GPU {fmt_bytes(mem['total']):>13}{of}: {parts}", file=out)
    if res.fits_in_memory is False:
        print(f"  DOES NOT FIT: {does_not_fit(sc, mem)}", file=out)


def print_compression(name, res, plain, out=sys.stdout):
    """Compressed against uncompressed (a Run): what was saved on the wire, what the codec cost."""
    b, p = res.breakdown_s, plain.breakdown_s
    saved_ms = (p["exposed_comm"] - b["exposed_comm"]) * 1e3
    codec_ms = b["compression"] * 1e3
    slower = res.iteration_time_s / plain.iteration_time_s - 1
    print(f"  {name} against no compression:", file=out)
    print(f"    bytes sent per GPU   {fmt_bytes(plain.bytes_sent_per_gpu)} -> {fmt_bytes(res.bytes_sent_per_gpu)}", file=out)
    print(f"    exposed comm         {p['exposed_comm'] * 1e3:.3f} ms -> {b['exposed_comm'] * 1e3:.3f} ms", file=out)
    print(f"    encode/decode        {codec_ms:.3f} ms on the critical path", file=out)
    print(f"    iteration            {plain.iteration_time_s * 1e3:.3f} ms -> {res.iteration_time_s * 1e3:.3f} ms", file=out)
    comm = (f"saves {saved_ms:.3f} ms of exposed communication" if saved_ms >= 0 else
            f"saves no communication time (its messages cost {-saved_ms:.3f} ms more: fewer bytes, "
            f"but every message keeps its fixed costs: latency, and on 1-bit's MPI path the copies through "
            f"host memory)")
    if slower > 0:
        print(f"  verdict: {name} LOSES ({slower:.0%} slower): it {comm}, and spends {codec_ms:.3f} ms "
              f"encoding and decoding. Compression pays off only where communication is large next "
              f"to compute (see onebit-wins-ethernet).", file=out)
    else:
        print(f"  verdict: {name} WINS ({1 / (1 + slower) - 1:.0%} more samples/s): it {comm} "
              f"for {codec_ms:.3f} ms of encoding and decoding.", file=out)
