"""FP16 compression: cast the gradient to half precision, synchronise half the bytes, cast
back (Horovod's `compression=hvd.Compression.fp16`).
Cost: inner strategy on m/2 bytes + two cast kernels, each reading one array and writing the
other: 6 bytes per value before and 6 after.
"""


def wrap(allreduce):
    def compressed(machine, ranks, nbytes):
        values = nbytes / 4
        yield machine.kernel(ranks, "cast-to-fp16", 6 * values)
        yield from allreduce(machine, ranks, nbytes / 2)
        yield machine.kernel(ranks, "cast-to-fp32", 6 * values)
    return compressed
