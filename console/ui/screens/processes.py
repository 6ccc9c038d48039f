"""The process list (key ``P``, or ``:`` then "process"): every process on every station's GPUs as
nvitop and k9s users expect it — station, GPU, pid, user, container, CPU %, host RSS, GPU memory and
the whole command line — sorted by a column (``s`` cycles, a click on a header sorts by it, again
reverses), and ``t`` ends the selected process: TERM, then KILL if it is still there after a grace
period, after a confirmation that names it; off in ``--read-only``. Each signal goes only to the
process the row showed (its pid, start time and command line checked on the station just before);
pid 1, the console's own process, a row whose process was not read and a pid no longer on the GPU
list are refused with the reason.

Which processes hold a GPU comes from the station's state (nvidia-smi's compute apps, streamed by its
monitor); who they are is read by ``console.service.processes`` (one ``ps`` per station, in a worker of
this screen, again every few seconds); the signal goes through that service too. The screen does no
I/O of its own, and every outside word passes ``console.sanitize``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Header, Label, Static

from console.config import Config
from console.durations import NONE
from console.sanitize import one_line
from console.service.processes import GRACE_S, ProcessDetail, end_process, never_signalled, read_processes
from console.service.steps import ReadOnlyError
from console.ui.widgets.fitted_footer import FittedFooter

REFRESH_S = 3.0
# (column key, label, numeric: sorted biggest first)
COLUMNS: tuple[tuple[str, str, bool], ...] = (
    ("station", "station", False), ("gpu", "GPU", False), ("pid", "PID", False), ("user", "user", False),
    ("container", "container", False), ("cpu", "CPU %", True), ("rss", "RSS", True), ("gpu_mem", "GPU mem", True),
    ("command", "command", False))
SORTABLE = ("gpu_mem", "cpu", "rss", "pid", "user", "container", "station")


@dataclass(frozen=True)
class ProcRow:
    station: str
    gpu: str
    pid: int
    gpu_mib: float | None
    detail: ProcessDetail | None  # None: not read yet, or gone since nvidia-smi saw it

    @property
    def key(self) -> str:
        return f"{self.station}:{self.pid}"

    def sort_value(self, column: str) -> tuple:
        d = self.detail
        value = {"gpu_mem": self.gpu_mib, "cpu": d.cpu_pct if d else None, "rss": d.rss_mib if d else None,
                 "pid": self.pid, "user": d.user if d else None, "container": (d.container or "") if d else None,
                 "station": self.station}[column]
        return (value is None, value if value is not None else 0)

    def name(self) -> str:
        """The process as the confirmation names it."""
        d = self.detail
        cmd = one_line(d.command, 80) if d else "(not read yet)"
        who = f", user {one_line(d.user, 32)}" if d else ""
        where = f", container {one_line(d.container, 40)}" if d and d.container else (", on the host" if d else "")
        mem = f", {self.gpu_mib / 1024:.1f} GiB on GPU {self.gpu}" if self.gpu_mib else ""
        return f"pid {self.pid} on {self.station}{who}{where}{mem}: {cmd}"


def _mib(v: float | None) -> str:
    return NONE if v is None else (f"{v / 1024:.1f} GiB" if v >= 1024 else f"{v:.0f} MiB")


class ConfirmEnd(ModalScreen[bool]):
    """End this process? Names it, says what will be sent; Cancel has the focus (Enter on it is safe)."""

    DEFAULT_CSS = """
    ConfirmEnd { align: center middle; }
    ConfirmEnd > Vertical { width: 80%; max-width: 110; height: auto; border: thick $error; padding: 0 1;
                            background: $surface; }
    ConfirmEnd #pe-buttons { height: 3; align-horizontal: right; }
    ConfirmEnd Button { margin-left: 1; }
    """
    BINDINGS = [Binding("escape", "dismiss_no", "Cancel", id="process-end-cancel"),
                Binding("y", "dismiss_yes", "End it", id="process-end-yes", show=False)]

    def __init__(self, row: ProcRow) -> None:
        super().__init__()
        self.row = row

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("End this process?", style="bold"))
            yield Static(Text(self.row.name()), id="pe-what")
            yield Static(Text(f"Sends TERM; if it is still there after {GRACE_S:g} s, KILL. What it holds on the "
                              "GPU is freed when it exits.  (y: end it · Esc: cancel)", style="italic"))
            with Horizontal(id="pe-buttons"):
                yield Button("End it (TERM, then KILL)", id="pe-yes", variant="error")
                yield Button("Cancel", id="pe-no", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#pe-no", Button).focus()

    @on(Button.Pressed, "#pe-yes")
    def action_dismiss_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#pe-no")
    def action_dismiss_no(self) -> None:
        self.dismiss(False)


class ProcessScreen(Screen):
    TITLE = "GPU processes"
    SUB_TITLE = "who holds the GPUs"
    PALETTE_NAME = "processes"
    DEFAULT_CSS = """
    ProcessScreen #proc-status { height: auto; max-height: 3; padding: 0 1; text-wrap: nowrap;
                                 text-overflow: ellipsis; }
    ProcessScreen #proc-table { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="processes-back"),
        Binding("s", "next_sort", "Sort", id="processes-sort", tooltip="Sort by the next column (a header click too)"),
        Binding("t", "end", "End process", id="processes-end",
                tooltip="TERM, then KILL after a grace period, for the selected process (asks first)"),
        Binding("r", "reload", "Refresh", id="processes-refresh", tooltip="Read the processes again now"),
    ]

    def __init__(self, config: Config, read_only: bool = False, station: str | None = None) -> None:
        super().__init__()
        self.config, self.read_only, self.first_station = config, read_only, station
        self.details: dict[str, dict[int, ProcessDetail]] = {}
        self.errors: dict[str, str] = {}
        self.sort, self.reverse = "gpu_mem", False
        self.last = ""  # what the last signal did (stays on screen, not only a toast)
        self.reads = 0  # completed reads (tests wait on it)
        self._keys: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="proc-status")
        yield DataTable(id="proc-table", cursor_type="row", zebra_stripes=True)
        yield FittedFooter()

    def on_mount(self) -> None:
        table = self.query_one("#proc-table", DataTable)
        for key, label, _num in COLUMNS:
            table.add_column(label, key=key)
        self._fill()
        self.action_reload()
        self.set_interval(REFRESH_S, self.action_reload)

    # ------------------------------------------------------------ the rows

    def rows(self) -> list[ProcRow]:
        """Every GPU process of every station's state, with what ps said about it, in the chosen order."""
        out: list[ProcRow] = []
        stations = getattr(self.app, "stations", {})
        for name, st in stations.items():
            index = {g.uuid: str(g.index) for g in st.gpus}
            for a in st.apps:
                out.append(ProcRow(name, index.get(a.gpu_uuid, "?"), a.pid, a.used_memory_mib,
                                   self.details.get(name, {}).get(a.pid)))
        numeric = dict((k, n) for k, _l, n in COLUMNS)[self.sort]

        def order(r: ProcRow) -> tuple:
            unknown, v = r.sort_value(self.sort)
            return (unknown, -v if numeric and not unknown else v)  # numbers biggest first; unknown last
        out.sort(key=order)
        return out[::-1] if self.reverse else out

    def selected(self) -> ProcRow | None:
        table = self.query_one("#proc-table", DataTable)
        if not table.row_count or not self._keys:
            return None
        key = self._keys[min(table.cursor_row, len(self._keys) - 1)]
        return next((r for r in self.rows() if r.key == key), None)

    def _fill(self) -> None:
        table = self.query_one("#proc-table", DataTable)
        keep = self._keys[min(table.cursor_row, len(self._keys) - 1)] if self._keys and table.row_count else None
        if keep is None and self.first_station:
            keep = next((r.key for r in self.rows() if r.station == self.first_station), None)
        table.clear()
        self._keys = []
        for r in self.rows():
            d = r.detail
            cells = [r.station, r.gpu, str(r.pid),
                     Text(one_line(d.user, 32)) if d else NONE,  # outside words: Text, never markup
                     Text(one_line(d.container, 40)) if d and d.container else ("host" if d else NONE),
                     f"{d.cpu_pct:.1f}" if d else NONE, _mib(d.rss_mib) if d else NONE, _mib(r.gpu_mib),
                     Text(one_line(d.command, 300)) if d else Text("(not read yet)", style="dim")]
            table.add_row(*cells, key=r.key)
            self._keys.append(r.key)
        if keep in self._keys:
            table.move_cursor(row=self._keys.index(keep))
        self._status()

    def _status(self) -> None:
        label = dict((k, lbl) for k, lbl, _n in COLUMNS)[self.sort]
        text = Text()
        n = len(self._keys)
        text.append(f"{n} process{'' if n == 1 else 'es'} on the GPUs · sorted by {label}"
                    + (" (reversed)" if self.reverse else "") + " · s: sort  t: end (TERM, then KILL)  r: refresh")
        if self.read_only:
            text.append("  · read-only: ending a process is disabled", style="bold yellow")
        for name, err in sorted(self.errors.items()):
            text.append(f"\n{name}: processes not read: {one_line(err, 160)}", style="red")
        if self.last:
            text.append("\nlast: ", style="bold")
            text.append(one_line(self.last, 200))
        self.query_one("#proc-status", Static).update(text)

    # ------------------------------------------------------------ keys

    def action_next_sort(self) -> None:
        self.sort = SORTABLE[(SORTABLE.index(self.sort) + 1) % len(SORTABLE)] if self.sort in SORTABLE else SORTABLE[0]
        self.reverse = False
        self._fill()

    @on(DataTable.HeaderSelected, "#proc-table")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        if column not in SORTABLE:
            return
        self.reverse = not self.reverse if column == self.sort else False
        self.sort = column
        self._fill()

    def action_reload(self) -> None:
        self._read()

    @work(group="processes-read", exclusive=True, exit_on_error=False)
    async def _read(self) -> None:
        stations = getattr(self.app, "stations", {})
        for name, st in stations.items():
            pids = [a.pid for a in st.apps]
            if not pids:
                self.details.pop(name, None)
                continue
            try:
                self.details[name] = await read_processes(self.config, name, pids)
                self.errors.pop(name, None)
            except Exception as exc:  # noqa: BLE001 - shown on the screen, never a silent dead read
                self.errors[name] = str(exc) or exc.__class__.__name__
        self.reads += 1
        self._fill()

    def action_end(self) -> None:
        if self.read_only:
            self.notify("read-only mode: ending a process is disabled (--read-only)", severity="warning")
            return
        row = self.selected()
        if row is None:
            self.notify("No process selected.", timeout=3)
            return
        why = self._refusal(row)
        if why:
            self.last = why
            self._status()
            self.notify(why, severity="warning", timeout=6, markup=False)
            return
        self.app.push_screen(ConfirmEnd(row), lambda yes: self._confirmed(row) if yes else None)

    def _refusal(self, row: ProcRow) -> str | None:
        """Why this row's process is not offered for a signal, or None."""
        why = never_signalled(self.config, row.station, row.pid)
        if why:
            return why
        if row.detail is None or not row.detail.fingerprint:
            return (f"pid {row.pid} on {row.station}: who it is was not read yet (start time, command line): "
                    "not signalled (r: read again)")
        st = getattr(self.app, "stations", {}).get(row.station)
        if st is None or not any(a.pid == row.pid for a in st.apps):
            return f"pid {row.pid} on {row.station} is no longer on the GPU list: not signalled"
        return None

    def _confirmed(self, row: ProcRow) -> None:
        why = self._refusal(row)  # the list may have moved on while the dialog was open
        if why:
            self.last = why
            self._status()
            return
        self._end(row)

    @work(group="processes-end", exit_on_error=False)
    async def _end(self, row: ProcRow) -> None:
        if row.detail is None:  # _refusal saw to it; kept for the type
            return
        self.last = f"ending pid {row.pid} on {row.station}: checking it is still the process shown, then TERM ..."
        self._status()
        try:
            res = await end_process(self.config, row.station, row.detail, read_only=self.read_only)
        except ReadOnlyError as exc:
            self.last = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown on the screen, never a silent dead worker
            self.last = f"pid {row.pid} on {row.station}: not signalled: {exc}"
        else:
            self.last = res.words
            self.notify(one_line(res.words, 200), severity="information" if res.ended else "error",
                        timeout=8, markup=False)
        self._status()
        self._read()
