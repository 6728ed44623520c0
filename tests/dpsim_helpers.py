"""Small scenario builders shared by the dpsim tests."""


def star(n, bandwidth_gbs=10.0, latency_us=5.0, params=25_000_000, strategy="ring", **sync):
    """n GPUs under one PCIe switch: every GPU has its own link, so nothing contends but what
    an algorithm itself puts on one link. Route GPU->GPU = 2 hops, so alpha = 2 x latency."""
    return {
        "cluster": {"gpus_per_node": n, "gpus_per_pcie_switch": n,
                    "intra": {"bandwidth_gbs": bandwidth_gbs, "latency_us": latency_us},
                    "host_link": {"bandwidth_gbs": bandwidth_gbs, "latency_us": latency_us}},
        "model": {"params": params, "flops_per_sample": 1e9},
        "sync": {"strategy": strategy, "bucket_mib": 0, **sync},
    }


def d2l_transfers_only():
    """The d2l-ps-vs-ring scenario as d2l.ai's "Parameter Servers" counts it: transfers only, at
    16 GB/s (latency zero, additions practically free), one bucket."""
    from dpsim import load_scenario
    return load_scenario("d2l-ps-vs-ring", {
        "cluster.gpu": {"fp32_tflops": 15.7, "mem_bw_gbs": 1e9}, "cluster.host_mem_bw_gbs": 1e9,
        "cluster.intra": {"bandwidth_gbs": 16.0, "latency_us": 0.0},
        "cluster.host_link": {"bandwidth_gbs": 16.0, "latency_us": 0.0}, "sync.bucket_mib": 0})


def run_dpsim(*args):
    """The dpsim command in this process: (exit code, stdout, stderr); argparse's own usage
    errors come back as their exit code. conftest's dpsim_cli fixture is this function."""
    import contextlib
    import io

    from dpsim import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()
