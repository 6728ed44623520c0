"""The dpsim command as a user types it (a subprocess, like a shell: conftest's dpsim_command)."""
import json

import pytest


def test_list_names_presets_with_sources(dpsim_command):
    p = dpsim_command("list")
    assert p.returncode == 0
    for word in ("cntk-1bit-k80", "d2l-ps-vs-ring", "k80", "h200", "nvlink4", "ib-ndr", "bert-large", "datasheet"):
        assert word in p.stdout
    from dpsim import hardware
    h200 = next(line for line in p.stdout.splitlines() if line.split()[:1] == ["h200"])
    assert f"{hardware.GPUS['h200'].memory_gb:.0f}" in h200.split()[:6]     # memory per GPU is listed


def test_run_json_and_text_agree(dpsim_command):
    p = dpsim_command("run", "cntk-1bit-k80", "--set", "sync.strategy=ps", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["scenario"]["sync"]["strategy"] == "ps"
    text = dpsim_command("run", "cntk-1bit-k80", "--set", "sync.strategy=ps").stdout
    assert f"{d['throughput_samples_per_s']:,.0f} samples/s" in text
    assert "exposed comm" in text


def test_run_a_toml_file(tmp_path, dpsim_command):
    f = tmp_path / "mine.toml"
    f.write_text('name = "mine"\n[cluster]\ngpus_per_node = 2\n[model]\npreset = "resnet50"\n'
                 '[sync]\nstrategy = "halving-doubling"\n')
    p = dpsim_command("run", str(f), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["scenario"]["name"] == "mine"


@pytest.mark.parametrize("line, names", [
    ('strategy = "tree"', ["sync.strategy", "recursive-doubling", "halving-doubling"]),
    ("bucket_mb = 25", ["sync.bucket_mb", "sync.bucket_mib"]),
])
def test_an_old_name_in_a_users_file_fails_with_a_one_line_hint(tmp_path, line, names, dpsim_command):
    f = tmp_path / "old.toml"
    f.write_text(f'[cluster]\ngpus_per_node = 2\n[sync]\n{line}\n')
    p = dpsim_command("run", str(f))
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert all(name in p.stderr for name in names), p.stderr


def test_sweep_prints_one_row_per_gpu_count(dpsim_command):
    p = dpsim_command("sweep", "d2l-ps-vs-ring", "--gpus", "1,2,4", "--json")
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout)
    assert [r["gpus"] for r in runs] == [1, 2, 4]


def test_sweep_text_table_matches_json(dpsim_command):
    p = dpsim_command("sweep", "d2l-ps-vs-ring", "--gpus", "1,4", "--set", "sync.strategy=ring")
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()[2:]]
    assert [r[:2] for r in rows] == [["1", "1"], ["4", "1"]]              # GPUs, nodes
    runs = json.loads(dpsim_command("sweep", "d2l-ps-vs-ring", "--gpus", "1,4", "--set", "sync.strategy=ring", "--json").stdout)
    assert float(rows[1][4]) == pytest.approx(runs[1]["speedup"], abs=0.006)


def test_run_with_compression_prints_the_verdict(dpsim_command):
    p = dpsim_command("run", "cntk-1bit-k80", "--set", "sync.compression=1bit")
    assert p.returncode == 0, p.stderr
    assert "verdict: 1bit LOSES" in p.stdout and "encode/decode" in p.stdout


def test_run_ends_with_the_diagnosis_and_json_carries_it(dpsim_command):
    p = dpsim_command("run", "cntk-1bit-k80", "--set", "sync.compression=1bit")
    d = json.loads(dpsim_command("run", "cntk-1bit-k80", "--set", "sync.compression=1bit", "--json").stdout)["diagnosis"]
    assert set(d) == {"cause", "share", "knob", "text", "memory"} and 0 < d["share"] <= 1
    lines = p.stdout.splitlines()
    tail = lines[lines.index("  diagnosis:") + 1:]
    assert [line.strip() for line in tail] == d["text"].splitlines()


@pytest.mark.parametrize("args, key", [
    (["run", "no-such-scenario"], "scenario"),
    (["run", "cntk-1bit-k80", "--set", "cluster.nodes=0"], "cluster.nodes"),
    (["run", "cntk-1bit-k80", "--set", "sync.strategy=gossip"], "sync.strategy"),
    (["run", "cntk-1bit-k80", "--set", "cluster.intra={bandwidth_gbs=-1, latency_us=1}"], "cluster.intra.bandwidth_gbs"),
    (["run", "cntk-1bit-k80", "--set", "cluster.colour=blue"], "cluster.colour"),
    (["run", "cntk-1bit-k80", "--set", "nodes"], "--set"),
    (["sweep", "cntk-1bit-k80", "--gpus", ""], "--gpus"),
    (["sweep", "cntk-1bit-k80", "--gpus", "2,x"], "--gpus"),
    (["run", "/nonexistent/file.toml"], "file"),
    (["run", "cntk-1bit-k80", "--trace", "/nonexistent/dir/t.json"], "--trace"),
    (["run", "cntk-1bit-k80", "--plot", "/nonexistent/dir/b.png"], "--plot"),
    (["run", "cntk-1bit-k80", "--plot", "/tmp/dpsim-test-breakdown.nosuchformat"], "--plot"),
])
def test_bad_input_is_one_line_and_exit_2(args, key, dpsim_command):
    p = dpsim_command(*args)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and key in p.stderr and "Traceback" not in p.stderr
