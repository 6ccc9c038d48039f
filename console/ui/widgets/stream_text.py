"""A text widget that grows by appending, at a cost proportional to what is appended.

A ``Static`` re-renders its whole text on every update, so a streamed reply of n tokens costs
O(n^2). Here finished rows are frozen strings; an append re-wraps only the unfinished last row
plus the new text, and the Line API paints only the rows on screen. A resize re-wraps
everything once (O(n)).

The text is model output: each appended piece is sanitized (no control or escape sequence reaches
the terminal; tabs become spaces so cells stay aligned) and the widget shows at most
``MAX_CHARS`` characters, then a visible marker that says how much was not shown.
"""

from __future__ import annotations

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from console.sanitize import clean

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


class StreamText(Widget):
    """Append-only wrapped text (chat replies, reasoning)."""

    DEFAULT_CSS = """
    StreamText { height: auto; width: 1fr; }
    """

    def __init__(self, text: str = "", *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._parts: list[str] = []
        self._rows: list[str] = []  # frozen rows at self._width
        self._tail = ""  # the unfinished last row
        self._width = 0
        self._chars = 0
        self._row_style: Style | None = None
        self.dropped = 0  # characters past MAX_CHARS, not shown
        if text:
            self.append(text)

    # ------------------------------------------------------------------ content

    @property
    def text(self) -> str:
        return "".join(self._parts)

    @property
    def row_count(self) -> int:
        return len(self._rows) + 1 if (self._tail or self._rows) else 0

    def __len__(self) -> int:
        return self._chars

    def append(self, text: str) -> None:
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
        before = self.row_count
        self._parts.append(text)
        self._chars += len(text)
        self._feed(text)
        if self.row_count != before:
            self.refresh(layout=True)
        else:  # only the last row changed: repaint that row, not the widget
            self.refresh(Region(0, self.row_count - 1, self.size.width, 1))

    def clear(self) -> None:
        self._parts.clear()
        self._rows.clear()
        self._tail = ""
        self._chars = 0
        self.dropped = 0
        self.refresh(layout=True)

    def _feed(self, text: str) -> None:
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if i:
                self._rows.append(self._tail)  # a newline closes the row
                self._tail = ""
            if piece:
                rows, self._tail = wrap_tail(self._tail + piece, self._width)
                self._rows.extend(rows)

    def _rewrap(self, width: int) -> None:
        self._width = width
        self._rows.clear()
        self._tail = ""
        self._feed(self.text)

    # ------------------------------------------------------------------ Textual hooks

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return container.width

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if width != self._width:
            self._rewrap(width)
        return self.row_count

    def notify_style_update(self) -> None:
        self._row_style = None
        super().notify_style_update()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if width != self._width:
            self._rewrap(width)
        style = self._row_style
        if style is None:  # rich_style walks the ancestors: once per style change, not per row
            style = self._row_style = self.rich_style
        if y < len(self._rows):
            row = self._rows[y]
        elif y == len(self._rows):
            row = self._tail
        else:
            row = ""
        return Strip([Segment(row, style)]).adjust_cell_length(width, style)
