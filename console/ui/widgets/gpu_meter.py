"""One GPU: a memory bar with used/total and its history over time: a one-row sparkline of the
memory, or, where the pane has the rows (``StationPane.-roomy``), a plot of memory and utilization
with a time axis (``GpuHistoryPlot``). Rendering only: the reading, its memory view and its
history are the station's (``console/station/state.py``)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.widgets import Static

from console.durations import age as age_text
from console.durations import span
from console.probes.nvidia_smi import GpuReading
from console.sanitize import one_line
from console.station.gpu_memory import GpuMemory, GpuTrace
from console.ui.palette import DEFAULT, Palette, fill_level, palette_of
from console.ui.widgets.gpu_history import GpuHistoryPlot
from console.ui.widgets.steady import Steady


def fmt_gib(mib: float | None) -> str:
    return "n/a" if mib is None else f"{mib / 1024:.1f}"


class Bar:
    """A memory bar that fills whatever width it is given at render time (``dim``: old values)."""

    def __init__(self, frac: float | None, expected: float | None = None, palette: Palette = DEFAULT,
                 dim: bool = False):
        self.frac, self.expected, self.palette, self.dim = frac, expected, palette, dim

    def shown_key(self) -> tuple:
        return ("bar", self.frac, self.expected, self.palette, self.dim)

    def __rich_console__(self, console, options):
        yield _dimmed(bar(self.frac, options.max_width, self.expected, self.palette), self.dim)


class Spark:
    """The memory history sized to the width at render time (``dim``: old values)."""

    def __init__(self, values: list[float], top: float | None, times: list[float] | None = None,
                 palette: Palette = DEFAULT, dim: bool = False):
        self.values, self.top, self.times, self.palette, self.dim = values, top, times, palette, dim

    def __rich_console__(self, console, options):
        yield _dimmed(sparkline(self.values, self.top, options.max_width, self.times, self.palette), self.dim)


def _dimmed(text: Text, dim: bool) -> Text:
    """Old values are drawn dim over their own colours (the bar keeps its levels, faded)."""
    if dim:
        text.stylize("dim")
    return text


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
        self.used_mib: float | None = None  # what the bar shows now
        self.total_mib: float | None = None
        self.title = ""
        self._shown: tuple[GpuReading, GpuMemory, GpuTrace | None] | None = None
        self.stale_age: float | None = None  # the reading is this old and not live (dimmed), else None

    def compose(self) -> ComposeResult:
        yield Steady("", classes="gpu-head")
        with Horizontal():
            yield Steady("", classes="gpu-bar")
            yield Steady("", classes="gpu-mem")
        yield Static("", classes="gpu-hist")
        yield GpuHistoryPlot(classes="gpu-plot")

    def show(self, reading: GpuReading, memory: GpuMemory, trace: GpuTrace | None,
             stale_age: float | None = None) -> None:
        """Draw this GPU: its reading (a GPU nvidia-smi could not read is one without a name), its
        memory as the station's state computes it, and its history; ``stale_age``: the reading is
        old (its source late, the station not live, nvidia-smi failing): dimmed, with its age."""
        self._shown = (reading, memory, trace)
        self.stale_age = stale_age
        self.set_class(stale_age is not None, "-stale")
        if self.is_mounted:
            self._render_when_ready()

    def on_mount(self) -> None:
        if self._shown is not None:
            self._render_when_ready()

    def _render_when_ready(self) -> None:
        """Draw now, or after the next refresh while the rows inside are still being mounted (a
        reading handed over while this meter mounts: its bar sits one container deeper)."""
        try:
            self._render_reading()
        except NoMatches:
            if self.is_attached:
                self.call_after_refresh(self._render_when_ready)

    def _render_reading(self) -> None:
        assert self._shown is not None
        g, memory, trace = self._shown
        if not g.name:  # no reading at all: what nvidia-smi printed is the whole row (fell off the bus, ...)
            self.used_mib = self.total_mib = None
            text = one_line(g.error or "no reading", 300)
            self.title = f"GPU{self.index} ✖ {text}"
            self.query_one(".gpu-head", Steady).show(Text(self.title, style="bold red", overflow="ellipsis",
                                                          no_wrap=True))
            # the second line: why (what follows the bus id), e.g. "Unknown Error", "GPU is lost. ..."
            bus = g.bus_id or ""
            tail = text[text.find(bus) + len(bus):].lstrip(": ") if bus and bus in text else ""
            self.query_one(".gpu-bar", Steady).show(
                Text(tail, style="red", overflow="ellipsis", no_wrap=True) if tail else Bar(None))
            self.query_one(".gpu-mem", Steady).show(Text("no reading", style="red"))
            self._render_history(trace)
            return
        used_mib, total_mib = memory.used_mib, memory.total_mib
        self.used_mib, self.total_mib = used_mib, total_mib
        parts = [f"GPU{self.index} {g.name}"]
        old = self.stale_age is not None
        if old:  # next to the name: a narrow pane cuts the figures after it, never the age
            parts.append(f"· {age_text(self.stale_age)} old")
        if g.util_pct is not None:
            parts.append(f"util {g.util_pct}%")
        if g.temp_c is not None:
            parts.append(f"{g.temp_c}°C")
        if g.power_w is not None:
            parts.append(f"{g.power_w:.0f} W")
        if memory.note:
            parts.append(memory.note)
        self.title = "  ".join(parts)
        head = Text(self.title, overflow="ellipsis", no_wrap=True, style="dim" if old else "")
        if g.error:
            self.title += f"  ✖ {one_line(g.error, 200)}"
            head.append(f"  ✖ {one_line(g.error, 200)}", style="bold red")
        self.query_one(".gpu-head", Steady).show(head)
        self.query_one(".gpu-bar", Steady).show(Bar(memory.frac, self.expected_frac, palette_of(self.app), old))
        mem = f"{fmt_gib(used_mib)}/{fmt_gib(total_mib)} GiB"
        self.query_one(".gpu-mem", Steady).show(Text(mem, style="dim") if old else mem)
        self._render_history(trace)

    def _render_history(self, trace: GpuTrace | None) -> None:
        times, used, utils = (list(trace.times), list(trace.used), list(trace.utils)) if trace else ([], [], [])
        self.query_one(".gpu-hist", Static).update(Spark(used, self.total_mib, times, palette_of(self.app),
                                                         self.stale_age is not None))
        # the plot keeps the data; it is drawn only while shown (a roomy pane), from the samples' clock
        self.query_one(GpuHistoryPlot).show(times, used, utils, self.total_mib)
