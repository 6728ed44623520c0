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
