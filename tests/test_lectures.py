"""Every lecture notebook runs top to bottom without an error (nbclient, as CI would)."""
import pathlib

import nbformat
import pytest
from nbclient import NotebookClient

LECTURES = sorted((pathlib.Path(__file__).parent.parent / "lectures").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_seven_lectures():
    assert [p.name[:2] for p in LECTURES] == ["01", "02", "03", "04", "05", "06", "07"]


@pytest.mark.parametrize("path", LECTURES, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    # Runs in a scratch directory, so files a notebook writes do not land in the repository.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                   allow_errors=False).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
