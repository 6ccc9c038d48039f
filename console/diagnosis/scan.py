"""Which lines of a batch hold which anchors, in one pass over the batch.

Keys are lower-case substrings, rare in healthy logs, that several anchors share. The batch is
folded to lower-case ASCII (each non-ASCII character becomes one ``?``, so offsets still match the
text) and every key is found in a single Aho-Corasick pass (pyahocorasick): the cost is one walk of
the batch whatever the number of keys, where a ``find`` per key walked it once per key (54 walks).
The anchors themselves are then checked, case and all, on the few lines a key hit. An anchor no key
covers is its own key. ``console.diagnosis.classify`` holds the one index every consumer shares.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections.abc import Iterable

import ahocorasick

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
        keys: dict[str, tuple[str, ...]] = {}
        for a in dict.fromkeys(anchors):
            low = a.lower()
            key = next((k for k in key_words if k in low), low).encode("ascii", "replace").decode("ascii")
            keys[key] = keys.get(key, ()) + (a,)
        self.keys = keys
        self._groups = list(keys.values())  # key number -> its anchors
        self._automaton = ahocorasick.Automaton()
        for n, key in enumerate(keys):
            self._automaton.add_word(key, n)
        self._automaton.make_automaton()

    def hits(self, lines: list[str], blob: str | None = None) -> dict[int, list[str]]:
        """Line index -> the anchors it holds (in key order), for the lines that hold any.
        ``blob``: ``"\\n".join(lines)`` when the caller has it already."""
        if blob is None:
            blob = "\n".join(lines)
        folded = blob.encode("ascii", "replace").lower().decode("ascii")
        keyed: dict[int, set[int]] = {}  # line -> the numbers of the keys found in it
        starts: list[int] | None = None
        for end, n in self._automaton.iter(folded):
            if starts is None:
                starts = [0, *itertools.accumulate(len(s) + 1 for s in lines)]
            keyed.setdefault(bisect_right(starts, end) - 1, set()).add(n)
        hits: dict[int, list[str]] = {}
        for idx, numbers in keyed.items():
            line = lines[idx]
            found = [a for n in sorted(numbers) for a in self._groups[n] if a in line]
            if found:
                hits[idx] = found
        return hits
