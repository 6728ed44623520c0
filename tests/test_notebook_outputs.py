"""The lecture notebooks are stored executed; what they show must hold on any machine: no path of
the machine that executed them (a home folder, a temporary folder, a virtualenv), which a
student would copy and which would not exist on theirs."""
import json
import re
from pathlib import Path

import pytest

LECTURES = sorted((Path(__file__).resolve().parents[1] / "lectures").glob("[0-9][0-9]_*.ipynb"))
MACHINE_PATH = re.compile(r"(?<![\w.])(/(tmp|home|root|work|Users|usr|opt|var|private)/\S*"
                          r"|[A-Za-z]:\\\S+|\S*site-packages\S*|\S*\.venv\S*)")


def output_texts(nb):
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            for text in (out.get("text"), data.get("text/plain"), data.get("text/html"), out.get("traceback")):
                if text:
                    yield i, "".join(text) if isinstance(text, list) else text


def machine_paths(nb):
    return [(i, m.group(0)) for i, text in output_texts(nb) for m in MACHINE_PATH.finditer(text)]


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_stored_outputs_carry_no_machine_path(path):
    assert machine_paths(json.loads(path.read_text())) == []


@pytest.mark.parametrize("text", ["working in /tmp/lecture6-k21v4ch5", "mpiexec: /work/main/.venv/bin/mpiexec",
                                  "see /home/ada/x.json", r"C:\Users\ada\x.json", "in .venv/bin/python"])
def test_a_machine_path_is_found(text):
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "text": [text]}]}]}
    assert machine_paths(nb)


@pytest.mark.parametrize("text", ["12.5 ms / 4 GPUs", "lecture6-output/compare.json", "ui.perfetto.dev", "1/2 speed"])
def test_ordinary_output_is_not_a_path(text):
    nb = {"cells": [{"cell_type": "code", "outputs": [{"output_type": "stream", "text": [text]}]}]}
    assert machine_paths(nb) == []
