"""A station's container log: a bounded ``Log`` fed in batches, a filter box, and highlighting of
errors and warnings. The pane keeps its own bounded copy of the lines so a filter can be applied
and removed without asking the station again.

What the operator must be able to tell from the screen: a line cut at the pane's edge ends in
"…" (and starts with "‹" when scrolled right); a filter's matches are highlighted and scrolled
into view; a line reached from the diagnosis (Enter on a finding) is marked; after Home (or any
scroll up) the pane says it stopped following, and End follows again.

Display only: every line is first shortened to ``DISPLAY_MAX_CHARS`` with a visible marker
(``sanitize.clip``), then sanitized, and only then highlighted, so no single line (vLLM prints
its whole argument list, request logs carry whole prompts) costs more than a short one. The whole
line still goes to the diagnosis (up to the monitor's cap). Marker lines the console writes where
a stream was interrupted are shown in reverse video."""

from __future__ import annotations

import re
from collections import deque

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.strip import Strip
from textual.widgets import Input, Log, Static

from console.diagnosis import catalogue
from console.sanitize import clean, clip

DISPLAY_MAX_CHARS = 4096
MARKER_STYLE = "bold reverse yellow"

# What to colour comes from the catalogue (``catalogue.highlight``: the same knowledge as the findings and
# the launch's fatal lines; linear in the line length). Styles are explicit so they show whatever the theme.
_STYLES: dict[catalogue.HighlightClass, str] = {
    "prefix": "dim", "transport": "cyan", "ready": "bold green", "warning": "bold yellow", "error": "bold red"}


MATCH_STYLE = "bold reverse"  # a filter's match
MARK_STYLE = Style(bgcolor="grey35", bold=True)  # the line reached from the diagnosis
EDGE_STYLE = Style(color="bright_white", bgcolor="grey42", bold=True)  # a line goes on past the edge


def display_line(line: str) -> str:
    """What the pane shows of a log line: clipped first (bounded work whatever the line), then
    sanitized (no escape or control sequence reaches the terminal; tabs stay)."""
    return clean(clip(line, DISPLAY_MAX_CHARS)).replace("\n", "␊")


class EngineLogHighlighter(Highlighter):
    """Errors red, warnings yellow, readiness green, NCCL transport cyan (explicit styles, so they
    show whatever the theme); the filter's matches in reverse video."""

    def __init__(self) -> None:
        self.match: re.Pattern[str] | None = None

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if plain.startswith("— ") and ": stream interrupted " in plain:
            text.stylize(MARKER_STYLE)
            return
        for start, end, kind in catalogue.highlight(plain):
            text.stylize(_STYLES[kind], start, end)
        if self.match is not None:
            for m in self.match.finditer(plain):
                if m.end() > m.start():
                    text.stylize(MATCH_STYLE, m.start(), m.end())


class EngineLog(Log):
    """``Log`` that measures new lines' width in place. Textual's own ``_update_size`` starts a thread
    worker per write whose description is the ``repr`` of every line written: at 50k lines/s that
    was ~6% of the loop, and the thread's ``cell_len`` pass held the GIL against it. Log lines are
    ASCII nearly always, where ``len`` is the cell width.

    It also marks what a plain ``Log`` leaves unsaid: the cut edge of a long line, the marked line,
    and whether it still follows the end (``Following``)."""

    class Following(Message):
        """The log started or stopped following its end (new lines scroll into view or not)."""

        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.written = 0  # lines written since the last clear (the marked line's clock)
        self.marked: int | None = None  # that clock's value for the marked line
        self.following = True

    def write_lines(self, lines, scroll_end: bool | None = None):  # type: ignore[override]
        lines = list(lines)
        self.written += len(lines)
        return super().write_lines(lines, scroll_end)

    def clear(self):  # type: ignore[override]
        self.written, self.marked = 0, None
        return super().clear()

    def index_of(self, written: int) -> int | None:
        """Where the line written as number ``written`` (0-based) is now, or None if pruned."""
        y = written - (self.written - len(self.lines))
        return y if 0 <= y < len(self.lines) else None

    def mark(self, y: int | None) -> None:
        """Mark the line at index ``y`` (None: no mark)."""
        old = self.index_of(self.marked) if self.marked is not None else None
        self.marked = None if y is None else self.written - len(self.lines) + y
        for line in (old, y):
            if line is not None:
                self.refresh_lines(line)

    def _render_line_strip(self, y: int, rich_style: Style) -> Strip:
        strip = super()._render_line_strip(y, rich_style)
        if self.marked is not None and y == self.index_of(self.marked):  # the mark over the line's own style
            strip = Strip([Segment(t, (st or Style()) + MARK_STYLE, c) for t, st, c in strip], strip.cell_length)
        return strip

    def _render_line(self, y: int, scroll_x: int, width: int) -> Strip:
        strip = super()._render_line(y, scroll_x, width)
        if y >= len(self.lines) or width < 4:
            return strip
        visible = min(width, self.scrollable_content_region.width or width)  # the scrollbar covers the rest
        full = self._render_line_strip(y, self.rich_style).cell_length
        right, left = full > scroll_x + visible, scroll_x > 0 and full > 0
        if not (right or left):
            return strip
        segments = list(strip.crop(1 if left else 0, visible - (1 if right else 0)))
        if left:
            segments.insert(0, Segment("‹", EDGE_STYLE))
        if right:
            segments.append(Segment("…", EDGE_STYLE))
        segments += list(strip.crop(visible, width))
        return Strip(segments, width).apply_offsets(scroll_x, y)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._follow_check()

    def on_resize(self) -> None:
        self._follow_check()

    def _follow_check(self) -> None:
        following = self.is_vertical_scroll_end or self.max_scroll_y == 0
        if following != self.following:
            self.following = following
            self.post_message(self.Following(following))

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if not lines:
            return
        joined = "".join(lines)
        if joined.isascii() and "\t" not in joined:
            width = max(map(len, lines))
        else:
            process = self._process_line
            width = max(cell_len(process(ln)) for ln in lines)
        self._update_maximum_width(updates, width)


class LogPane(Vertical):
    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > Input { display: none; }
    LogPane.filtering > Input { display: block; }
    LogPane > Log { height: 1fr; scrollbar-size-vertical: 1; }
    LogPane > #log-paused { height: 1; display: none; background: $warning 30%; color: $text; padding: 0 1; }
    LogPane.-paused > #log-paused { display: block; }
    """

    def __init__(self, max_lines: int = 5000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.filter_text = ""
        self.total = 0
        self.unseen = 0  # lines that arrived while the log was not following

    def compose(self) -> ComposeResult:
        # Disabled (unfocusable) while hidden, so it never swallows the app's keys.
        yield Input(placeholder="filter (substring or /regex/), Esc to clear", id="log-filter", disabled=True)
        log = EngineLog(max_lines=self.max_lines, highlight=True, id="log")
        log.highlighter = EngineLogHighlighter()
        yield log
        yield Static("", id="log-paused")

    def on_engine_log_following(self, event: EngineLog.Following) -> None:
        event.stop()
        if event.following:
            self.unseen = 0
        self.set_class(not event.following, "-paused")
        self._paused_line()

    def _paused_line(self) -> None:
        if self.has_class("-paused"):
            more = f" · {self.unseen:,} new line{'s' if self.unseen != 1 else ''} below" if self.unseen else ""
            self.query_one("#log-paused", Static).update(Text(f"⏸ paused — End to follow{more}"))

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def _pattern(self) -> re.Pattern[str] | None:
        """The filter as a pattern: ``/regex/``, else the substring (both case-insensitive)."""
        f = self.filter_text
        if not f:
            return None
        if self._regex():
            return re.compile(f[1:-1], re.IGNORECASE)
        return re.compile(re.escape(f), re.IGNORECASE)

    def _regex(self) -> bool:
        f = self.filter_text
        if not (len(f) > 2 and f.startswith("/") and f.endswith("/")):
            return False
        try:
            re.compile(f[1:-1])
        except re.error:
            return False
        return True

    def _matcher(self):
        if not self.filter_text:
            return None
        if self._regex():
            return self._pattern().search  # type: ignore[union-attr]
        low = self.filter_text.lower()  # a substring: no regex engine per line
        return lambda line: low in line.lower()

    def add_lines(self, lines: list[str]) -> None:
        shown = [display_line(ln) for ln in lines]
        self.lines.extend(shown)
        self.total += len(shown)
        match = self._matcher()
        if match:
            shown = [ln for ln in shown if match(ln)]
        if shown:
            log = self.log_widget
            self._following = log.is_vertical_scroll_end
            log.write_lines(shown)
            if not log.following:
                self.unseen += len(shown)
                self._paused_line()

    def on_resize(self) -> None:
        # The pane shrinks when the status above it grows (a fatal line): keep following the end.
        if getattr(self, "_following", True):
            self.log_widget.scroll_end(animate=False, immediate=False)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        log = self.log_widget
        log.clear()
        match = self._matcher()
        shown = [ln for ln in self.lines if match(ln)] if match else list(self.lines)
        highlighter = log.highlighter
        if isinstance(highlighter, EngineLogHighlighter):
            highlighter.match = self._pattern()
        log.write_lines(shown)
        log.scroll_end(animate=False, immediate=True)  # the old scroll offset may be past the new end
        column = self._match_column(shown)
        # once the new width is known (the log measures it as the lines land)
        log.call_after_refresh(log.scroll_to, x=column, animate=False, immediate=True)
        log.refresh()

    def _match_column(self, shown: list[str]) -> int:
        """A horizontal offset that shows the matches on screen (0 when they already are): the
        matches in the lines at the end, where the view is, decide."""
        rx = self._pattern()
        width = self.log_widget.scrollable_content_region.width or self.size.width
        if rx is None or width <= 0:
            return 0
        starts = [m.start() for ln in shown[-max(1, self.log_widget.size.height):] if (m := rx.search(ln))]
        ends = [m.end() for ln in shown[-max(1, self.log_widget.size.height):] if (m := rx.search(ln))]
        if not starts or max(ends) < width - 1:
            return 0
        return max(0, min(starts) - 8)

    def jump_to(self, line_no: int) -> None:
        """Show line ``line_no`` (1-based, counted over everything this station printed)."""
        first_kept = self.total - len(self.lines) + 1
        if line_no < first_kept:
            self.app.notify(f"line {line_no} is older than the {len(self.lines)} lines kept", timeout=5)
            return
        if self.filter_text:
            self.query_one(Input).value = ""
            self.set_filter("")
        log = self.log_widget
        y = line_no - first_kept
        log.mark(y)
        log.scroll_to(x=0, y=max(0, y - 3), animate=False, immediate=True)
        log.focus()

    def open_filter(self) -> None:
        self.add_class("filtering")
        inp = self.query_one(Input)
        inp.disabled = False
        self.call_after_refresh(inp.focus)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.set_filter(event.value)

    def on_key(self, event) -> None:
        if event.key == "escape" and self.has_class("filtering"):
            event.stop()
            inp = self.query_one(Input)
            inp.value = ""
            inp.disabled = True
            self.remove_class("filtering")
            self.set_filter("")
            self.log_widget.focus()
