"""The fleet view: one row per station, like a cluster overview (all-smi, k9s): state, age of the
last sample, engine phase, serving-GPU memory used/total, utilization, NCCL transport and the
last error. Enter on a row asks for that station's full pane (``StationChosen``).

Rendering only: rows are read from the stations' states (``update_from``, console/station/state.py),
the same objects the panes render; the display GPU of a DGX Station is left out (it serves nothing
and repeated on every row it hid the figures that matter).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from console.durations import age as age_text
from console.durations import clock as mmss
from console.sanitize import one_line
from console.station.aspects import Aspect
from console.station.health import health_lines
from console.station.state import StationState
from console.station.verdict import Verdict
from console.ui import clock
from console.ui.fit_text import error_words, fill_width
from console.ui.palette import DEFAULT, Palette, palette_of, transport_style
from console.ui.widgets.gpu_meter import bar
from console.ui.widgets.station_pane import CONN_STYLE, PHASE_STYLE
from console.vocabulary import (
    CONTAINER_ENDED_STATES,
    LOADING_PHASES,
    TRANSPORT_TINY,
    ConnState,
    NcclTransport,
)

COLUMNS = (("station", 10), ("state", 13), ("age", 6), ("engine", 24), ("GPU memory", 24), ("util", 5),
           ("NCCL", 10))  # then "last error", which takes the rest
# Narrower terminals keep the last error readable: first util goes and the bars shrink, then the
# state is its icon alone (colour and shape say it) and memory is its figures.
LAYOUTS: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = (
    (150, COLUMNS),
    (100, (("station", 10), ("state", 13), ("age", 5), ("engine", 20), ("GPU memory", 16), ("NCCL", 9))),
    (0, (("station", 10), ("state", 1), ("age", 5), ("engine", 19), ("GPU memory", 11))),
)
ERROR = "last error"
GPU_ERROR = "gpu error"  # the state cell of a live station with a GPU in error


def layout_for(width: int) -> tuple[tuple[str, int], ...]:
    return next(cols for least, cols in LAYOUTS if width >= least)


@dataclass(frozen=True)
class FleetRow:
    """What one station's row says (plain values; ``cells`` styles them)."""

    station: str
    rank: int
    head: bool
    state: str
    age_s: float | None
    phase: str | None
    engine: str
    used_mib: float | None
    total_mib: float | None
    util_pct: int | None
    transport: str
    error: str
    stale: bool = False  # the row's values are old (the station not live, its GPU samples late): dimmed
    alarm: bool = False  # wedged or stuck (the engine cell says it, in the error colour)
    # GPU and fabric health
    health: str = ""  # the worst health line ("✖ GPU1 Xid 79: ...", "⚠ GPU1 PCIe Gen3 x8 ..."), "" when all is well
    health_level: str | None = None  # error | warn
    rail: str = ""  # the rail's short word ("▲ 400G", "✖ down"): the NCCL column until the engine says its transport
    rail_level: str | None = None


def fleet_row(state: StationState, now: float | None = None, serving_gpu: str | None = None,
              expected: float | None = None, verdict: Verdict | None = None) -> FleetRow:
    """One station's row from its state: the serving GPUs only (those named ``serving_gpu`` when
    the profile expects a fill for them; all of them when none matches), memory as the state
    computes it (GB10: processes against host memory)."""
    now = clock.now() if now is None else now
    s = state
    serving = s.serving_gpus(serving_gpu if expected is not None else None)
    memory = [s.memory[g.index] for g in serving if g.index in s.memory]
    used = [m.used_mib for m in memory if m.used_mib is not None]
    total = [m.total_mib for m in memory if m.total_mib is not None]
    utils = [g.util_pct for g in serving if g.util_pct is not None]
    # the age of what the row shows: the GPU readings' own time (frozen while nvidia-smi hangs or
    # fails, whatever the other sources do), else the connection's last word
    seen = s.gpus_at if s.gpus_at is not None else s.seen_at
    p = s.engine
    error = ""
    if s.conn.not_live and (why := s.why(now)):
        error = why
    elif p is not None and p.fatal:
        error = error_words(p.fatal)
    elif s.gpu_error:
        error = s.gpu_error
    elif s.gpus_in_error:  # a GPU in error is the row's last error, and its state says so
        error = s.gpu_error_words()
    elif s.container is not None and s.container.state in CONTAINER_ENDED_STATES and s.container.exit_code:
        error = f"container {s.container.state} ({s.container.exit_code})"
    label, alarm = s.engine_label, verdict is not None and verdict.alarm
    if alarm:  # a live, "ready" station whose tokens do not move is not shown as fine
        assert verdict is not None
        label = f"{verdict.state.upper()}" + (f" {mmss(now - verdict.since)}" if verdict.since is not None else "")
        error = error or verdict.words
    lines = health_lines(s)
    views = list(s.rails.views.values())
    rail = views[0] if views else None
    rail_bad = next((v for v in views if v.level), None)
    health = f"{lines[0].icon} {lines[0].text}" if lines else ""
    if rail_bad is not None and (not lines or (rail_bad.level == "error" and lines[0].level != "error")):
        health = f"rail {rail_bad.netdev} {rail_bad.words(now)}"
    level = "error" if (lines and lines[0].level == "error") or (rail_bad and rail_bad.level == "error") else (
        "warn" if lines or rail_bad else None)
    state_word = GPU_ERROR if s.conn.state == ConnState.LIVE and s.gpus_in_error else s.conn.state
    return FleetRow(s.name, s.rank, s.head, state_word, None if seen is None else now - seen,
                    p.phase if p else None, label, sum(used) if used else None,
                    sum(total) if total else None, max(utils) if utils else None,
                    p.transport if p else NcclTransport.UNKNOWN, one_line(error, 400),
                    stale=s.values_stale or s.stale(Aspect.GPUS, now), alarm=alarm,
                    health=one_line(health, 300), health_level=level,
                    rail=(rail_bad or rail).short() if rail else "", rail_level=(rail_bad or rail).level if rail else None)


def cells(row: FleetRow, expected: float | None, mem_width: int, palette: Palette = DEFAULT,
          columns: tuple[tuple[str, int], ...] = COLUMNS) -> tuple[Text, ...]:
    """The row's cells for ``columns`` (then the last error), styled by meaning (calm while
    loading, warning when stale, error when down)."""
    every = dict(zip([label for label, _ in COLUMNS] + [ERROR], _all_cells(row, expected, mem_width, palette),
                     strict=True))
    widths = dict(columns)
    if widths.get("state", 13) < 4:  # the icon alone
        every["state"] = every["state"][:1]
    for label, width in widths.items():  # a value cut at its column's edge says so
        if every[label].cell_len > width:
            every[label] = every[label].copy()
            every[label].truncate(width, overflow="ellipsis")
    return tuple(every[label] for label in [*widths, ERROR])


def _all_cells(row: FleetRow, expected: float | None, mem_width: int, palette: Palette) -> tuple[Text, ...]:
    icon, style = (("▲", "bold red") if row.state == GPU_ERROR else CONN_STYLE.get(row.state, ("?", "white")))
    name = Text(row.station, style="bold")
    name.append(f" r{row.rank}" + (" ·api" if row.head else ""), style="dim")
    state = Text(f"{icon} {row.state}", style=style)
    age = Text(age_text(row.age_s), style="yellow" if (row.age_s or 0) > 10 else "dim")
    phase_style = palette.calm if row.phase in LOADING_PHASES else PHASE_STYLE.get(row.phase or "", "dim")
    if row.alarm:
        phase_style = f"bold {palette.error}"
    engine = Text(row.engine or "—", style=phase_style if row.engine else "dim")
    if row.used_mib is not None and row.total_mib:
        figures = f" {row.used_mib / 1024:.0f}/{row.total_mib / 1024:.0f} GiB"
        room = mem_width - len(figures)
        if room >= 4:
            mem = bar(row.used_mib / row.total_mib, room, expected, palette)
            mem.append(figures)
        else:  # no room for a bar: the figures, coloured as the bar would be
            level = bar(row.used_mib / row.total_mib, 4, expected, palette).spans[0].style
            mem = Text(figures.strip(), style=level)
    else:
        mem = Text("n/a" if row.total_mib is None and row.used_mib is None else "—", style="dim")
    util = Text("—" if row.util_pct is None else f"{row.util_pct}%", style="" if row.util_pct is not None else "dim")
    nccl = Text(TRANSPORT_TINY.get(row.transport, row.transport), style=transport_style(row.transport, palette))
    if row.transport == NcclTransport.UNKNOWN and row.rail:  # the rail says what NCCL has under it
        nccl = Text(row.rail, style={"error": palette.error, "warn": palette.warn}.get(row.rail_level or "", "dim"))
    err = Text(row.error, style=palette.error) if row.error else Text("")
    if row.health:  # a GPU flag, an Xid or a rail in trouble is said beside (or as) the last error
        hstyle = palette.error if row.health_level == "error" else palette.warn
        err = (err + Text(" · ", style="dim") + Text(row.health, style=hstyle)) if row.error else Text(row.health,
                                                                                                      style=hstyle)
    if row.stale:  # old values: dimmed (the age column says how old)
        for cell in (engine, mem, util, nccl):
            cell.stylize("dim")
        age.stylize("bold yellow")
    return name, state, age, engine, mem, util, nccl, err


class FleetTable(DataTable):
    """One row per station; Enter opens its pane."""

    DEFAULT_CSS = """
    FleetTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open_station", "Open station", id="fleet-open"),
    ]

    class StationChosen(Message):
        """The operator asked for this station's full pane."""

        def __init__(self, station: str) -> None:
            super().__init__()
            self.station = station

    def __init__(self, serving_gpu: str | None = None, expected_frac: float | None = None, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.serving_gpu, self.expected_frac = serving_gpu, expected_frac  # the profile's GPU and its fill
        self._rows: dict[str, tuple] = {}
        self._widths: tuple[int, ...] = ()
        self._cols: tuple[tuple[str, int], ...] = ()
        self._keep_cursor = 0

    def _fitted(self) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...]]:
        width = self.size.width or self.app.size.width
        cols = layout_for(width)
        fixed = [w for _, w in cols]
        return cols, (*fixed, fill_width(width, fixed, minimum=12))

    def _columns(self) -> None:
        cols, widths = self._fitted()
        if (cols, widths) == (self._cols, self._widths):
            return
        relayout = cols != self._cols
        self._cols, self._widths = cols, widths
        keep = self.cursor_row
        rows = {} if relayout else dict(self._rows)  # other columns: the next update refills the rows
        self.clear(columns=True)
        for (label, _), width in zip([*cols, (ERROR, 0)], widths, strict=True):
            self.add_column(label, key=label, width=width)
        self._rows = {}
        for key, row in rows.items():
            self._rows[key] = row
            self.add_row(*row, key=key)
        self._keep_cursor = keep
        if self.row_count:
            self.move_cursor(row=min(keep, self.row_count - 1), animate=False)

    def on_resize(self) -> None:
        self._columns()

    def update_from(self, states: Iterable[StationState], now: float | None = None,
                    verdicts: dict[str, Verdict] | None = None) -> None:
        """Refresh every row from the stations' states (cells that did not change are left alone);
        ``verdicts``: each station's progress."""
        self._columns()
        pal = palette_of(self.app)
        cols = self._cols
        mem_width = dict(cols)["GPU memory"]
        filled = not self._rows
        for state in states:
            row = fleet_row(state, now, self.serving_gpu, self.expected_frac, (verdicts or {}).get(state.name))
            key = row.station
            new = cells(row, self.expected_frac, mem_width, pal, cols)
            old = self._rows.get(key)
            if old is None:
                self.add_row(*new, key=key)
            else:
                for (label, _), before, after in zip([*cols, (ERROR, 0)], old, new, strict=True):
                    if before != after:
                        self.update_cell(key, label, after)
            self._rows[key] = new
        if filled and self.row_count and self._keep_cursor:  # refilled after a change of columns
            self.move_cursor(row=min(self._keep_cursor, self.row_count - 1), animate=False)
            self._keep_cursor = 0

    def cursor_station(self) -> str | None:
        """The station of the row under the cursor."""
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value

    def action_open_station(self) -> None:
        if (key := self.cursor_station()) is not None:
            self.post_message(self.StationChosen(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """A click on a row (or Enter through DataTable's own select) opens it too."""
        event.stop()
        if event.row_key is not None and event.row_key.value is not None:
            self.post_message(self.StationChosen(event.row_key.value))
