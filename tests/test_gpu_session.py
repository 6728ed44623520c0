"""course/gpu/session.sh, dry: on this machine's venv and the CPU, its plumbing (the summary,
the archive, a step's exit code and last lines, an unknown step named, the budget) works."""
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "course" / "gpu" / "session.sh"


def run(tmp_path, steps, budget=120):
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "OUT": str(tmp_path), "VENV": sys.prefix,
           "DEVICE": "cpu", "STEPS": steps, "BUDGET": str(budget), "HOME": str(tmp_path)}
    proc = subprocess.run(["bash", str(SESSION)], env=env, capture_output=True, text=True, timeout=120)
    return proc, (tmp_path / "summary.txt").read_text()


def test_a_dry_run_reports_each_step_and_archives_its_log(tmp_path):
    proc, summary = run(tmp_path, "install env nosuchstep")
    assert proc.returncode == 0, proc.stderr
    assert "== install: exit 0" in summary and f"using {sys.prefix} as it is" in summary
    assert "== env: exit 0" in summary and "MPI: MPICH" in summary and "rank 1 of 2" in summary
    assert "== nosuchstep: no such step" in summary
    with tarfile.open(tmp_path / "all.tar.gz") as tar:
        assert {"./install.log", "./env.log"} <= set(tar.getnames())


def test_a_step_the_budget_has_no_room_for_is_skipped(tmp_path):
    _, summary = run(tmp_path, "env", budget=30)
    assert "== env: skipped" in summary and "== done in" in summary


def test_the_steps_it_names_are_the_steps_it_runs():
    text = SESSION.read_text()
    listed = text.split("no such step (steps: ")[1].split(")")[0].split()
    assert text.split('STEPS=${STEPS:-"')[1].split('"')[0].split() == listed
    for step in listed:
        assert f"        {step})" in text and f"#   {step}" in text
