"""A station's log on Textual's Line API: a ``ScrollView`` that renders only the rows on screen
(``render_line`` -> ``Strip``), as toolong's ``LogLines`` does, from a ``LogBuffer`` it reads but does
not own (the station's state will own it).

What the operator must be able to tell from the screen: a line cut at the view's edge ends in "…"
(and starts with "‹" when scrolled right); errors, warnings, readiness and the NCCL transport are
coloured; a filter's matches are in reverse video; the line reached from the diagnosis is marked;
the console's own marker lines (a stream was interrupted) are in reverse yellow; whether the view
still follows the end (``Following``).

Cost: taking in a batch is O(batch) (a width per shown line, ``len`` for the ASCII lines nearly
every log is made of) plus one repaint; a row is highlighted once and kept in an LRU cache keyed by
its line number (a line's number never changes, so pruning the buffer invalidates nothing). The
cache holds whole, uncut rows; the cut at the edge, the mark and a text selection are applied per
frame on top, so scrolling, resizing and marking never empty it. It is emptied when what a row looks
like changes: the filter (its matches), the widget's style (theme, focus)."""

from __future__ import annotations

import re
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import islice
from typing import NamedTuple

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollDown, ScrollTo, ScrollUp
from textual.selection import Selection
from textual.strip import Strip
from textual.timer import Timer

from console import catalogue
from console.station.log_buffer import LogBuffer
from console.ui.widgets.row_paint import Span, paint_row

ROW_CACHE = 256  # highlighted rows kept: a few screens (scrolling back and forth), not a history
WIDTH_STEP = 32  # columns: the scrollable width grows in these steps (``_virtual``)
REPAINT_EVERY = 0.25  # s: while lines stream, a view repaints at most 4 times a second (as toolong batches)
MARKER_STYLE = "bold reverse yellow"  # the console's own line: a stream was interrupted here
MATCH_STYLE = "bold reverse"  # a filter's match
MARK_STYLE = Style(bgcolor="grey35", bold=True)  # the line reached from the diagnosis
EDGE_STYLE = Style(color="bright_white", bgcolor="grey42", bold=True)  # a line goes on past the edge

# What to colour comes from the catalogue (``catalogue.highlight``: the same knowledge as the findings
# and the launch's fatal lines; linear in the line length). Styles are explicit so they show whatever
# the theme.
_STYLES: dict[catalogue.HighlightClass, Style] = {kind: Style.parse(style) for kind, style in {
    "prefix": "dim", "transport": "cyan", "ready": "bold green", "warning": "bold yellow", "error": "bold red"}.items()}
_MATCH, _MARKER = Style.parse(MATCH_STYLE), Style.parse(MARKER_STYLE)

Match = Callable[[str], object]  # truthy when a line is to be shown


def row_spans(line: str, match: re.Pattern[str] | None = None) -> list[Span]:
    """Where a log line is coloured, and how, in the order they apply: the catalogue's classes, then
    a filter's matches in reverse video."""
    spans = [(start, end, _STYLES[kind]) for start, end, kind in catalogue.highlight(line)]
    if match is not None:
        spans += [(m.start(), m.end(), _MATCH) for m in match.finditer(line) if m.end() > m.start()]
    return spans


def cell_width(line: str) -> int:
    """Cells a row takes, tabs expanded (``len`` for the ASCII lines nearly every log is made of)."""
    if line.isascii() and "\t" not in line:
        return len(line)
    return cell_len(line.expandtabs())


def widest(lines: list[str]) -> int:
    """The widest of ``lines`` in cells (0 for none); in C, a few thousand lines at a time, while
    they are plain ASCII."""
    width = 0
    for i in range(0, len(lines), 4096):
        chunk = lines[i:i + 4096]
        joined = "".join(chunk)
        if joined.isascii() and "\t" not in joined:
            width = max(width, max(map(len, chunk)))
        else:
            width = max(width, max(map(cell_width, chunk)))
    return width


class _Frame(NamedTuple):
    scroll_x: int
    scroll_y: int
    width: int
    visible: int  # columns not under the vertical scrollbar
    rich_style: Style
    selection: Selection | None


class _ShownLines(Sequence[str]):
    """The rows a view shows, as text (for tests and selections): a read-only view, no copy."""

    def __init__(self, view: LogView) -> None:
        self._view = view

    def __len__(self) -> int:
        return self._view.row_count

    def __getitem__(self, row):  # type: ignore[override]
        if isinstance(row, slice):
            return [self[i] for i in range(*row.indices(len(self)))]
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        return self._view.buffer.line(self._view.number_at(row))


class LogView(ScrollView, can_focus=True):
    """The rows of a ``LogBuffer``, all of them or those a filter matches. Feed it by adding lines to
    the buffer and calling ``sync()`` (one call per batch)."""

    ALLOW_SELECT = True
    DEFAULT_CSS = """
    LogView {
        background: $surface;
        color: $text;
        overflow: scroll;
        &:focus {
            background-tint: $foreground 5%;
        }
    }
    """

    class Following(Message):
        """The view started or stopped following its end (new lines scroll into view or not)."""

        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, buffer: LogBuffer, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.buffer = buffer
        self.highlight: re.Pattern[str] | None = None  # a filter's matches, in reverse video
        self.marked: int | None = None  # the number of the marked line
        self.following = True
        self._match: Match | None = None
        self._rows: list[int] = []  # filtered: the shown lines' numbers, ascending, from _rows_start
        self._rows_start = 0
        self._seen = buffer.total  # the last line number taken in
        self._width = 0  # the widest row since the view was (re)built
        self._cache: LRUCache[int, tuple[list[Segment], int]] = LRUCache(ROW_CACHE)
        self._cache_style: Style | None = None
        self._frame: _Frame | None = None  # while a frame is rendered: what its rows share
        self._repainted_at = 0.0
        self._repaint_timer: Timer | None = None
        self.set_reactive(ScrollView.virtual_size, self._rebuild())

    # ------------------------------------------------------------------ rows

    @property
    def lines(self) -> Sequence[str]:
        """The rows shown, as text (read-only; no copy)."""
        return _ShownLines(self)

    @property
    def row_count(self) -> int:
        if self._match is None:
            return len(self.buffer)
        return len(self._rows) - self._rows_start

    def number_at(self, row: int) -> int:
        """The line number shown on ``row`` (0 = the first row)."""
        if self._match is None:
            return self.buffer.first + row
        return self._rows[self._rows_start + row]

    def index_of(self, number: int) -> int | None:
        """The row where line ``number`` is shown, or None (pruned, or not matching the filter)."""
        if not self.buffer.has(number):
            return None
        if self._match is None:
            return number - self.buffer.first
        i = bisect_left(self._rows, number, self._rows_start)
        return i - self._rows_start if i < len(self._rows) and self._rows[i] == number else None

    def set_match(self, match: Match | None, highlight: re.Pattern[str] | None = None) -> None:
        """Show only the lines ``match`` is truthy for (None: every line), ``highlight``'s matches in
        reverse video. Rebuilt from the buffer; scroll where you want afterwards."""
        self._match = match
        self.highlight = highlight
        self._cache.clear()
        self.virtual_size = self._rebuild()
        self.refresh()

    def _rebuild(self) -> Size:
        """Rows and width from the whole buffer; returns the virtual size."""
        buf = self.buffer
        self._seen = buf.total
        if self._match is None:
            self._rows, self._rows_start = [], 0
            self._width = widest(list(buf))
        else:
            match = self._match
            first = buf.first
            self._rows = [first + i for i, line in enumerate(buf) if match(line)]
            self._rows_start = 0
            self._width = widest([buf.line(n) for n in self._rows])
        return self._virtual()

    @property
    def widest(self) -> int:
        """The widest row's cells since the view was (re)built."""
        return self._width

    def _virtual(self) -> Size:
        """The scrollable size: every row, and the widest row's cells rounded up to ``WIDTH_STEP`` (a
        change of the virtual size lays the whole screen out again, ~15-40 ms: a flood whose lines grow
        a column now and then would otherwise pay that at each new widest line)."""
        return Size(-(-self._width // WIDTH_STEP) * WIDTH_STEP, self.row_count)

    def sync(self) -> int:
        """Take in the lines added to the buffer since the last call (some may have been pruned
        already) and follow the end if the view follows; returns how many new rows are shown."""
        buf = self.buffer
        start, new = buf.since(self._seen)
        self._seen = buf.total
        if not new:
            return 0
        if self._match is not None:
            first = buf.first
            if self._rows_start < len(self._rows) and self._rows[self._rows_start] < first:  # pruned
                self._rows_start = bisect_left(self._rows, first, self._rows_start)
                if self._rows_start >= len(self._rows) // 2:
                    del self._rows[:self._rows_start]
                    self._rows_start = 0
            match = self._match
            shown = [i for i, line in enumerate(new) if match(line)]
            self._rows.extend(start + i for i in shown)
            width = widest([new[i] for i in shown])
        else:
            shown = new
            width = widest(new)
        self._width = max(self._width, width)
        self.virtual_size = self._virtual()
        if shown and not self.is_vertical_scrollbar_grabbed:
            self._keep_end()
        self._repaint_soon()  # new rows (and pruning moved every row up): what is on screen changed
        return len(shown)

    def _repaint_soon(self) -> None:
        """Repaint soon, at most every ``REPAINT_EVERY`` while lines stream: at 50k lines/s nobody reads
        each batch, and every repaint highlights a screenful of new rows. Always a step of its own (a
        timer, at once when one is due): the batch that asked for it is taken in without waiting for
        the rows' rendering, and the UI's timers due meanwhile go between the two."""
        if self._repaint_timer is not None:
            return  # one is due
        wait = max(0.001, self._repainted_at + REPAINT_EVERY - time.monotonic())  # (Textual: a 0 s timer divides by 0)
        self._repaint_timer = self.set_timer(wait, self._repaint)

    def _repaint(self) -> None:
        self._repaint_timer = None
        self._repainted_at = time.monotonic()
        self.refresh()
        self._render_now()

    def _render_now(self) -> None:
        """Render the rows the next frame shows, now (highlighted, painted and styled into Textual's
        line cache, which the frame reads): in a flood every row on screen is new at each repaint, and
        done inside the screen's update this work (~0.15 ms a row) was one long block of it that the
        UI's timers and keys waited behind; here it is a step of its own. Nothing when the view is
        not on the screen shown (the frame would not ask for it either)."""
        if not (self.is_on_screen and self.screen.is_current):
            return
        width, height = self.region.size
        if width and height:
            self.render_lines(Region(0, 0, width, height))

    # ------------------------------------------------------------------ mark and follow

    def mark(self, number: int | None) -> None:
        """Mark line ``number`` (None: no mark); it stays marked as lines arrive."""
        self.marked = number
        self.refresh()

    # Following is the operator's choice, not a reading of the scroll position: only their own move
    # up (a key, the wheel, the scrollbar, a jump to a line) pauses it; a move that reaches the end
    # (End, scrolling down to it) follows again. A pane that shrinks or grows, a screen that comes
    # back, a batch arriving while another screen is up: the view stays where it was told to be.

    def follow(self) -> None:
        """Follow the end from now on (End): new lines scroll into view."""
        self._set_following(True)
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def pause(self) -> None:
        """Stop following (the operator scrolled up or jumped to a line); ``follow`` resumes."""
        self._set_following(False)

    def _set_following(self, following: bool) -> None:
        if following != self.following:
            self.following = following
            self.post_message(self.Following(following))

    def _moved_up(self) -> None:
        """The operator moved up: paused, unless there is nothing to scroll."""
        if self.max_scroll_y > 0:
            self.pause()

    def _moved_down(self) -> None:
        """The operator moved down: following again once the move reaches the end."""
        if self.scroll_target_y >= self.max_scroll_y:
            self._set_following(True)

    def action_scroll_home(self) -> None:
        super().action_scroll_home()
        self._moved_up()

    def action_scroll_up(self) -> None:
        super().action_scroll_up()
        self._moved_up()

    def action_page_up(self) -> None:
        super().action_page_up()
        self._moved_up()

    def action_scroll_end(self) -> None:
        super().action_scroll_end()
        self._set_following(True)

    def action_scroll_down(self) -> None:
        super().action_scroll_down()
        self._moved_down()

    def action_page_down(self) -> None:
        super().action_page_down()
        self._moved_down()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        if not (event.ctrl or event.shift):
            self._moved_up()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if not (event.ctrl or event.shift):
            self._moved_down()

    def on_scroll_up(self, event: ScrollUp) -> None:  # a click on the scrollbar above its thumb
        self._moved_up()

    def on_scroll_down(self, event: ScrollDown) -> None:
        self._moved_down()

    def on_scroll_to(self, event: ScrollTo) -> None:  # the scrollbar's thumb dragged
        if event.y is None:
            return
        if event.y >= self.max_scroll_y:
            self._set_following(True)
        else:
            self._moved_up()

    def _keep_end(self) -> None:
        """While following: at the end now, and again once the new layout is in (a size that
        changed in the same frame is only known then)."""
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
            self.call_after_refresh(self._end_if_following)

    def _end_if_following(self) -> None:
        if self.following and not self.is_vertical_scrollbar_grabbed:
            self.scroll_end(animate=False, immediate=True, x_axis=False)

    def on_resize(self) -> None:
        self._keep_end()

    def on_show(self) -> None:
        self._keep_end()

    # ------------------------------------------------------------------ rendering

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()

    def _row_segments(self, row: int, number: int, rich_style: Style, selection: Selection | None
                      ) -> tuple[list[Segment], int]:
        """The whole row, uncut, and its cells: highlighted (cached by line number, as plain segments:
        a Strip carries eight caches of its own, garbage the collector would have to walk), then
        marked and selected."""
        cached = self._cache.get(number) if selection is None else None
        if cached is None:
            line = self.buffer.line(number)
            if "\t" in line:
                line = line.expandtabs()
            if self.buffer.is_marker(number):
                spans = [(0, len(line), _MARKER)]
            else:
                spans = row_spans(line, self.highlight)
            if selection is not None and (span := selection.get_span(row)) is not None:
                start, end = span
                spans.append((start, len(line) if end == -1 else end,
                              self.screen.get_component_rich_style("screen--selection")))
            cached = (paint_row(line, rich_style, spans), cell_len(line))
            if selection is None:
                self._cache[number] = cached
        segments, length = cached
        if number == self.marked:  # the mark over the line's own style
            segments = [Segment(t, (st or Style()) + MARK_STYLE, c) for t, st, c in segments]
        return segments, length

    def _frame_values(self) -> _Frame:
        """What every row of a frame shares (each of these walks the DOM or the styles)."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        visible = min(width, self.scrollable_content_region.width or width)  # the scrollbar covers the rest
        return _Frame(scroll_x, scroll_y, width, visible, self.rich_style, self.text_selection)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame = self._frame_values()  # once per frame, not once per row
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        """One row. In a frame (``render_lines``) without the selection's offsets: the compositor asks
        for a row alone (``render_line``) where the mouse is, and only that row needs them."""
        if self._frame is not None:
            return self._render_row(y, *self._frame)
        frame = self._frame_values()
        return self._render_row(y, *frame).apply_offsets(frame.scroll_x, frame.scroll_y + y)

    def _render_row(self, y: int, scroll_x: int, scroll_y: int, width: int, visible: int, rich_style: Style,
                    selection: Selection | None) -> Strip:
        row = scroll_y + y
        if rich_style != self._cache_style:
            self._cache.clear()
            self._cache_style = rich_style
        if row >= self.row_count:
            return Strip.blank(width, rich_style)
        number = self.number_at(row)
        if not self.buffer.has(number):  # pruned since the last sync (a filtered view catches up there)
            return Strip.blank(width, rich_style)
        segments, length = self._row_segments(row, number, rich_style, selection)
        if length < scroll_x + width:
            segments = segments.copy()
            segments.append(Segment(" " * (scroll_x + width - length), rich_style))
        right = width >= 4 and length > scroll_x + visible
        left = width >= 4 and scroll_x > 0 and length > 0
        if not (right or left):
            cut = next(islice(Segment.divide(segments, [scroll_x, scroll_x + width]), 1, None), [])
            return Strip(cut, width)
        # the row goes on past an edge: say so there (the cells under the scrollbar stay as they are)
        cuts = [scroll_x, scroll_x + left, scroll_x + visible - right, scroll_x + visible, scroll_x + width]
        parts = list(Segment.divide(segments, cuts))
        parts += [[]] * (len(cuts) - len(parts))  # cuts at the very end yield nothing
        cut = [Segment("‹", EDGE_STYLE)] if left else []
        cut += parts[2]
        if right:
            cut.append(Segment("…", EDGE_STYLE))
        cut += parts[4]
        return Strip(cut, width)
