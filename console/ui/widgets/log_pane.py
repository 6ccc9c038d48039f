"""A station's container log: a bounded ``Log`` fed in batches, a filter box, and highlighting of
errors and warnings. The pane keeps its own bounded copy of the lines so a filter can be applied
and removed without asking the station again.

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
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Log

from console.diagnosis import catalogue
from console.sanitize import clean, clip

DISPLAY_MAX_CHARS = 4096
MARKER_STYLE = "bold reverse yellow"

# Highlight patterns come from the diagnosis catalogue (the same knowledge as the findings and the
# launch's fatal lines); every pattern there is linear in the line length. Styles are explicit so they
# show whatever the theme.
_STYLES = {"prefix": "dim", "transport": "cyan", "ready": "bold green", "warning": "bold yellow", "error": "bold red"}
_HIGHLIGHTS = [(rx, _STYLES[kind]) for rx, kind in catalogue.HIGHLIGHTS]


def display_line(line: str) -> str:
    """What the pane shows of a log line: clipped first (bounded work whatever the line), then
    sanitized (no escape or control sequence reaches the terminal; tabs stay)."""
    return clean(clip(line, DISPLAY_MAX_CHARS)).replace("\n", "␊")


class EngineLogHighlighter(Highlighter):
    """Errors red, warnings yellow, readiness green, NCCL transport cyan (explicit styles, so they
    show whatever the theme)."""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if plain.startswith("— ") and ": stream interrupted " in plain:
            text.stylize(MARKER_STYLE)
            return
        for rx, style in _HIGHLIGHTS:
            for m in rx.finditer(plain):
                text.stylize(style, m.start(), m.end())


class EngineLog(Log):
    """``Log`` that measures new lines' width in place. Textual's own ``_update_size`` starts a thread
    worker per write whose description is the ``repr`` of every line written: at 50k lines/s that
    was ~6% of the loop, and the thread's ``cell_len`` pass held the GIL against it. Log lines are
    ASCII nearly always, where ``len`` is the cell width."""

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
    """

    def __init__(self, max_lines: int = 5000, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_lines = max_lines
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.filter_text = ""
        self.total = 0

    def compose(self) -> ComposeResult:
        # Disabled (unfocusable) while hidden, so it never swallows the app's keys.
        yield Input(placeholder="filter (substring or /regex/), Esc to clear", id="log-filter", disabled=True)
        log = EngineLog(max_lines=self.max_lines, highlight=True, id="log")
        log.highlighter = EngineLogHighlighter()
        yield log

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def _matcher(self):
        f = self.filter_text
        if not f:
            return None
        if len(f) > 2 and f.startswith("/") and f.endswith("/"):
            try:
                rx = re.compile(f[1:-1], re.IGNORECASE)
                return rx.search
            except re.error:
                pass
        low = f.lower()
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

    def on_resize(self) -> None:
        # The pane shrinks when the status above it grows (a fatal line): keep following the end.
        if getattr(self, "_following", True):
            self.log_widget.scroll_end(animate=False, immediate=False)

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        log = self.log_widget
        log.clear()
        match = self._matcher()
        log.write_lines([ln for ln in self.lines if match(ln)] if match else list(self.lines))
        log.scroll_end(animate=False, immediate=True)  # the old scroll offset may be past the new end

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
        log.scroll_to(y=max(0, y - 3), animate=False)
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
