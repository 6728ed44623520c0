"""`dpsim run --trace`: valid Chrome trace JSON, checked event by event, and what it shows."""
import json
import numbers

import pytest

from dpsim import load_scenario
from dpsim.config import builtin_names

from dpsim_helpers import run_dpsim

RING4 = ["d2l-ps-vs-ring", "--set", "sync.strategy=ring", "--set", "training.iterations=2",
         "--set", "training.warmup_iterations=1"]


@pytest.fixture(scope="module")
def ring_trace(tmp_path_factory):
    path = tmp_path_factory.mktemp("trace") / "trace.json"
    assert run_dpsim("run", *RING4, "--trace", str(path))[0] == 0
    return json.loads(path.read_text())


def check_event(e):
    """The trace event format's rules for the two kinds of event we write."""
    assert isinstance(e, dict)
    assert e["ph"] in ("X", "M")
    assert isinstance(e["name"], str) and e["name"]
    assert isinstance(e["pid"], int) and not isinstance(e["pid"], bool)
    assert isinstance(e["tid"], int) and not isinstance(e["tid"], bool)
    if e["ph"] == "M":
        assert set(e) <= {"name", "ph", "pid", "tid", "args"}
        if e["name"] in ("process_name", "thread_name"):
            assert isinstance(e["args"]["name"], str) and e["args"]["name"]
        else:
            assert e["name"] in ("process_sort_index", "thread_sort_index")
            assert isinstance(e["args"]["sort_index"], int)
    else:
        assert set(e) <= {"name", "cat", "ph", "pid", "tid", "ts", "dur", "args"}
        for key in ("ts", "dur"):
            assert isinstance(e[key], numbers.Real) and e[key] >= 0
        assert e.get("cat") in ("compute", "transfer", "iteration")
        if e["cat"] == "transfer":
            assert isinstance(e["args"]["bytes"], numbers.Real) and e["args"]["bytes"] > 0
        elif e["cat"] == "iteration":
            assert isinstance(e["args"]["iteration"], int) and isinstance(e["args"]["warm_up"], bool)
        else:
            assert "args" not in e


def test_every_event_is_valid_chrome_trace(ring_trace):
    check_trace(ring_trace)


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_scenario_writes_a_valid_trace(tmp_path, name):
    path = tmp_path / "t.json"
    assert run_dpsim("run", name, "--set", "training.iterations=1", "--set", "training.warmup_iterations=0",
                     "--trace", str(path))[0] == 0
    check_trace(json.loads(path.read_text()))


def check_trace(trace):
    assert set(trace) <= {"traceEvents", "displayTimeUnit"}
    assert trace["displayTimeUnit"] in ("ms", "ns")
    events = trace["traceEvents"]
    assert len(events) > 50
    for e in events:
        check_event(e)
    threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert threads == {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_sort_index"}
    assert processes == {e["pid"] for e in events if e["name"] == "process_sort_index"}
    for e in events:
        if e["ph"] == "X":
            assert (e["pid"], e["tid"]) in threads, e
            assert e["pid"] in processes
    # one name per thread, no two threads with the same name
    names = [e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(names) == len(set(names))


def spans_by_track(trace):
    """Events by lane: a lane's extra threads ("gpu0 (2)") count as the lane ("gpu0")."""
    name = {(e["pid"], e["tid"]): e["args"]["name"].split(" (")[0] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}
    out = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            out.setdefault(name[e["pid"], e["tid"]], []).append(e)
    return out


def test_no_two_slices_of_a_thread_overlap(tmp_path):
    """Perfetto drops slices of one thread that overlap without nesting; it reads ts and dur in
    microseconds and rounds them to whole nanoseconds. 1-bit shares every channel between
    several transfers at once, and ring reduces beside backward."""
    for args in (["cntk-1bit-k80", "--set", "sync.compression=1bit"], RING4):
        _, trace = run_json_and_trace(tmp_path, *args, "--set", "training.iterations=1")
        slices = {}
        for e in trace["traceEvents"]:
            if e["ph"] == "X":
                a = round(e["ts"] * 1000)
                slices.setdefault((e["pid"], e["tid"]), []).append((a, a + round(e["dur"] * 1000)))
        for spans in slices.values():
            spans.sort()
            assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:]))
        names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"]
        extra = [n for n in names if n.endswith(")")]
        assert extra, "these runs overlap spans on some lane"
        for n in extra:      # "lane (k)" comes right after "lane (k-1)", or "lane" for k = 2
            lane, k = n[:-1].rsplit(" (", 1)
            assert names[names.index(n) - 1] == (lane if k == "2" else f"{lane} ({int(k) - 1})")


def test_each_gpu_has_its_forward_and_backward_every_iteration(ring_trace):
    tracks = spans_by_track(ring_trace)
    for g in range(4):
        kinds = [e["name"] for e in tracks[f"gpu{g}"]]
        assert kinds.count("forward") == 3 and kinds.count("backward") == 3     # 1 warm-up + 2
        assert "reduce" in kinds and "update" in kinds
        forward = [e for e in tracks[f"gpu{g}"] if e["name"] == "forward"]
        assert all(a["ts"] + a["dur"] <= b["ts"] for a, b in zip(forward, forward[1:]))


def test_bytes_on_each_gpus_outgoing_link_are_the_ring_closed_form(ring_trace):
    """Ring all-reduce: every GPU sends 2 (n - 1) / n m bytes per iteration (m = 4 bytes x params)."""
    sc = load_scenario("d2l-ps-vs-ring")
    m, n, iterations = 4 * sc.model.params, 4, 3
    tracks = spans_by_track(ring_trace)
    for g in range(n):
        out = [t for t in tracks if t.startswith(f"gpu{g}>")]
        assert len(out) == 1
        sent = sum(e["args"]["bytes"] for e in tracks[out[0]])
        assert sent == pytest.approx(2 * (n - 1) / n * m * iterations, rel=1e-9)


def test_processes_are_nodes_and_links(tmp_path):
    path = tmp_path / "t.json"
    assert run_dpsim("run", "d2l-ps-vs-ring", "--set", "cluster.nodes=2", "--set", "cluster.gpus_per_node=2",
                     "--set", "cluster.inter=10gbe", "--set", "sync.strategy=ring",
                     "--set", "training.iterations=1", "--set", "training.warmup_iterations=0",
                     "--trace", str(path))[0] == 0
    events = json.loads(path.read_text())["traceEvents"]
    pname = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(pname.values()) == ["iterations", "network links", "node 0", "node 1"]
    thread_pid = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "thread_name"}
    assert pname[thread_pid["gpu1"]] == "node 0" and pname[thread_pid["gpu2"]] == "node 1"
    assert any(pname[pid] == "network links" and "net" in name for name, pid in thread_pid.items())


def run_json_and_trace(tmp_path, *args):
    """`dpsim run --json --trace`: the printed result and the trace file."""
    path = tmp_path / "t.json"
    code, out, _ = run_dpsim("run", *args, "--json", "--trace", path)
    assert code == 0
    return json.loads(out), json.loads(path.read_text())


def sent_by_gpus(tracks, n):
    """Bytes on each GPU's outgoing channel: everything it sent, once per transfer."""
    return [sum(e["args"]["bytes"] for t in tracks if t.startswith(f"gpu{g}>") for e in tracks[t]) for g in range(n)]


@pytest.mark.parametrize("sets", [
    ["sync.strategy=ps", "sync.ps_location=cpu"],
    ["sync.strategy=hierarchical", "cluster.nodes=2", "cluster.gpus_per_node=2", "cluster.inter=10gbe"],
    ["sync.strategy=sharded-ps", "sync.bucket_mib=8"],
])
def test_bytes_on_links_add_up_to_what_the_result_says_was_sent(tmp_path, sets):
    args = ["d2l-ps-vs-ring", "--set", "training.iterations=2", "--set", "training.warmup_iterations=1"]
    res, trace = run_json_and_trace(tmp_path, *args, *(x for kv in sets for x in ("--set", kv)))
    sent = sent_by_gpus(spans_by_track(trace), res["gpus"])
    assert sum(sent) / len(sent) / 3 == pytest.approx(res["bytes_sent_per_gpu"], rel=1e-9)
    if "sync.ps_location=cpu" in sets:      # every GPU pushes its whole gradient to the CPU, once
        m = 4 * load_scenario("d2l-ps-vs-ring").model.params
        assert sent == pytest.approx([3 * m] * 4, rel=1e-9)


def test_iterations_track_labels_warm_up_and_matches_the_iteration_time(tmp_path):
    res, trace = run_json_and_trace(tmp_path, *RING4)
    iterations = sorted(spans_by_track(trace)["iterations"], key=lambda e: e["ts"])
    assert [e["name"] for e in iterations] == ["iteration 0 (warm-up)", "iteration 1", "iteration 2"]
    assert [e["args"]["warm_up"] for e in iterations] == [True, False, False]
    for a, b in zip(iterations, iterations[1:]):
        assert a["ts"] + a["dur"] == pytest.approx(b["ts"], abs=1e-3)
    measured = [e["dur"] for e in iterations[1:]]
    assert sum(measured) / len(measured) == pytest.approx(res["iteration_time_s"] * 1e6, rel=1e-6)
    last_end = max(e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X")
    assert iterations[-1]["ts"] + iterations[-1]["dur"] == pytest.approx(last_end, abs=1e-3)


def test_loader_warm_up_comes_from_the_engine_window(tmp_path):
    """With W loader workers the engine warms up for at least 2W iterations; the trace says so."""
    _, trace = run_json_and_trace(tmp_path, "pytorch-dataparallel-4gpu", "--set", "sync.strategy=ring",
                                  "--set", "data.workers=3", "--set", "training.warmup_iterations=1",
                                  "--set", "training.iterations=3")
    flags = [e["args"]["warm_up"] for e in sorted(spans_by_track(trace)["iterations"], key=lambda e: e["ts"])]
    assert flags == [True] * 6 + [False] * 3


def test_load_spans_show_data_waits(tmp_path):
    path = tmp_path / "t.json"
    assert run_dpsim("run", "pytorch-dataparallel-4gpu", "--set", "data.workers=0", "--set", "training.iterations=1",
                     "--set", "training.warmup_iterations=0", "--trace", str(path))[0] == 0
    tracks = spans_by_track(json.loads(path.read_text()))
    sc = load_scenario("pytorch-dataparallel-4gpu")
    decode_us = 4 * sc.training.batch_per_gpu * sc.data.decode_ms_per_sample * 1e3    # one process decodes all
    for g in range(4):
        load = [e for e in tracks[f"gpu{g}"] if e["name"] == "load"]
        assert len(load) == 1 and load[0]["dur"] >= decode_us


def test_unwritable_trace_path_is_one_line_error(tmp_path, dpsim_cli):
    code, _, err = dpsim_cli("run", *RING4, "--trace", tmp_path / "no" / "such" / "dir.json")
    assert code == 2
    assert err.startswith("dpsim: error:") and err.count("\n") == 1 and "Traceback" not in err


def test_host_staged_messages_show_on_each_gpus_row(tmp_path):
    """1-bit goes through MPI via host memory: every GPU's row shows each step's MPI call
    (sync.message_overhead_us long) and its staged messages until the last has arrived, which
    is when that step's transfers leave the links; a direct ring shows neither."""
    args = ["cntk-1bit-k80", "--set", "sync.compression=1bit", "--set", "training.iterations=1",
            "--set", "training.warmup_iterations=0"]
    res, trace = run_json_and_trace(tmp_path, *args)
    tracks = spans_by_track(trace)
    overhead_us = load_scenario("cntk-1bit-k80").sync.message_overhead_us
    link_ends = sorted({round(e["ts"] + e["dur"], 3) for t, es in tracks.items() if ">" in t for e in es
                        if e["name"].startswith("1bit-")})
    for g in range(res["gpus"]):
        calls = [e for e in tracks[f"gpu{g}"] if e["name"] == "MPI call"]
        staged = [e for e in tracks[f"gpu{g}"] if e["name"] == "host-staged messages"]
        assert calls and len(calls) == len(staged)
        assert all(e["dur"] == pytest.approx(overhead_us, abs=1e-3) for e in calls)
        for e in staged:
            assert round(e["ts"] + e["dur"], 3) in link_ends
    plain = spans_by_track(run_json_and_trace(tmp_path, *RING4)[1])
    assert not any(e["name"] in ("MPI call", "host-staged messages") for es in plain.values() for e in es)
