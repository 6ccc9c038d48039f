"""A station's container log: a ``LogView`` over the station's ``LogBuffer`` (its ``StationState``'s:
the pane keeps no line of its own), a filter box, and a note when the view stopped following its end.

What the operator must be able to tell from the screen (the view draws it): a line cut at the
pane's edge ends in "…" (and starts with "‹" when scrolled right); a filter's matches are
highlighted and scrolled into view; a line reached from the diagnosis (Enter on a finding) is
marked; after Home (or any scroll up by the operator) the pane says it stopped following, and End
follows again. Nothing else pauses it: a resize, another screen, the filter box, a restart.
The lines are kept, sanitized and clipped, in the buffer (``console/station/log_buffer.py``), which
the station's state feeds: a filter is applied and removed without asking the station again, and a
line's number is the one the diagnosis quotes (one counter, the buffer's)."""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Static

from console.station.log_buffer import LogBuffer
from console.ui.widgets.log_view import LogView


class LogPane(Vertical):
    """The filter box, the log view and the paused note over ``buffer``, the station's lines: the
    pane reads it, its owner (the station's state) feeds it, then ``show_new_lines`` shows them."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > Input { display: none; }
    LogPane.filtering > Input { display: block; }
    LogPane > LogView { height: 1fr; scrollbar-size-vertical: 1; }
    LogPane > #log-paused { height: 1; display: none; background: $warning 30%; color: $text; padding: 0 1; }
    LogPane.-paused > #log-paused { display: block; }
    """

    def __init__(self, buffer: LogBuffer, **kwargs) -> None:
        super().__init__(**kwargs)
        self.buffer = buffer
        self.filter_text = ""
        self.unseen = 0  # lines that arrived while the log was not following

    @property
    def lines(self) -> LogBuffer:
        """Every line kept (filtered or not), oldest first."""
        return self.buffer

    @property
    def total(self) -> int:
        """Lines this station printed since its state began (the newest line's number)."""
        return self.buffer.total

    def compose(self) -> ComposeResult:
        # Disabled (unfocusable) while hidden, so it never swallows the app's keys.
        yield Input(placeholder="filter (substring or /regex/), Esc to clear", id="log-filter", disabled=True)
        yield LogView(self.buffer, id="log")
        yield Static("", id="log-paused")

    def on_log_view_following(self, event: LogView.Following) -> None:
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
    def log_widget(self) -> LogView:
        return self.query_one(LogView)

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

    def show_new_lines(self) -> None:
        """Show what its owner added to the buffer since the last call (one call per batch)."""
        log = self.log_widget
        shown = log.sync()
        if shown and not log.following:
            self.unseen += shown
            self._paused_line()

    def set_filter(self, text: str) -> None:
        """Show the lines that hold ``text``. The view goes back to column 0 and stays there: a line's
        start (the host and process prefix) says whose line it is, so the filter never scrolls it out
        of sight; a match beyond the edge is reached with the arrows (the edge mark says there is more)."""
        self.filter_text = text
        log = self.log_widget
        log.set_match(self._matcher(), self._pattern())
        log.follow()  # the newest matches (the old scroll offset may be past the new end)
        # once the new size is laid out
        log.call_after_refresh(log.scroll_to, x=0, animate=False, immediate=True)

    def jump_to(self, line_no: int) -> None:
        """Show line ``line_no`` (1-based, counted over everything this station printed)."""
        buf = self.buffer
        if line_no < buf.first:
            self.app.notify(f"line {line_no} is older than the {len(buf)} lines kept", timeout=5)
            return
        if self.filter_text:
            self.query_one(Input).value = ""
            self.set_filter("")
        log = self.log_widget
        log.mark(line_no)
        log.pause()  # the operator went to this line: new lines must not scroll it away
        log.scroll_to(x=0, y=max(0, line_no - buf.first - 3), animate=False, immediate=True)
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
