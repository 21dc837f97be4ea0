"""The front door kept current (issue 54): README's chain line is the maintenance chain
(maintenance/ops/chain.py's ``MAINTENANCE_OPS``, then the run's validation), and README's command line
and ``icelake --help`` name every command of the parser, in its order. An op or a command added
without them fails here."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from icelake_assets.cli import build_parser
from icelake_assets.maintenance.ops.chain import MAINTENANCE_OPS

README = Path(__file__).resolve().parents[1] / "README.md"
# After the ops of the chain, every run validates what they did (orchestration/assets/validation.py).
VALIDATION_STEP = "validate"


def _readme_lines() -> list[str]:
    return README.read_text().splitlines()


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    """The parser's subcommands, in the order they were added."""
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


def test_the_readmes_chain_line_is_the_maintenance_chain():
    chains = [line for line in _readme_lines() if " → " in line and line.endswith(f"→ {VALIDATION_STEP}")]
    assert len(chains) == 1, "README shows the chain once, as `op → op → ... → validate`"
    expected = " → ".join([*(o.name for o in MAINTENANCE_OPS), VALIDATION_STEP])
    assert chains[0] == expected, "README's chain line: write it from MAINTENANCE_OPS (and docs/loop.md)"


def test_icelake_help_names_every_command_of_the_parser_in_order():
    parser = build_parser()
    commands = _commands(parser)
    assert {"health", "plan", "orphans", "mcp", "demo"} <= set(commands)
    description = (parser.description or "").rstrip(".")
    assert description.endswith(": " + ", ".join(commands)), (
        "the help's command list: build it from the parser"
    )
    assert description.split(": ", 1)[1] in " ".join(parser.format_help().split())  # shown by --help


def test_the_readmes_command_line_names_every_command_of_the_parser_in_order():
    lines = [
        m
        for line in _readme_lines()
        if (m := re.match(r"\.venv/bin/icelake --help +# the command line: (.+)", line))
    ]
    assert len(lines) == 1, "README has one `.venv/bin/icelake --help  # the command line: ...` line"
    assert lines[0][1].split(", ") == _commands(build_parser()), (
        "README's command line: list the parser's commands"
    )
