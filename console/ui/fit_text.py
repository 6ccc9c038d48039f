"""Text that must keep its meaning in whatever width it gets.

- ``error_words``: the words of a fatal log line that name the error (process, rank, time and
  source prefixes removed), so a narrow header shows "Watchdog caught collective operation
  timeout", never the tail of the line.
- ``Clipped``: a Rich renderable that wraps to the width it is given and keeps at most N lines,
  the last cut with "…" (the START of the text is what stays).
- ``fit_pairs``: label/value rows whose labels shorten (``Model`` -> ``Mdl``) before they would be
  cut into ``M…``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from console.diagnosis.text import message_of
from console.sanitize import one_line
from console.ui.shown_key import shown_key, text_key

# glog / c10 prefixes the diagnosis keeps (it matches on them): "[E1201 11:07:44.131931664 ProcessGroupNCCL.cpp:632] "
_GLOG = re.compile(r"^\[[EWIF]\d{3,4}(?: [\d:.]++)? [\w.]++:\d++\]\s*+")


def error_words(line: str, limit: int = 400) -> str:
    """The message of a fatal line: known log prefixes stripped, one line, the start kept."""
    text = message_of(one_line(line, 4 * limit))
    text = _GLOG.sub("", text, count=1)
    return one_line(text, limit)


class Clipped:
    """``text`` wrapped to the width at render time, at most ``lines`` lines; when more would be
    needed the last line ends in "…" (the start of the text always shows)."""

    def __init__(self, text: Text | str, lines: int = 2, style: str = "") -> None:
        self.text = text if isinstance(text, Text) else Text(text, style=style)
        self.lines = max(1, lines)

    def shown_key(self) -> Hashable:
        return ("clipped", text_key(self.text), self.lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(1, options.max_width)
        wrapped = self.text.wrap(console, width, overflow="fold")
        shown = list(wrapped)[: self.lines]
        if len(wrapped) > self.lines:
            last = shown[-1]
            last.rstrip()
            if last.cell_len >= width:
                last.truncate(width - 1)
            last.append("…", style=self.text.style)
        yield from shown


def fill_width(total: int, fixed: list[int], minimum: int = 20, padding: int = 1, scrollbar: int = 2) -> int:
    """The width left for a table's last column: ``total`` minus the fixed columns, each with its
    cell padding on both sides, and a vertical scrollbar."""
    used = sum(w + 2 * padding for w in fixed) + 2 * padding + scrollbar
    return max(minimum, total - used)


def pack(pieces: list[Text], width: int, sep: str = "  ", breaks: frozenset[int] = frozenset()) -> list[Text]:
    """Whole pieces ("engine serving (worker)", "KV 23.5 %") packed greedily into lines of
    ``width``: a piece is never split across lines (a piece wider than a line gets a line of its
    own, cut with "…"). ``breaks``: indexes of pieces that always start a line."""
    lines: list[Text] = []
    line = Text()
    for i, piece in enumerate(pieces):
        if line.cell_len and (i in breaks or line.cell_len + len(sep) + piece.cell_len > width):
            lines.append(line)
            line = Text()
        if line.cell_len:
            line.append(sep)
        line.append_text(piece)
    if line.cell_len:
        lines.append(line)
    for ln in lines:
        ln.no_wrap, ln.overflow = True, "ellipsis"
        ln.truncate(width, overflow="ellipsis")
    return lines


class Packed:
    """Pieces packed into lines at the width the renderable is given (see ``pack``), then the
    ``after`` renderables (a clipped fatal line, the start-up timeline)."""

    def __init__(self, pieces: list[Text], sep: str = "  ", after: tuple = ()) -> None:
        self.pieces, self.sep, self.after = pieces, sep, after

    @property
    def joined(self) -> Text:
        """The pieces on one line (what a test or a screen reader reads; spans keep their styles)."""
        return Text(self.sep).join(self.pieces)

    def shown_key(self) -> Hashable | None:
        """None when an ``after`` renderable has no key (it is drawn each time then)."""
        after = tuple(shown_key(a) for a in self.after)
        if any(k is None for k in after):
            return None
        return ("packed", tuple(text_key(p) for p in self.pieces), self.sep, after)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from pack(self.pieces, max(1, options.max_width), self.sep)
        yield from self.after
