"""Which lines of a batch hold which anchors, in one pass over the batch.

Keys are lower-case substrings, rare in healthy logs, that several anchors share. The batch is
folded to lower-case ASCII (each non-ASCII character becomes one ``?``, so offsets still match the
text) and every key is found in a single Aho-Corasick pass (pyahocorasick): the cost is one walk of
the batch whatever the number of keys, where a ``find`` per key walked it once per key (54 walks).
The anchors themselves are then checked, case and all, on the few lines a key hit. An anchor no key
covers is its own key. ``console.catalogue.classify`` holds the one index every consumer shares.

The walk is made on each line's template and kept per template (``console.line_templates``): a flood
of one template costs a look-up a line. A key is looked for without its digits, so a template holds
every key its lines hold; it may hold one a line does not, which costs a look at that line, since the
anchors are checked on the line itself.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Set

import ahocorasick

from console.line_templates import NO_DIGITS, TemplateMemo, templates

# Chosen by measuring the bench stream (bench/diagnose_rate.py): each key stands for several anchors
# and hits few healthy lines. Frequent words ("nccl", "cache", "gpu", process names) make bad keys.
KEY_WORDS = ("error", "fail", "exception", "memory", "socket", "mamba", "version", "load", "watchdog",
             "capabilit", "driver", "placement", "gated", "exit", "died", "nvrm", "compatib", "] via ",
             "using network", "context_length", "parser", "detector", "waiting for", "no ", "got ", "illegal",
             "user-specified", "gpu direct rdma", "ddress", "desired", "remote ", "restricted", "cache blocks",
             "state cache")
# The same for the start-up markers (console.catalogue.classify indexes them with the diagnosis anchors):
# substrings of the markers that start with a letter some key above starts with, so the walk (whose cost
# grows with the keys' first letters) stays as fast as with the diagnosis keys alone.
MARKER_KEY_WORDS = ("captur", "startup", "fired up", "dless", "cache size", "cache is alloc", "runtime started",
                    "server_args", "launching", "shutting down", "init complete", "init torch", "starting vllm",
                    "via net/")

_NONE: frozenset[int] = frozenset()


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
        numbers: dict[str, tuple[int, ...]] = {}  # a key without its digits -> the keys it stands for
        for n, key in enumerate(keys):
            bare = key.translate(NO_DIGITS)
            if not bare:
                raise ValueError(f"a key of digits alone cannot be looked for in a template: {key!r}")
            numbers[bare] = numbers.get(bare, ()) + (n,)
        self._automaton = ahocorasick.Automaton()
        for bare, ns in numbers.items():
            self._automaton.add_word(bare, ns)
        self._automaton.make_automaton()
        self.memo = TemplateMemo(self._walk)  # template -> the numbers of the keys it holds

    def scan(self, blob: str) -> dict[int, Set[int]]:
        """Line index (in ``blob``, lines joined by newlines) -> the numbers of the keys its template
        holds, for the lines that hold any: a look-up per line, a walk only for the templates not seen."""
        got = self.memo(templates(blob))
        return {i: got[i] for i in itertools.compress(range(len(got)), got)}

    def _walk(self, new: list[str]) -> list[frozenset[int]]:
        """The one walk over templates not seen yet: the keys each holds. Matches come in text order,
        so the line is counted on from the previous match."""
        folded = "\n".join(new)
        found: dict[int, set[int]] = {}
        count, get = folded.count, found.get
        line = pos = 0
        for end, ns in self._automaton.iter(folded):
            line += count("\n", pos, end)
            pos = end
            have = get(line)
            if have is None:
                found[line] = set(ns)
            else:
                have.update(ns)
        return [frozenset(found[i]) if i in found else _NONE for i in range(len(new))]

    def groups(self, wanted: Collection[str] | None = None) -> list[tuple[str, ...]]:
        """Key number -> its anchors (those in ``wanted``, when given), for ``resolve``."""
        return [g if wanted is None else tuple(a for a in g if a in wanted) for g in self._groups]

    @staticmethod
    def resolve(keyed: dict[int, Set[int]], lines: list[str], groups: list[tuple[str, ...]]) -> dict[int, list[str]]:
        """Line index -> the anchors of ``groups`` it holds (in key order), for the lines that hold any:
        the anchors themselves checked, case and all, on the lines a key hit (a line whose keys have no
        anchor in ``groups`` is skipped without looking at it)."""
        useful = frozenset(n for n, g in enumerate(groups) if g)
        hits: dict[int, list[str]] = {}
        for idx, numbers in keyed.items():
            if useful.isdisjoint(numbers):
                continue
            line = lines[idx]
            found = [a for n in (sorted(numbers) if len(numbers) > 1 else numbers) for a in groups[n] if a in line]
            if found:
                hits[idx] = found
        return hits

    def hits(self, lines: list[str], blob: str | None = None) -> dict[int, list[str]]:
        """Line index -> the anchors it holds (in key order), for the lines that hold any.
        ``blob``: ``"\\n".join(lines)`` when the caller has it already."""
        return self.resolve(self.scan("\n".join(lines) if blob is None else blob), lines, self._groups)


def line_starts(lines: list[str]) -> list[int]:
    """The offset of each line in ``"\\n".join(lines)``, and one past the end (C-level: no Python per line)."""
    return list(itertools.accumulate(map((1).__add__, map(len, lines)), initial=0))
