"""Layers point down only: the log catalogue (every piece of log knowledge, NVIDIA's Xid table) is a leaf,
and the probes (pure parsers of station output) sit on it and on the top-level leaves, never on the
diagnosis, the config, the stations or the UI above them. Read from the source, function-level imports
included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parents[2] / "console"
LEAVES = {"console.sanitize", "console.vocabulary", "console.secrets", "console.durations", "console.json_out",
          "console.line_templates"}
ALLOWED = {
    "catalogue": {"console.catalogue"} | LEAVES,
    "probes": {"console.catalogue", "console.probes"} | LEAVES,
}


def imports_of(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("console"):
            base = node.module
            found |= {f"{base}.{a.name}" if base == "console" else base for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("console")}
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_lower_layer_imports_nothing_above_it(package: str):
    allowed = ALLOWED[package]
    bad = {f"{p.relative_to(CONSOLE)}: {m}" for p in (CONSOLE / package).rglob("*.py") for m in imports_of(p)
           if not any(m == a or m.startswith(a + ".") for a in allowed)}
    assert not bad, sorted(bad)
