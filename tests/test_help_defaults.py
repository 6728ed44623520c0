"""Every command's --help shows every default: mpi_impl.bench and mpi_impl.train (course's
commands: tests/test_course_help.py)."""
import argparse
import re

import pytest


def parsers():
    from mpi_impl import bench, train_options
    return {"mpi_impl.bench": bench.build_parser(), "mpi_impl.train": train_options.build_parser()}


@pytest.mark.parametrize("name", ["mpi_impl.bench", "mpi_impl.train"])
def test_help_shows_every_default(name):
    parser = parsers()[name]
    text = re.sub(r"-\s+", "-", " ".join(parser.format_help().split()))   # argparse wraps at hyphens
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS or action.dest == "help":
            continue
        if action.default in (None, False, argparse.SUPPRESS):
            continue
        assert f"(default: {action.default})" in text, (name, action.dest)
