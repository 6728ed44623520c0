"""PowerSGD in both halves makes the same exchanges: for the network course calibrate
describes (model.matrices), mpi_impl's PowerSGD and dpsim's all-reduce the same buffers in the
same order (the vectors, every P, every Q), counted by hand; and dpsim runs PowerSGD's kernels at
the memory bandwidth, whatever compute.codec_gbs (1-bit's codec rate) says."""
import pytest

from course.measurements import weight_matrices
from dpsim import load_scenario, simulate, workload
from dpsim.strategies import powersgd as dpsim_powersgd
from mpi_impl import nets, powersgd

from dpsim_helpers import star

WIDTH, DEPTH = 256, 2
# by hand, rank 1: the biases 256 + 256 + 10; P of each matrix has its smaller side (64, 256,
# 10), Q its larger (256, 256, 256)
BY_HAND = [256 + 256 + 10, 64 + 256 + 10, 256 + 256 + 256]


def mlp():
    return nets.build("mlp", (1, 8, 8), 10, WIDTH, DEPTH)


def mpi_impl_exchanges(monkeypatch, net):
    """Sizes (values) of the all-reduces of one PowerSGD call on one rank."""
    import mpi_impl
    from mpi4py import MPI
    sizes = []
    monkeypatch.setattr(mpi_impl, "allreduce", lambda x, **kw: sizes.append(x.size))
    psgd = powersgd.PowerSGD(powersgd.parameter_arrays(net, 0, net.num_params), MPI.COMM_SELF, rank=1)
    psgd(net.grads.copy())
    return sizes


def dpsim_exchanges(net):
    """Sizes (values) of the all-reduces dpsim's PowerSGD makes on the same network as calibrate
    describes it."""
    data = star(2, params=net.num_params)
    data["model"].update(layers=len(net.layer_offsets), matrices=weight_matrices(net), flops_per_sample=1e6)
    data["sync"].update(compression="powersgd")
    buckets = workload.build(load_scenario(data)).buckets
    sizes = []

    def allreduce(machine, ranks, nbytes):
        sizes.append(nbytes / 4)
        yield from ()

    class Machine:
        def kernel(self, *args, **kw):
            return None
    list(dpsim_powersgd.wrap(allreduce, 1, buckets)(Machine(), [0, 1], buckets[0].nbytes))
    return sizes


def test_both_halves_all_reduce_the_same_buffers_in_the_same_order(monkeypatch):
    net = mlp()
    assert mpi_impl_exchanges(monkeypatch, net) == BY_HAND
    assert dpsim_exchanges(net) == BY_HAND


def test_powersgd_kernels_run_at_the_memory_bandwidth_not_the_codec_rate():
    """A codec rate 100 x below the memory bandwidth slows 1-bit's kernels, not PowerSGD's
    (additions and BLAS products, the framework's own)."""
    def run(compression, codec_gbs):
        data = star(2, compression=compression)
        data["model"] = {"preset": "resnet20-cifar"}
        data["compute"] = {"codec_gbs": codec_gbs}
        data["training"] = {"iterations": 2, "warmup_iterations": 1}
        return simulate(data).breakdown_s["compression"]
    slow = 900.0 / 100                      # the v100's 900 GB/s, a hundredth
    assert run("powersgd", slow) == pytest.approx(run("powersgd", 0.0), rel=1e-9)
    assert run("1bit", slow) > 10 * run("1bit", 0.0)     # its launches stay as they were
