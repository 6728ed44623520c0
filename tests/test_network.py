"""The max-min fair fluid network against hand-worked progressive filling."""
import pytest
import simpy

from dpsim.network import Channel, Network, share_bandwidth, Flow


def arrival_times(moves):
    """moves: (route, nbytes, start_s); returns each transfer's arrival time."""
    env = simpy.Environment()
    net = Network(env)
    times = [None] * len(moves)

    def one(i, route, nbytes, start):
        yield env.timeout(start)
        yield net.transfer(route, "a", "b", nbytes)
        times[i] = env.now

    for i, (route, nbytes, start) in enumerate(moves):
        env.process(one(i, route, nbytes, start))
    env.run()
    return times


def test_single_transfer_is_latency_plus_size_over_slowest_hop():
    fast, slow = Channel("fast", 10e9, 1e-6), Channel("slow", 2e9, 3e-6)
    (t,) = arrival_times([([fast, slow], 1e9, 0.0)])
    assert t == pytest.approx(4e-6 + 1e9 / 2e9)


def test_two_transfers_on_one_channel_share_it_equally():
    ch = Channel("c", 1e9, 0.0)
    t = arrival_times([([ch], 1e9, 0.0), ([ch], 1e9, 0.0)])
    assert t == pytest.approx([2.0, 2.0])


def test_late_arrival_gets_half_then_the_first_speeds_up_again():
    ch = Channel("c", 1e9, 0.0)
    # A alone for 0.5 s (0.5 GB done), then both at 0.5 GB/s: A finishes its last 0.5 GB at 1.5 s,
    # B has 0.5 GB done by then and its other 0.5 GB at full speed: 2.0 s.
    t = arrival_times([([ch], 1e9, 0.0), ([ch], 1e9, 0.5)])
    assert t == pytest.approx([1.5, 2.0])


def test_max_min_gives_unused_share_to_others():
    """Flow X crosses a 1 GB/s and a 0.2 GB/s channel; flow Y crosses only the 1 GB/s one.
    Max-min: X is held to 0.2 by its slow channel, so Y gets the remaining 0.8 (not 0.5)."""
    shared, narrow = Channel("shared", 1e9, 0.0), Channel("narrow", 0.2e9, 0.0)
    x = Flow([shared, narrow], 1.0, None)
    y = Flow([shared], 1.0, None)
    share_bandwidth([x, y])
    assert x.rate == pytest.approx(0.2e9)
    assert y.rate == pytest.approx(0.8e9)


def test_channel_never_overcommitted():
    chans = [Channel(f"c{i}", (i + 1) * 1e9, 0.0) for i in range(4)]
    flows = [Flow([chans[i % 4], chans[(i + 1 + i // 4) % 4]], 1.0, None) for i in range(9)]
    assert all(len(set(f.route)) == 2 for f in flows)
    share_bandwidth(flows)
    for ch in chans:
        load = sum(f.rate for f in flows if ch in f.route)
        assert load <= ch.bandwidth * (1 + 1e-9)
    # every flow is bottlenecked somewhere: some channel on its route is full
    for f in flows:
        assert any(sum(g.rate for g in flows if ch in g.route) >= ch.bandwidth * (1 - 1e-9) for ch in f.route)


def reference_rates(flows):
    """Progressive filling written the plain way: raise every unfrozen flow's rate together until
    a channel is full, freeze the flows crossing it, repeat."""
    rates = {f: 0.0 for f in flows}
    unfrozen = set(flows)
    channels = {ch for f in flows for ch in f.route}
    while unfrozen:
        def headroom(ch):
            users = [f for f in unfrozen if ch in f.route]
            used = sum(rates[f] for f in flows if ch in f.route)
            return (ch.bandwidth - used) / len(users) if users else float("inf")
        full = min(channels, key=headroom)
        step = headroom(full)
        for f in unfrozen:
            rates[f] += step
        unfrozen -= {f for f in unfrozen if full in f.route}
    return [rates[f] for f in flows]


def test_share_bandwidth_matches_plain_progressive_filling_on_random_networks():
    import random
    rng = random.Random(1)
    for _ in range(30):
        chans = [Channel(f"c{i}", rng.choice([1, 2, 5, 10]) * 1e9, 0.0) for i in range(rng.randint(2, 8))]
        flows = [Flow(rng.sample(chans, rng.randint(1, len(chans))), 1.0, None) for _ in range(rng.randint(1, 12))]
        share_bandwidth(flows)
        assert [f.rate for f in flows] == pytest.approx(reference_rates(flows), rel=1e-9)
