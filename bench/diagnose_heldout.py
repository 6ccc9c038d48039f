"""How well diagnosis generalizes: public-report excerpts the test corpus never saw.

``bench/heldout/`` holds excerpts gathered for this measurement and kept out of
``tests/fixtures/logs`` (nothing is tuned on them). File names follow the corpus convention,
``<expected id>__<source>.log``, plus two kinds of their own: ``healthy-*`` (must raise no error or
warning) and ``outside__*`` (a failure no catalogue id names: it must not be silent). Lines
``# station: NAME`` switch the source, so one file can hold both stations' logs.

Prints, for the ``console`` package on the import path:
  known kinds whose root cause comes first (every excerpt of the kind), excerpts first,
  healthy logs with a false alarm, outside-the-catalogue failures with no finding at all.

    python bench/diagnose_heldout.py [--verbose]
    PYTHONPATH=/tmp/main-snapshot python bench/diagnose_heldout.py   # the same on another checkout
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

from console.diagnosis import has_problems

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit"))
from log_excerpts import diagnose, expected  # noqa: E402  (the corpus's own reader)

HELDOUT = Path(__file__).resolve().parent / "heldout"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true", help="one line per excerpt")
    args = ap.parse_args()
    kinds: dict[str, list[bool]] = defaultdict(list)
    healthy_alarms, healthy_total, silent, outside_total = 0, 0, 0, 0
    for path in sorted(HELDOUT.glob("*.log")):
        kind = expected(path)
        findings = diagnose(path)
        got = [f"{f.id}:{f.severity}" for f in findings]
        if kind.startswith("healthy"):
            healthy_total += 1
            bad = has_problems(findings)
            healthy_alarms += bad
            verdict = "FALSE ALARM" if bad else "ok"
        elif kind == "outside":
            outside_total += 1
            quiet = not findings
            silent += quiet
            verdict = "SILENT" if quiet else "ok"
        else:
            first = bool(findings) and findings[0].id == kind
            kinds[kind].append(first)
            verdict = "ok" if first else "WRONG"
        if args.verbose:
            print(f"{verdict:12} {path.name:60} {' '.join(got[:4])}")
    kinds_first = sum(all(v) for v in kinds.values())
    excerpts = sum(len(v) for v in kinds.values())
    excerpts_first = sum(sum(v) for v in kinds.values())
    print(f"known kinds with the root cause first: {kinds_first} of {len(kinds)} "
          f"({excerpts_first} of {excerpts} excerpts)")
    print(f"healthy logs with a false alarm: {healthy_alarms} of {healthy_total}")
    print(f"failures outside the catalogue with no finding at all: {silent} of {outside_total}")


if __name__ == "__main__":
    main()
