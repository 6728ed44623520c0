"""dpsim validate: every published case maps to a scenario (nothing skipped: an unstated fact is
an assumption it states), the bus bandwidth it predicts agrees with the closed form, tolerances
are applied as stated, only predicted cases are scored, and the command's table, JSON and exit
codes agree with each other."""
import json

import pytest

from dpsim import analytic, config, hardware, validate

CASES = validate.load_cases()


def expressed(what=None):
    return [c for c in CASES if what in (None, c["what"])]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_case_loads_as_a_scenario(case):
    d = case["dpsim"]
    assert "skip" not in d, "every case is expressed; an unstated fact becomes an assumption"
    sc = config.load_scenario(validate.scenario(case))
    assert d.get("node", "") in ("", *hardware.NODES)
    assert isinstance(d.get("gpu", "k80"), dict) or d.get("gpu", hardware.NODES.get(d.get("node"), {}).get("gpu")) in hardware.GPUS
    assert all(d[k] in hardware.LINKS for k in ("intra", "inter", "host_link") if isinstance(d.get(k), str))
    assert sc.gpus == sc.cluster.nodes * sc.cluster.gpus_per_node > 1
    assert case.get("role", "predicted") in ("predicted", "default")


def test_an_unstated_fact_is_a_stated_assumption():
    """A case whose source leaves its GPUs per node or nodes out says what dpsim assumed."""
    silent = [c for c in CASES if not all(isinstance(c["hardware"][k], int) for k in ("nodes", "gpus_per_node"))]
    assert silent and all(c["dpsim"].get("assumes", "").strip() for c in silent)


def test_names_are_unique_and_kinds_known():
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
    assert {c["what"] for c in expressed()} <= {"allreduce_busbw", "scaling_efficiency", "speedup", "relative_throughput", "memory_per_gpu"}


def test_predicted_cases_are_the_majority_and_at_least_30():
    roles = [c.get("role", "predicted") for c in CASES]
    assert roles.count("predicted") >= 30 and roles.count("predicted") > len(roles) / 2


def test_busbw_scenario_is_one_bucket_of_the_message_without_overlap():
    case = expressed("allreduce_busbw")[0]
    sc = config.load_scenario(validate.scenario(case))
    assert sc.model_spec().params * 4 == case.get("message_bytes", validate.GIB)
    assert (sc.sync.bucket_mib, sc.sync.overlap, sc.sync.strategy) == (0, False, "ring")


single_node = [c for c in expressed("allreduce_busbw") if config.load_scenario(validate.scenario(c)).cluster.nodes == 1
               and str(c["dpsim"].get("intra", "")).startswith("nvswitch") and c["dpsim"].get("strategy", "ring") == "ring"]


@pytest.mark.parametrize("case", single_node, ids=[c["name"] for c in single_node])
def test_single_node_busbw_is_the_ring_closed_form(case):
    """Nothing contends on a switch inside one node: the ring's alpha-beta-gamma cost is exact,
    at NVLink's achievable rate, its reduction pipelined in NCCL's slices, plus the call's
    fixed cost (sync.call_overhead_us)."""
    assert case["dpsim"]["intra"].startswith("nvswitch")
    sc = config.load_scenario(validate.scenario(case))
    n, m, link = sc.gpus, case.get("message_bytes", validate.GIB), sc.link_spec("intra")
    achievable = link.bandwidth_gbs * 1e9 * hardware.EFFICIENCY["nvswitch"][0]
    seconds = analytic.ring(n, m, 2 * link.latency_us * 1e-6, 1 / achievable,      # gpu > nvswitch > gpu: two hops
                            3 / (sc.gpu_spec().mem_bw_gbs * 1e9), segment=validate.NCCL_SEGMENT_MIB * 2 ** 20)
    seconds += sc.sync.call_overhead_us * 1e-6
    assert validate.predict(case) == pytest.approx(2 * (n - 1) / n * m / seconds / 1e9, rel=0.01)


def test_single_node_cases_exist_for_the_oracle():
    assert len(single_node) >= 2


def test_tolerances_as_stated():
    busbw = expressed("allreduce_busbw")[0]
    p = validate.predict(busbw)
    assert validate.compare({**busbw, "value": p / 1.24}).within
    assert validate.compare({**busbw, "value": p / 0.76}).within
    assert not validate.compare({**busbw, "value": p / 1.26}).within
    row = validate.compare({**busbw, "value": p / 2})
    assert row.off == pytest.approx(2) and not row.within
    eff = min(expressed("scaling_efficiency"), key=lambda c: config.load_scenario(validate.scenario(c)).gpus)
    e = validate.predict(eff)
    assert validate.compare({**eff, "value": e + 9.9}).within
    assert not validate.compare({**eff, "value": e - 10.1}).within
    assert validate.compare({**eff, "value": e - 10.1}).off == pytest.approx(10.1)


def test_a_case_that_set_a_default_is_shown_and_not_scored():
    case = next(c for c in CASES if c.get("role") == "default")
    row = validate.compare(case)
    assert row.role == "default" and row.predicted is not None
    scored = validate.compare({**case, "role": "predicted", "value": row.predicted * 3})
    assert validate.summary([row]).startswith("0 of 0 predicted cases")
    assert validate.summary([scored]).startswith("0 of 1 predicted cases")


@pytest.fixture(scope="module")
def report():
    from dpsim_helpers import run_dpsim
    code, out, err = run_dpsim("validate", "--json")
    assert code == 0, err
    return json.loads(out)


def test_json_has_one_row_per_case_and_the_summary_counts_them(report):
    rows = report["cases"]
    assert [r["name"] for r in rows] == [c["name"] for c in CASES]
    assert all(r["predicted"] is not None for r in rows)
    scored = [r for r in rows if r["role"] == "predicted"]
    others = [r for r in rows if r["role"] != "predicted"]
    assert report["summary"] == (f"{sum(r['within'] for r in scored)} of {len(scored)} predicted cases within "
                                 f"tolerance ({len(others)} more set a default and are not scored: "
                                 f"{sum(r['within'] for r in others)} within)")


def test_every_miss_says_why_and_no_hit_carries_a_reason(report):
    for r in report["cases"]:
        if r["within"] is False:
            assert r["reason"], f"{r['name']} is outside the tolerance: add why_off to its [case.dpsim]"
        if r["within"]:
            assert r["reason"] == ""


def test_text_table_agrees_with_json(report, dpsim_command):
    p = dpsim_command("validate")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    table = lines[1:1 + len(CASES)]
    assert [line.split()[0] for line in table] == [c["name"] for c in CASES]
    assert report["summary"] in lines
    assert sum(" yes " in f"{line} " for line in table) == sum(bool(r["within"]) for r in report["cases"])


def test_case_selects_rows_and_verbose_lists_sources(dpsim_cli):
    names = [CASES[1]["name"], CASES[0]["name"]]
    code, out, err = dpsim_cli("validate", "--case", *names, "--verbose")
    assert code == 0, err
    assert [line.split()[0] for line in out.splitlines()[1:3]] == [c["name"] for c in CASES if c["name"] in names]
    for name in names:
        source = next(c["source"] for c in CASES if c["name"] == name)
        assert f"{name}: {source}" in out


def test_a_bad_case_name_exits_2_with_one_line_naming_the_nearest(dpsim_command):
    p = dpsim_command("validate", "--case", "no_such_case")
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert "no_such_case" in p.stderr and "first column of dpsim validate" in p.stderr
    typo = dpsim_command("validate", "--case", "p4d_4node_efa_1gb")
    assert typo.returncode == 2 and "nearest: " in typo.stderr and "p4d_4node_efa_1gib" in typo.stderr
    assert len(typo.stderr) < 300
