"""A GPU's memory and utilization history as a plot with a time axis (textual-plotext, as the
bench's figure), where the pane has the rows for it; the meter's one-line sparkline stays for
small terminals.

The time axis counts back from the newest sample (``-60 s`` ... ``0``): it comes from the
samples' own clock, never from the screen's, so a frozen station shows a frozen plot and a
snapshot test draws the same figure every time. Memory is on the left axis from zero to the GPU's
total (a flat line at 231 of 251 GiB must look full), utilization on the right from 0 to 100 %.

The plot is built only when its data, size or theme changed, and for new samples at most once per
``PLOT_EVERY_S`` of the samples' clock: plotext renders the whole figure in Python (~12 ms of the UI's
loop at a pane's size and 120 samples), and one sample a second per plot (five at the tests' 200 ms)
each paid for a whole build. Samples that come sooner are drawn by a build ``PLOT_EVERY_S`` later at
the latest; the meter's head line above says the newest reading and its age meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import RenderResult
from textual_plotext import PlotextPlot

from console.durations import tick

PLOT_EVERY_S = 2.0


def time_axis(times: Sequence[float]) -> list[float]:
    """Seconds relative to the newest sample (all <= 0)."""
    if not times:
        return []
    last = times[-1]
    return [t - last for t in times]


_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200)


def time_ticks(span_s: float, most: int = 5) -> tuple[list[float], list[str]]:
    """Round ticks back from 0 ("-60 s", "-30 s", "now") for a history of ``span_s`` seconds."""
    step = next((st for st in _STEPS if span_s / st <= most - 1), _STEPS[-1])
    ticks = [-step * k for k in range(int(span_s // step), -1, -1)]
    return [float(t) for t in ticks], [tick(-t) for t in ticks]


class GpuHistoryPlot(PlotextPlot):
    """Memory (GiB, left) and utilization (%, right) against seconds before the last sample."""

    DEFAULT_CSS = """
    GpuHistoryPlot { height: 8; width: 1fr; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._data: tuple[list[float], list[float], list[float], float | None] = ([], [], [], None)
        self._version = 0
        self._cache: tuple[tuple, Text] | None = None
        self._newest: float | None = None  # the newest sample's time (the samples' clock)
        self._built_newest: float | None = None  # ... in the figure built last
        self._due = False  # a build that waited is due now
        self._waiting = False  # a build is set to come (one timer at a time)
        self.builds = 0

    def show(self, times: Sequence[float], used_mib: Sequence[float], util_pct: Sequence[float | None],
             total_mib: float | None) -> None:
        """The samples (oldest first; ``util_pct`` may hold None where it was not read)."""
        self._data = (time_axis(times), [u / 1024 for u in used_mib],
                      [float(u) if u is not None else float("nan") for u in util_pct], total_mib)
        self._newest = times[-1] if times else None
        self._version += 1
        self.refresh()

    def _soon(self, key: tuple) -> bool:
        """Only new samples, less than ``PLOT_EVERY_S`` after those of the figure shown: it stays, and a
        build is due that much later."""
        if self._due or self._cache is None or self._newest is None or self._built_newest is None:
            return False
        old = self._cache[0]
        if (old[0], old[1], old[3]) != (key[0], key[1], key[3]) or not 0 <= self._newest - self._built_newest < PLOT_EVERY_S:
            return False
        if not self._waiting:
            self._waiting = True
            self.set_timer(PLOT_EVERY_S, self._build_due)
        return True

    def _build_due(self) -> None:
        self._waiting, self._due = False, True
        self.refresh()

    def _build(self) -> None:
        xs, mem, util, total = self._data
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if len(xs) < 2 or min(xs) >= 0:
            plt.title("history: waiting for samples over time")
            return
        plt.plot(xs, mem, marker="braille", color="green+", yside="left", label="memory (GiB, left)")
        pairs = [(x, u) for x, u in zip(xs, util, strict=False) if u == u]  # NaN: not read
        if pairs:
            plt.plot([x for x, _ in pairs], [u for _, u in pairs], marker="braille", color="cyan", yside="right",
                     label="util (%, right)")
        top = (total / 1024) if total else (max(mem) * 1.1 or 1.0)
        plt.ylim(0, top, yside="left")
        plt.yticks([0, top / 2, top], ["0", f"{top / 2:.0f}", f"{top:.0f} GiB"], yside="left")
        plt.ylim(0, 100, yside="right")
        plt.yticks([0, 50, 100], ["0", "50", "100 %"], yside="right")
        plt.xlim(min(xs), 0)
        plt.xticks(*time_ticks(-min(xs), most=max(2, min(6, self.size.width // 14))))

    def render(self) -> RenderResult:
        key = (self.size.width, self.size.height, self._version, self.app.theme)
        if self._cache is not None and (self._cache[0] == key or self._soon(key)):
            return self._cache[1]
        self._due, self._built_newest = False, self._newest
        self.builds += 1
        try:
            self._build()
            text = super().render()
        except Exception as exc:  # noqa: BLE001 - a plot that cannot be drawn says so, never ends the app
            text = Text(f"history plot unavailable ({type(exc).__name__})", style="dim")
        assert isinstance(text, Text)
        self._cache = (key, text)
        return text
