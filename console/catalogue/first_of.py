"""An alternation ``a|b|c`` that finds exactly what the one pattern finds, looking for each part alone.

Python's ``re`` scans for a pattern that starts with a literal (or a small set of first letters)
in C without entering the matcher; an alternation whose parts start with ``\\b``, a lookbehind or
~40 different letters enters the matcher at nearly every position, so the log highlighter's error
pattern cost ~80 ns per character of a long line while its parts alone cost ~40 together. Here each
part is searched on its own (through a literal prefilter where it has one), the leftmost position
any part matches at is where the alternation matches, and the whole pattern, matched at that very
position, picks the alternative as ``|`` does. ``finditer`` yields the same matches as
``re.compile("|".join(parts)).finditer`` (tests/unit/test_highlight_trie.py checks the spans on every
log of the fixtures and the held-out set).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence

import ahocorasick


class Part:
    """One alternative; ``prefilter`` (optional) matches at every position the part matches at and
    is cheaper to search for (a literal core without the ``\\b`` around it); ``gate`` (optional):
    literals one of which every match holds, looked for first (``str.find`` at memchr speed), so that a
    line holding none of them is done with at once (an exception type ends in Error or Exception)."""

    def __init__(self, pattern: str, prefilter: str | None = None, gate: tuple[str, ...] = (),
                 needs: tuple[str, ...] = ()) -> None:
        self.pattern = pattern
        self.rx = re.compile(pattern)
        self.pre = re.compile(prefilter) if prefilter is not None else None
        self.gate = gate
        # literals one of which every match holds (the gate's, else given): a caller that found none of
        # them in a line knows the part has no match there without searching (``FirstOf.needs``)
        self.needs = gate or needs

    def search(self, string: str, pos: int) -> int | None:
        """The leftmost position >= pos the part matches at (None: none)."""
        if self.gate and not any(string.find(w, pos) >= 0 for w in self.gate):
            return None
        if self.pre is None:
            m = self.rx.search(string, pos)
            return None if m is None else m.start()
        while (c := self.pre.search(string, pos)) is not None:
            if self.rx.match(string, c.start()) is not None:
                return c.start()
            pos = c.start() + 1
        return None


class RunPart(Part):
    """A part each of whose matches is a run of word characters and dots (``[\\w.]``), or the start of
    one, beginning where the run begins (the pattern opens with ``(?<![\\w.])``) and holding a ``gate``
    word (an exception type: ``torch.cuda.OutOfMemoryError``). ``re`` would enter the matcher at every
    position of the line (~65 ns a character); here each gate word found leads back to the start of its
    run, the pattern is tried there once, and a run it does not match is passed over whole."""

    _LAST_BREAK = re.compile(r"(?s:.*)[^\w.]")  # matched on a slice: its end is just after the last break
    _RUN = re.compile(r"[\w.]*+")

    def __init__(self, pattern: str, gate: tuple[str, ...]) -> None:
        super().__init__(pattern, gate=gate)

    def search(self, string: str, pos: int) -> int | None:
        found = {w: string.find(w, pos) for w in self.gate}
        while live := [i for i in found.values() if i >= 0]:
            at = min(live)
            start = self._run_start(string, at)
            if start >= pos and self.rx.match(string, start) is not None:
                return start
            end = self._RUN.match(string, at).end()  # (a start before pos: no match starts inside the run)
            for w, i in found.items():
                if 0 <= i < end:
                    found[w] = string.find(w, end)
        return None

    @classmethod
    def _run_start(cls, string: str, at: int) -> int:
        """Where the run of ``[\\w.]`` holding position ``at`` begins: looked for backwards in slices
        that double, so a run costs its own length once."""
        hi, step = at, 64
        while hi > 0:
            lo = max(0, hi - step)
            if (m := cls._LAST_BREAK.match(string, lo, hi)) is not None:
                return m.end()
            hi, step = lo, step * 2
        return 0


class Literals(Part):
    """An alternative that is a set of literals (``pattern`` matches exactly where one of ``words``
    starts: ``markers._literals``), found by an Aho-Corasick walk (pyahocorasick, a few ns a character)
    where ``re`` enters its matcher at nearly every position of the line (~80 ns a character for the
    ~190 fatal anchors' trie)."""

    def __init__(self, pattern: str, words: Iterable[str]) -> None:
        words = tuple(words)
        super().__init__(pattern, needs=tuple(w for w in words if w))
        self._automaton = ahocorasick.Automaton()
        for w in set(words):
            if w:
                self._automaton.add_word(w, len(w))
        self._longest = max(map(len, self._automaton.keys()), default=0)
        self._automaton.make_automaton()

    def search(self, string: str, pos: int) -> int | None:
        """The leftmost start >= pos of a word: the walk yields by end, so it goes on until no word
        ending further on could start before the best start found."""
        best: int | None = None
        longest = self._longest
        for end, n in self._automaton.iter(string, pos):
            if best is not None and end - longest + 1 > best:
                break
            start = end - n + 1
            if best is None or start < best:
                best = start
        return best


class FirstOf:
    """``a|b|...`` as one compiled pattern (``pattern``, ``match`` at a position) searched part by part."""

    def __init__(self, parts: Sequence[Part]) -> None:
        self.parts = tuple(parts)
        self.pattern = "|".join(p.pattern for p in self.parts)
        self.whole = re.compile(self.pattern)
        if self.whole.match("") is not None:  # an empty match would need finditer's own rules
            raise ValueError("FirstOf: a part matches the empty string")

    @property
    def needs(self) -> tuple[str, ...] | None:
        """Literals one of which every match holds (None: a part does not say)."""
        if not all(p.needs for p in self.parts):
            return None
        return tuple(dict.fromkeys(w for p in self.parts for w in p.needs))

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        nexts = [p.search(string, 0) for p in self.parts]
        while True:
            starts = [s for s in nexts if s is not None]
            if not starts:
                return
            at = min(starts)
            m = self.whole.match(string, at)
            if m is None:  # (cannot happen: a part matches here, so the alternation does)
                m = self.whole.search(string, at)
                if m is None:
                    return
            yield m
            end = m.end()
            for i, s in enumerate(nexts):
                if s is not None and s < end:  # overlapped by this match: look again after it
                    nexts[i] = self.parts[i].search(string, end)
