"""Read a public-report log excerpt (the corpus and held-out file format) and diagnose it.

The first line is ``# source: <public report>``; ``# note:`` lines say what the excerpt is;
``# station: NAME`` switches the source, so one file can hold both stations' logs; ``# headline:`` says what the
headline of an error no entry explains must quote. Used by
tests/unit/test_diagnose_corpus.py and bench/diagnose_heldout.py; it needs only ``console.diagnosis``'s
public API, so the bench can measure another checkout with it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from console.diagnosis import Diagnoser


def load(path: Path) -> dict[str, list[str]]:
    """Lines per source (the file name, or each ``# station:``), metadata lines dropped."""
    text = path.read_text(encoding="utf-8").splitlines()
    assert text[0].startswith("# source: https://github.com/"), f"{path.name} lacks its source link"
    out: dict[str, list[str]] = defaultdict(list)
    current = path.name
    for line in text:
        if line.startswith("# station: "):
            current = line.split(":", 1)[1].strip()
        elif not line.startswith(("# source:", "# note:", "# headline:")):
            out[current].append(line)
    return dict(out)


def diagnose(path: Path):
    """The ranked findings of one excerpt, every source fed, then finished."""
    d = Diagnoser()
    for name, lines in load(path).items():
        d.feed(name, lines)
    d.finish()
    return d.ranked()


def headlines(path: Path) -> list[str]:
    """``# headline: A | B``: the words the top finding's headline must quote (any one of them) -- the line
    that names the error, not a wrapper around it."""
    for line in path.read_text(encoding="utf-8").splitlines()[:6]:
        if line.startswith("# headline:"):
            return [h.strip() for h in line.split(":", 1)[1].split(" | ")]
    return []


def expected(path: Path) -> str:
    """The id a file name promises: ``<expected id>__<source>.log``."""
    return path.name.split("__", 1)[0]
