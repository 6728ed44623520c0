"""mpi_impl/README.md's option table lists every option of mpi_impl.train with the default the
parser has (and --help shows the defaults)."""
import argparse
import re
from pathlib import Path

from mpi_impl.train_options import build_parser

README = (Path(__file__).resolve().parents[1] / "mpi_impl" / "README.md").read_text()


def documented():
    """{option: default column} from the README's table rows."""
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^\| `(--[\w-]+)[^`]*` \| ([^|]*) \|", README, re.M)}


def test_every_option_is_in_the_readme_with_its_default():
    table = documented()
    for action in build_parser()._actions:
        name = action.option_strings[0] if action.option_strings else None
        if name in (None, "-h", "--bucket-mb"):            # help; the renamed option is refused
            continue
        assert name in table, f"{name} is missing from mpi_impl/README.md"
        want = "off" if isinstance(action, argparse._StoreTrueAction) else "-" if action.default is None else str(action.default)
        assert table[name] == want, (name, table[name], want)


def test_help_shows_the_defaults():
    text = build_parser().format_help()
    assert "(default: 0.05)" in text and "(default: ring)" in text
