"""Every image a Markdown doc of the repository shows is in the repository."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [p for p in ROOT.rglob("*.md") if ".venv" not in p.parts and ".git" not in p.parts]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_images_shown_exist(doc):
    for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", doc.read_text()):
        if not target.startswith(("http://", "https://")):
            assert (doc.parent / target).is_file(), f"{doc.relative_to(ROOT)} shows {target}, not in the repository"
