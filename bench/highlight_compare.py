"""The log highlighter's cost per character: the literal alternations as they were (every word, longest
first) against the trie-shaped patterns (``markers._literals``), interleaved in one process, on the
line ``bench/diagnose_rate.py`` uses (a long hostile line). "trie" is the highlighter as it is: trie-shaped
literals, and the warning and error alternations searched part by part (``catalogue/first_of.py``). Same spans: tests/unit/test_highlight_trie.py.

    python bench/highlight_compare.py [--runs 3]
"""

from __future__ import annotations

import argparse
import re
import time


def _alternation(words) -> str:
    return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))


def _old() -> list:
    from console.catalogue import markers as m

    old = list(m.HIGHLIGHTS)
    old[2] = (re.compile(_alternation((*m.READY_MARKERS.values(), "Init COMPLETE"))), "ready")
    old[3] = (re.compile(old[3][0].pattern), "warning")  # one compiled alternation, not searched part by part
    old[4] = (re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b|" + re.escape(m.TRACEBACK) + r"|" + m.EXCEPTION_TYPE + r"|"
                         r"\[E\d{3,4}[ \]]|" + _alternation(m.FATAL_ANCHORS + ("NCCL WARN", "timed out", "failed"))),
              "error")
    return old


def per_char(highlights, n: int) -> float:
    """Best of 3 over the long hostile line of ``n`` characters, in ns per character (no console import
    here: bench/diagnose_rate.py times an older tree's highlighter with it)."""
    line = "(APIServer pid=1) ERROR " + "x." * (n // 4) + "A" * (n // 2) + " torch.OutOfMemoryError"
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for rx, _kind in highlights:
            for _m in rx.finditer(line):
                pass
        best = min(best, time.perf_counter() - t0)
    return best / len(line) * 1e9


def main() -> None:
    from console.catalogue import markers as m

    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    old = _old()
    for _ in range(args.runs):
        for name, hl in (("alternation", old), ("trie", m.HIGHLIGHTS)):
            with open("/proc/loadavg") as f:
                load = " ".join(f.read().split()[:3])
            print(f"{name:12} {per_char(hl, 20_000):5.0f} ns/char at 20k chars, {per_char(hl, 320_000):5.0f} at 320k"
                  f"  (load {load})", flush=True)


if __name__ == "__main__":
    main()
