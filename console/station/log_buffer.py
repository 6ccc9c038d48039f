"""A station's container log as the operator reads it: the last ``max_lines`` lines, each made fit
for a terminal once on the way in, numbered over everything the station printed, with the console's
own marker lines known by their type.

Pure (no Textual, no I/O) and bounded: the station's state can own one and any number of views read
it (the dashboard's log view keeps only the row numbers it shows). Lines are stored in a list with a
start offset, compacted once an eighth of ``max_lines`` is stale, so reading a line by its number is
O(1) and pruning is amortized O(1) per line whatever ``max_lines`` is (up to ``ui.log_lines`` =
1,000,000), holding at most 1/8 more lines than kept.

Display only: every line is first shortened to ``DISPLAY_MAX_CHARS`` with a visible marker
(``sanitize.clip``), then sanitized, so no single line (vLLM prints its whole argument list, request
logs carry whole prompts) costs more than a short one. The whole line still goes to the diagnosis (up
to the monitor's cap) from the station service, not from here."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from console.sanitize import clean, clip

DISPLAY_MAX_CHARS = 4096


class LogMarker(str):
    """A line the console writes into a station's log view itself (where a stream was interrupted),
    not one the container printed: shown styled, numbered like the others, never in ``--json``."""


def display_line(line: str) -> str:
    """What a log view shows of a log line: clipped first (bounded work whatever the line), then
    sanitized (no escape or control sequence reaches the terminal; tabs stay); a line break inside
    it (which would make one line two rows) is shown as ``␊``."""
    if line.isascii() and line.isprintable() and len(line) <= DISPLAY_MAX_CHARS:
        return str(line)  # nearly every log line: nothing to clip or clean (and no LogMarker type kept)
    return clean(clip(line, DISPLAY_MAX_CHARS)).replace("\n", "␊")  # clean shows U+2028/2029 as ␊ too


def _all_shown_as_they_are(lines: list[str]) -> bool:
    """Whether ``display_line`` returns every one of ``lines`` unchanged (printable ASCII, none too
    long), found over the joined batch (``isascii``/``isprintable`` hold for a text when they hold for
    each of its pieces) instead of three calls a line."""
    if not lines:
        return True
    joined = "".join(lines)
    # printable ASCII is ASCII without a control character: 33 memchr-speed ``in`` tests, where
    # ``isprintable`` looks every character up in the Unicode tables (~1 us a line of 160, ~10x)
    return (joined.isascii() and not any(c in joined for c in _ASCII_CONTROLS)
            and max(map(len, lines)) <= DISPLAY_MAX_CHARS)


_ASCII_CONTROLS = tuple(map(chr, (*range(0x20), 0x7F)))


class LogBuffer:
    """The last ``max_lines`` lines of one station's log, numbered from 1 over everything added.

    ``total`` is the newest line's number; ``first`` the oldest kept one's (``total + 1`` while
    empty). Index ``i`` (0 = the oldest kept) is line number ``first + i``."""

    def __init__(self, max_lines: int = 5000) -> None:
        if max_lines < 1:
            raise ValueError("max_lines must be >= 1")
        self.max_lines = max_lines
        self.total = 0
        self._lines: list[str] = []
        self._start = 0  # self._lines[:self._start] are pruned, dropped at the next compaction
        self._markers: set[int] = set()  # numbers of the console's own marker lines still kept

    @property
    def first(self) -> int:
        """The number of the oldest line kept (``total + 1`` when none is)."""
        return self.total - len(self) + 1

    def __len__(self) -> int:
        return len(self._lines) - self._start

    def __iter__(self) -> Iterator[str]:
        lines = self._lines
        return (lines[i] for i in range(self._start, len(lines)))

    def __getitem__(self, index: int) -> str:
        """The kept line at ``index`` (0: the oldest; negative from the newest)."""
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self._lines[self._start + index]

    def line(self, number: int) -> str:
        """Line ``number`` (1-based over everything added); IndexError once pruned or not yet added."""
        if not self.first <= number <= self.total:
            raise IndexError(number)
        return self._lines[self._start + number - self.first]

    def has(self, number: int) -> bool:
        """Whether line ``number`` is still kept."""
        return self.first <= number <= self.total

    def is_marker(self, number: int) -> bool:
        """Whether line ``number`` is one the console wrote (a ``LogMarker``), not the container."""
        return number in self._markers

    def since(self, number: int) -> tuple[int, list[str]]:
        """The kept lines numbered after ``number``: (the first one's number, the lines)."""
        start = max(number + 1, self.first)
        offset = self._start + start - self.first
        return start, self._lines[offset:]

    def extend(self, lines: Iterable[str]) -> int:
        """Add lines (each made fit to show: ``display_line``), prune to ``max_lines``; returns how
        many were added. A ``LogMarker`` stays known as one."""
        lines = lines if isinstance(lines, list) else list(lines)
        store = self._lines
        kinds = set(map(type, lines))
        if kinds <= {str} and _all_shown_as_they_are(lines):  # a whole batch in C: display_line keeps each
            store.extend(lines)
        else:
            store.extend(map(display_line, lines))
        if not kinds <= {str}:
            for i, raw in enumerate(lines):
                if type(raw) is LogMarker:
                    self._markers.add(self.total + 1 + i)
        added = len(lines)
        self.total += added
        excess = len(self) - self.max_lines
        if excess > 0:
            self._start += excess
            if self._markers:
                first = self.first
                self._markers = {n for n in self._markers if n >= first}
            if self._start > self.max_lines // 8:  # compact: at most 1/8 stale lines held, O(8) a line
                del store[:self._start]
                self._start = 0
        return added
