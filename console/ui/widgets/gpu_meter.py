"""One GPU: a memory bar with used/total and its history over time: a one-row sparkline of the
memory, or, where the pane has the rows (``StationPane.-roomy``), a plot of memory and utilization
with a time axis (``GpuHistoryPlot``)."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from console.durations import span
from console.sanitize import one_line
from console.ui import clock
from console.ui.palette import DEFAULT, Palette, fill_level, palette_of
from console.ui.widgets.gpu_history import GpuHistoryPlot

HISTORY = 120


def fmt_gib(mib: float | None) -> str:
    return "n/a" if mib is None else f"{mib / 1024:.1f}"


class Bar:
    """A memory bar that fills whatever width it is given at render time."""

    def __init__(self, frac: float | None, expected: float | None = None, palette: Palette = DEFAULT):
        self.frac, self.expected, self.palette = frac, expected, palette

    def __rich_console__(self, console, options):
        yield bar(self.frac, options.max_width, self.expected, self.palette)


class Spark:
    """The memory history sized to the width at render time."""

    def __init__(self, values: list[float], top: float | None, times: list[float] | None = None,
                 palette: Palette = DEFAULT):
        self.values, self.top, self.times, self.palette = values, top, times, palette

    def __rich_console__(self, console, options):
        yield sparkline(self.values, self.top, options.max_width, self.times, self.palette)


def bar(frac: float | None, width: int, expected: float | None = None, palette: Palette = DEFAULT) -> Text:
    """``expected``: the fill the profile expects (vLLM's --gpu-memory-utilization): shown calm."""
    width = max(4, width)
    if frac is None:
        return Text("·" * width, style="dim")
    frac = min(1.0, max(0.0, frac))
    full = int(frac * width)
    level = fill_level(frac, expected)
    style = getattr(palette, level) if level == "ok" else f"bold {getattr(palette, level)}"
    return Text("█" * full, style=style) + Text("░" * (width - full), style="dim")


BLOCKS = " ▁▂▃▄▅▆▇█"


def history_label(shown: int, total: int, span_s: float | None, roomy: bool) -> str:
    """The time scale of the row: ``last 2 min`` (what the shown samples cover, newest on the
    right), with the sample count when there is room; ``1 sample`` before there is a span."""
    count = f"{total} sample{'' if total == 1 else 's'}"
    if span_s is None or shown < 2:
        return f" {count}"
    scale = f" last {span(span_s)}"
    return f"{scale} · {count}" if roomy else scale


def sparkline(values: list[float], top: float | None, width: int, times: list[float] | None = None,
              palette: Palette = DEFAULT) -> Text:
    """Memory history scaled to the GPU's total (not to the data's range: a flat line at 231 GiB
    of 250 GiB must look full, not empty), newest sample on the right, with its time scale
    (``times``: when each sample was taken, seconds)."""
    if not values or not top:
        return Text("")
    roomy = width >= 60
    label = history_label(min(len(values), width), len(values), None, roomy)
    for _ in range(2):  # the label's width decides how many samples fit, which decides the span
        room = max(1, width - len(label))
        shown = min(len(values), room)
        span = times[-1] - times[-shown] if times and len(times) >= shown and shown >= 2 else None
        label = history_label(shown, len(values), span, roomy)
    room = max(1, width - len(label))
    vals = values[-room:]
    chars = "".join(BLOCKS[min(8, max(0, round(8 * v / top)))] for v in vals)
    return Text(" " * (room - len(vals)) + chars, style=palette.ok) + Text(label, style="dim")


class GpuMeter(Vertical):
    DEFAULT_CSS = """
    GpuMeter { height: 3; }
    GpuMeter .gpu-head { height: 1; }
    GpuMeter Horizontal { height: 1; }
    GpuMeter .gpu-bar { width: 1fr; height: 1; }
    GpuMeter .gpu-mem { width: 22; height: 1; text-align: right; }
    GpuMeter .gpu-hist { height: 1; }
    GpuMeter .gpu-plot { display: none; height: 8; }
    """

    def __init__(self, index: int, expected_frac: float | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.index = index
        self.expected_frac = expected_frac  # the serving GPU's expected fill (the profile's), else None
        self.history: deque[float] = deque(maxlen=HISTORY)
        self.times: deque[float] = deque(maxlen=HISTORY)  # when each sample was taken (the time scale)
        self.utils: deque[float | None] = deque(maxlen=HISTORY)  # utilization at those times
        self.used_mib: float | None = None
        self.total_mib: float | None = None
        self.title = ""
        self._last: tuple | None = None

    def compose(self) -> ComposeResult:
        yield Static("", classes="gpu-head")
        with Horizontal():
            yield Static("", classes="gpu-bar")
            yield Static("", classes="gpu-mem")
        yield Static("", classes="gpu-hist")
        yield GpuHistoryPlot(classes="gpu-plot")

    def update_reading(self, name: str, used_mib: float | None, total_mib: float | None, util: int | None,
                       temp: int | None, power: float | None, note: str = "", error: str | None = None,
                       at: float | None = None) -> None:
        """``at``: when the sample was taken (``time.time()``; the history's time scale); ``error``: this
        GPU could not be read (nvidia-smi's words)."""
        self._last = (name, used_mib, total_mib, util, temp, power, note, error)
        if used_mib is not None:
            when = clock.now() if at is None else at
            if self.times and self.times[-1] == when:  # the same sample drawn again (new processes, host memory)
                self.history[-1], self.utils[-1] = used_mib, util
            else:
                self.history.append(used_mib)
                self.times.append(when)
                self.utils.append(util)
        if self.is_mounted:
            self._render_reading()

    def update_error(self, text: str, bus_id: str | None = None) -> None:
        """A GPU nvidia-smi could not read (fell off the bus, needs a reset): what it printed (its
        start on the first line, the bus id and reason on the second, so narrow panes show both)."""
        self._last = ("", None, None, None, None, None, bus_id or "", text)
        if self.is_mounted:
            self._render_reading()

    def on_mount(self) -> None:
        if self._last is not None:
            self._render_reading()

    def _render_reading(self) -> None:
        name, used_mib, total_mib, util, temp, power, note, error = self._last
        if not name:  # no reading at all: the error is the whole row
            self.used_mib = self.total_mib = None
            text = one_line(error or "no reading", 300)
            self.title = f"GPU{self.index} ✖ {text}"
            self.query_one(".gpu-head", Static).update(Text(self.title, style="bold red", overflow="ellipsis",
                                                            no_wrap=True))
            # the second line: why (what follows the bus id), e.g. "Unknown Error", "GPU is lost. ..."
            tail = text[text.find(note) + len(note):].lstrip(": ") if note and note in text else ""
            self.query_one(".gpu-bar", Static).update(
                Text(tail, style="red", overflow="ellipsis", no_wrap=True) if tail else Bar(None))
            self.query_one(".gpu-mem", Static).update(Text("no reading", style="red"))
            self._render_history()
            return
        self.used_mib, self.total_mib = used_mib, total_mib
        parts = [f"GPU{self.index} {name}"]
        if util is not None:
            parts.append(f"util {util}%")
        if temp is not None:
            parts.append(f"{temp}°C")
        if power is not None:
            parts.append(f"{power:.0f} W")
        if note:
            parts.append(note)
        self.title = "  ".join(parts)
        head = Text(self.title, overflow="ellipsis", no_wrap=True)
        if error:
            self.title += f"  ✖ {one_line(error, 200)}"
            head.append(f"  ✖ {one_line(error, 200)}", style="bold red")
        self.query_one(".gpu-head", Static).update(head)
        frac = used_mib / total_mib if used_mib is not None and total_mib else None
        self.query_one(".gpu-bar", Static).update(Bar(frac, self.expected_frac, palette_of(self.app)))
        mem = f"{fmt_gib(used_mib)}/{fmt_gib(total_mib)} GiB"
        self.query_one(".gpu-mem", Static).update(mem)
        self._render_history()

    def _render_history(self) -> None:
        self.query_one(".gpu-hist", Static).update(Spark(list(self.history), self.total_mib, list(self.times),
                                                         palette_of(self.app)))
        # the plot keeps the data; it is drawn only while shown (a roomy pane), from the samples' clock
        self.query_one(GpuHistoryPlot).show(list(self.times), list(self.history), list(self.utils), self.total_mib)
