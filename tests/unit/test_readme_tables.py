"""The README is the front door: its commands table names every subcommand the parser has, and its
fault table every fault the simulator knows, so a new command or fault cannot go unsaid there."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from console.cli import build_parser
from console.sim.world import KNOWN_FAULTS

README = Path(__file__).resolve().parents[2] / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def _first_cells(section: str) -> set[str]:
    return set(re.findall(r"^\| `([^`]+)` \|", section, re.M))


def test_the_commands_table_has_every_subcommand_and_only_those():
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    cells = _first_cells(_section("Commands"))
    assert cells == set(subs.choices) | {"dgx-console"}


def test_the_fault_table_has_every_simulated_fault_and_only_those():
    assert _first_cells(_section("Rehearse a failure")) == set(KNOWN_FAULTS)
