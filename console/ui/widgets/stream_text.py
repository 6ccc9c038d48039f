"""A text widget that grows by appending, at a cost proportional to what is appended.

A ``Static`` re-renders its whole text on every update, so a streamed reply of n tokens costs
O(n^2). Here finished rows are frozen strings; an append re-wraps only the unfinished last row
plus the new text, and the Line API paints only the rows on screen. A resize re-wraps
everything once (O(n)).

What is left is Textual's own cost: a repaint is ~1 ms, and a new row changes the widget's height,
which lays out and repaints the whole scrolled view (~5-10 ms). A *live* widget (a reply being
streamed) therefore paints appends at most every FLUSH_S, claims RESERVE rows beyond its text so
that most new rows are a repaint, not a layout, and lays out at most every LAYOUT_S; ``seal()``
gives the claimed rows back when the stream ends. The cost then follows the time and the rows,
not the number of chunks (bench/chat_client.py).

The text is model output: each appended piece is sanitized (no control or escape sequence reaches
the terminal; tabs become spaces so cells stay aligned) and the widget shows at most
``MAX_CHARS`` characters, then a visible marker that says how much was not shown.
"""

from __future__ import annotations

import time

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from console.sanitize import clean

FLUSH_S = 0.1  # a live widget paints its appends at most this often (10 Hz reads as smooth)
RESERVE = 2  # rows a live widget claims beyond its text (blank lines the stream types into)
LAYOUT_S = 0.4  # a live widget grows (a layout of the whole view) at most this often
MAX_CHARS = 1_000_000  # what one reply shows; the full text stays in the ChatResult


def wrap_tail(tail: str, width: int) -> tuple[list[str], str]:
    """Split ``tail`` (no newlines) into full rows and the unfinished last row, greedily at
    spaces; O(len(tail)) (each row is scanned once)."""
    rows: list[str] = []
    if width <= 0:
        return rows, tail
    start, n = 0, len(tail)
    while True:
        cells, i, cut = 0, start, -1
        while i < n:
            cells += get_character_cell_size(tail[i])
            if cells > width:
                cut = i
                break
            i += 1
        if cut < 0:
            return rows, tail[start:]
        space = tail.rfind(" ", start, cut + 1)
        if space > start:
            rows.append(tail[start:space])
            start = space + 1
        else:
            cut = max(start + 1, cut)
            rows.append(tail[start:cut])
            start = cut


class WrappedRows:
    """Text wrapped at ``width`` that grows by appending: finished rows are frozen strings, an append
    re-wraps only the unfinished last row plus the new text (pure: no widget, no terminal)."""

    def __init__(self, width: int = 0) -> None:
        self.width = width
        self.rows: list[str] = []  # finished rows
        self.tail = ""  # the unfinished last row

    def __len__(self) -> int:
        return len(self.rows) + 1 if (self.tail or self.rows) else 0

    def lines(self) -> list[str]:
        """Every row, the unfinished one last."""
        return [*self.rows, self.tail] if len(self) else []

    def feed(self, text: str) -> None:
        """Append ``text``; O(len(text) + the unfinished row)."""
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                self.rows.append(self.tail)  # a newline closes the row
                self.tail = ""
            if piece:
                rows, self.tail = wrap_tail(self.tail + piece, self.width)
                self.rows.extend(rows)

    def reset(self, width: int | None = None) -> None:
        """Drop every row (at a new ``width`` when given)."""
        if width is not None:
            self.width = width
        self.rows.clear()
        self.tail = ""


class StreamText(Widget):
    """Append-only wrapped text (chat replies, reasoning). ``live``: a stream is feeding it
    (appends are batched; ``seal()`` when it ends)."""

    DEFAULT_CSS = """
    StreamText { height: auto; width: 1fr; }
    """

    def __init__(self, text: str = "", *, name: str | None = None, id: str | None = None,
                 classes: str | None = None, live: bool = False) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._live = live
        self._alloc = 0  # rows claimed in the layout (>= row_count)
        self._parts: list[str] = []
        self._wrapped = WrappedRows()  # the text wrapped at the widget's width
        self._chars = 0
        self._row_style: Style | None = None
        self._pending: list[str] = []  # appended, not yet wrapped into rows
        self._flush_timer: Timer | None = None
        self._last_flush = 0.0
        self._last_layout = 0.0
        self.dropped = 0  # characters past MAX_CHARS, not shown
        if text:
            self.append(text)

    # ------------------------------------------------------------------ content

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def row_count(self) -> int:
        return len(self._wrapped)

    def __len__(self) -> int:
        return self._chars

    def append(self, text: str) -> None:
        """Add text; a live widget wraps and paints it at the next flush (at most every FLUSH_S)."""
        if not text:
            return
        if self.dropped:
            self.dropped += len(text)
            return
        text = clean(text).replace("\t", "    ")
        if self._chars + len(text) > MAX_CHARS:
            keep = max(0, MAX_CHARS - self._chars)
            self.dropped = len(text) - keep
            text = text[:keep] + f"\n… [display limit of {MAX_CHARS:,} characters reached; the rest is not shown]"
        self._parts.append(text)
        self._chars += len(text)
        self._pending.append(text)
        if self._flush_timer is not None:
            return
        if not self._live or not self.is_mounted:
            self.flush()
            return
        wait = self._last_flush + FLUSH_S - time.monotonic()
        if wait <= 0:
            self.flush()
        else:
            self._flush_timer = self.set_timer(wait, self.flush)

    def flush(self) -> None:
        """Wrap what was appended since the last flush and repaint only the rows that changed.
        Rows beyond the claimed ones need a layout of the whole view: at most one per LAYOUT_S."""
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        now = self._last_flush = time.monotonic()
        before = self.row_count
        if self._pending:
            self._take_pending()
        elif before <= self._alloc:
            return
        if self.row_count > self._alloc:
            wait = self._last_layout + LAYOUT_S - now
            if wait <= 0 or not self._live or not self.is_mounted:
                self._last_layout = now
                self.refresh(layout=True)
                return
            self._flush_timer = self.set_timer(wait, self.flush)
        first = max(0, before - 1)
        last = min(self.row_count, self._alloc)
        if last > first:
            self.refresh(Region(0, first, self.size.width, last - first))

    def seal(self) -> None:
        """The stream ended: paint what is left and give back the rows claimed ahead."""
        self._live = False
        self.flush()
        if self._alloc != self.row_count:
            self.refresh(layout=True)

    def _take_pending(self) -> None:
        pending, self._pending = "".join(self._pending), []
        self._wrapped.feed(pending)

    def clear(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._pending.clear()
        self._parts.clear()
        self._wrapped.reset()
        self._chars = 0
        self.dropped = 0
        self.refresh(layout=True)

    def _rewrap(self, width: int) -> None:
        self._pending.clear()  # the whole text is wrapped again
        self._wrapped.reset(width)
        self._wrapped.feed(self.text)

    # ------------------------------------------------------------------ Textual hooks

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._wrapped.width:
            self._rewrap(width)
        elif self._pending:  # a layout for another reason: take what is waiting now
            self._take_pending()
        rows = self.row_count
        if not self._live:
            self._alloc = rows
        elif rows > self._alloc or rows + RESERVE < self._alloc:
            self._alloc = rows + RESERVE
        return self._alloc

    def notify_style_update(self) -> None:
        self._row_style = None
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._wrapped.width:
            self._rewrap(width)
        style = self._row_style
        if style is None:  # rich_style walks the ancestors: once per style change, not per row
            style = self._row_style = self.rich_style
        rows = self._wrapped.rows
        if y < len(rows):
            row = rows[y]
        elif y == len(rows):
            row = self._wrapped.tail
        else:
            row = ""
        return Strip([Segment(row, style)]).adjust_cell_length(width, style)
