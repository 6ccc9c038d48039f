"""Which lines of a batch hold which anchors, with few whole-batch scans.

A whole-batch ``find`` costs about the same whatever the needle (shorter ones a little more), so a
batch is scanned once per *key*, not once per anchor: keys are lower-case substrings, rare in healthy
logs, that several anchors share. They are looked up in an ASCII-folded lower-case copy of the batch
(each non-ASCII character becomes one ``?`` byte, so offsets still match the text); the anchors
themselves are then checked, case and all, on the few lines a key hit. An anchor no key covers is
its own key. The diagnoser and the engine tracker both scan this way.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Iterable

# Chosen by measuring the bench stream (bench/diagnose_rate.py): each key stands for several anchors
# and hits few healthy lines. Frequent words ("nccl", "cache", "gpu", process names) make bad keys.
KEY_WORDS = ("error", "fail", "exception", "memory", "socket", "mamba", "version", "load", "watchdog",
             "capabilit", "driver", "placement", "gated", "exit", "died", "nvrm", "compatib", "] via ",
             "using network", "context_length", "parser", "detector", "waiting for", "no ", "got ", "illegal",
             "user-specified", "gpu direct rdma", "ddress", "desired", "remote ", "restricted", "cache blocks",
             "state cache")


class KeyIndex:
    """The lines of a batch that hold any of ``anchors`` (case-sensitive substrings)."""

    def __init__(self, anchors: Iterable[str], key_words: tuple[str, ...] = KEY_WORDS) -> None:
        keys: dict[bytes, tuple[str, ...]] = {}
        for a in dict.fromkeys(anchors):
            low = a.lower()
            key = next((k for k in key_words if k in low), low)
            keys[key.encode("ascii", "replace")] = keys.get(key.encode("ascii", "replace"), ()) + (a,)
        self.keys = keys

    def hits(self, lines: list[str], blob: str | None = None) -> dict[int, list[str]]:
        """Line index -> the anchors it holds (in key order), for the lines that hold any."""
        if blob is None:
            blob = "\n".join(lines)
        find = blob.encode("ascii", "replace").lower().find
        hits: dict[int, list[str]] = {}
        starts: list[int] | None = None
        for key, anchors in self.keys.items():
            i = find(key)
            if i < 0:
                continue
            if starts is None:
                starts = [0, *itertools.accumulate(len(s) + 1 for s in lines)]
            while i >= 0:
                idx = bisect_right(starts, i) - 1
                line = lines[idx]
                found = [a for a in anchors if a in line]
                if found:
                    hits.setdefault(idx, []).extend(found)
                i = find(key, starts[idx + 1])
        return hits
