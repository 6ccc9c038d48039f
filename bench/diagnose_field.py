"""Diagnosis on the field corpus: public excerpts across stacks, split once into a tune part and a held-out part.

``bench/field/`` holds excerpts from public reports of vLLM, SGLang, TensorRT-LLM, llama.cpp, Ray, PyTorch
distributed, NCCL / nccl-tests, GPU driver and kernel logs and container runtimes (file format as in
``tests/fixtures/logs``: ``<expected id>__<source>.log``, ``healthy-<stack>__*`` must raise no error or warning,
``outside__*`` is a failure no catalogue id names: it must be ``unrecognised-error`` whose headline quotes the
line that names the error, given by the file's ``# headline:`` line, not a wrapper).

The split is fixed by the source address, not chosen per file: an excerpt is in the tune part when the last hex
digit of sha1(its ``# source:`` URL) is even, else held out. It was decided before any tuning; the catalogue may be
tuned on the tune part only, and the held-out number is the one that says whether the diagnosis generalizes.

The held-out part was read while the catalogue was tuned, so it is no clean figure. ``bench/field_fresh/`` (same
format) is a later set collected after that tuning, labelled before the diagnosis ever ran on it and not tuned
on: all of it is held out (``--part fresh``). Its misses are the next round's material; once the catalogue is
tuned on them, it too stops being a clean figure and a newer set is needed.

    python bench/diagnose_field.py [--part tune|heldout|fresh|all] [--verbose]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import defaultdict
from pathlib import Path

from console.diagnosis import has_problems

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
from log_excerpts import diagnose, expected, headlines  # noqa: E402  (the corpus's own reader)

FIELD = Path(__file__).resolve().parent / "field"
FRESH = Path(__file__).resolve().parent / "field_fresh"
PARTS = ("tune", "heldout")


def part_of(path: Path) -> str:
    """'tune' or 'heldout', from the excerpt's source URL (fixed before tuning)."""
    url = path.read_text(encoding="utf-8").splitlines()[0].split(" ", 2)[2].strip()
    return "tune" if int(hashlib.sha1(url.encode()).hexdigest()[-1], 16) % 2 == 0 else "heldout"


def score(paths: list[Path], verbose: bool = False) -> dict[str, int]:
    """Counts for one part: kinds right first, healthy false alarms, outside failures named (never silent)."""
    out = defaultdict(int)
    for path in paths:
        kind = expected(path)
        findings = diagnose(path)
        got = [f"{f.id}:{f.severity}" for f in findings]
        if kind.startswith("healthy"):
            out["healthy"] += 1
            bad = has_problems(findings)
            out["false_alarms"] += bad
            verdict = "FALSE ALARM" if bad else "ok"
        elif kind == "outside":
            out["outside"] += 1
            top = findings[0] if findings else None
            want = headlines(path)
            quoted = top is not None and top.id == "unrecognised-error" and bool(want) \
                and any(w in top.cause for w in want)
            out["outside_named"] += quoted
            out["silent"] += not findings
            verdict = "ok" if quoted else ("SILENT" if not findings else "NOT NAMED")
        else:
            out["known"] += 1
            first = bool(findings) and findings[0].id == kind
            out["known_first"] += first
            verdict = "ok" if first else "WRONG"
        if verbose:
            head = f" | {findings[0].evidence[0].text[:90]}" if findings and findings[0].evidence else ""
            print(f"{verdict:12} {path.name:60} {' '.join(got[:3])}{head}")
    return dict(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=(*PARTS, "fresh", "all"), default="all")
    ap.add_argument("--verbose", action="store_true", help="one line per excerpt")
    args = ap.parse_args()
    files = sorted(FIELD.glob("*.log"))
    for part in (*PARTS, "fresh") if args.part == "all" else (args.part,):
        paths = sorted(FRESH.glob("*.log")) if part == "fresh" else [p for p in files if part_of(p) == part]
        if args.verbose:
            print(f"--- {part}")
        s = score(paths, args.verbose)
        g = s.get
        print(f"{part:8} {len(paths)} excerpts: known kinds first {g('known_first', 0)}/{g('known', 0)}, "
              f"healthy with a false alarm {g('false_alarms', 0)}/{g('healthy', 0)}, "
              f"outside named by their line {g('outside_named', 0)}/{g('outside', 0)} (silent {g('silent', 0)})")


if __name__ == "__main__":
    main()
