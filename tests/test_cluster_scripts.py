"""course/cluster/: every batch script is valid bash, and every `python -m course ...` and
`python -m mpi_impl.train ...` in it parses with the options the code has today (course's
checks run up to the point where measuring would start)."""
import shlex
import subprocess
from pathlib import Path

import pytest

from course import __main__ as course_cli
from course import calibrate, compare, launch

CLUSTER = Path(__file__).resolve().parents[1] / "course" / "cluster"
SCRIPTS = sorted(CLUSTER.glob("*.sbatch"))
SLURM_VARS = {"$SLURM_JOB_ID": "42", "$sync": "ring"}


def commands(script):
    """The `python -m MODULE args` lines of a script, continuation lines joined, shell
    variables given sample values, split as the shell would."""
    text = script.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if "python -m " in line and not line.lstrip().startswith("#"):
            for var, value in SLURM_VARS.items():
                line = line.replace(var, value)
            words = shlex.split(line[line.index("python -m "):])
            yield words[2], words[3:]


def test_there_are_scripts_for_one_node_several_nodes_and_gpus():
    assert [p.name for p in SCRIPTS] == ["compare_one_node.sbatch", "train_gpus.sbatch", "train_two_nodes.sbatch"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_script_is_valid_bash_with_slurm_directives(script):
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert text.startswith("#!/bin/bash") and "#SBATCH --time=" in text and "set -euo pipefail" in text


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_command_parses(script, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    found = list(commands(script))
    assert found
    for module, args in found:
        if module == "mpi_impl.train":
            from mpi_impl.train_options import build_parser
            build_parser().parse_args(args)              # argparse exits 2 on an unknown option
        elif module == "course":
            def measured(*a, **k):
                raise AssertionError("measuring")
            monkeypatch.setattr(calibrate, "calibrate", measured)
            monkeypatch.setattr(compare, "compare", measured)
            monkeypatch.setattr(compare, "profile_problem", lambda path, net: None)
            Path("profile-42.toml").write_text('name = "written by the calibrate line"\n')
            with pytest.raises(AssertionError, match="measuring"):
                course_cli.main(args)
        else:
            pytest.fail(f"{script.name}: unexpected module {module}")


def test_course_mpiexec_names_the_launcher(monkeypatch):
    monkeypatch.setenv("COURSE_MPIEXEC", "srun --mpi=pmix --cpus-per-task=1")
    assert launch.mpiexec() == ["srun", "--mpi=pmix", "--cpus-per-task=1"]
    monkeypatch.delenv("COURSE_MPIEXEC")
    assert launch.mpiexec()[0].endswith("mpiexec")
