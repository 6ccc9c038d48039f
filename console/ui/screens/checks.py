"""The checks screen: every link/preflight check in a table, the selected one's evidence and fix,
rerun one (``r``) or all (``a``), RDMA validation (``v``, cancel with ``c``).

Checks run as async workers on the app's loop (all I/O is awaited through the transports; nothing
blocks). When a pass ends the screen posts ``ChecksDone`` to the app, which shows each station's
summary on its pane (``station_summary``).

Summaries, evidence and fixes quote remote command output: they are sanitized and shown as
``Text`` (a DataTable string cell would be parsed as markup).
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from console.config import Config
from console.durations import time_of_day
from console.remote import channels
from console.remote.channels import ChannelWait
from console.remote.transport import Transport
from console.sanitize import clean, one_line, plain
from console.station.checks import CheckResult, planned, run_checks, station_summary, summary_line
from console.station.rdma import RdmaRun, validate_rdma
from console.ui.fit_text import fill_width
from console.ui.widgets.fitted_footer import FittedFooter

STYLE = {"pass": "bold green", "fail": "bold red", "warn": "bold yellow", "skip": "dim", "running": "cyan"}
# Row order once a pass has finished: what needs the operator first.
STATUS_ORDER = {"fail": 0, "warn": 1, "running": 2, "skip": 3, "pass": 4}
COLUMNS = ("status", "check", "station", "summary")


class ChecksDone(Message):
    """A pass (all checks or a rerun) finished at ``at``; ``results`` is the screen's whole current table."""

    def __init__(self, results: list[CheckResult], at: float | None = None) -> None:
        super().__init__()
        self.results = results
        self.at = time.time() if at is None else at

    def badge(self, station: str, stale: str | None = None) -> Text:
        """The pane's badge: ``checks 14:03:41: 1 FAIL, 18 pass``, the time it ran; dimmed and saying why
        once ``stale`` (the station's connection changed since: the results may no longer hold)."""
        text = self.summary_text(station).removeprefix("checks: ")
        when = f"checks {time_of_day(self.at)}"
        if stale:
            return Text(f"{when} (before {stale}; a to rerun): {text}", style="dim")
        return Text(f"{when}: {text}")

    def summary(self, station: str) -> dict[str, int]:
        return station_summary(self.results, station)

    def summary_text(self, station: str) -> str:
        """What the station's pane shows, e.g. ``checks: 1 FAIL, 1 warn, 18 pass``."""
        return summary_line(self.summary(station))


def rdma_as_check(run: RdmaRun) -> CheckResult:
    return CheckResult(run.id, f"{run.client}->{run.server} {run.rail} {run.memory}", run.status, run.summary,
                       run.evidence, run.fix)


def _key(r: CheckResult) -> str:
    return f"{r.id}@{r.station}"


class ChecksScreen(Screen):
    """Failures first once a pass has finished (the cursor on the first one unless the operator
    moved it); the summary column takes the width the others leave; the table has the focus."""

    TITLE = "Link and preflight checks"
    SUB_TITLE = "is the cable path healthy end to end?"
    AUTO_FOCUS = "#checks-table"  # Down / j work at once (the app's own AUTO_FOCUS names a pane's log)
    DEFAULT_CSS = """
    ChecksScreen #checks-table { height: 1fr; min-height: 8; }
    ChecksScreen #checks-detail { height: 1fr; border-top: solid $primary; padding: 0 1; }
    ChecksScreen #checks-status { height: 1; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="checks-back"),
        Binding("r", "rerun_one", "Rerun check", id="checks-rerun"),
        Binding("a", "rerun_all", "Rerun all", id="checks-rerun-all"),
        Binding("v", "validate_rdma", "Validate RDMA", id="checks-validate-rdma"),
        Binding("c", "cancel", "Cancel", id="checks-cancel"),
        Binding("j", "move(1)", "Next check", id="checks-next", show=False),
        Binding("k", "move(-1)", "Previous check", id="checks-previous", show=False),
    ]

    def __init__(self, config: Config, transports: dict[str, Transport] | None = None,
                 results: list[CheckResult] | None = None, autostart: bool = True) -> None:
        super().__init__()
        self.config = config
        self.transports = transports
        self.results: dict[str, CheckResult] = {_key(r): r for r in results or []}
        self.autostart = autostart
        self.busy = False
        self._order: dict[str, int] = {k: i for i, k in enumerate(self.results)}  # plan order within a status
        self._moved = False  # the operator moved the cursor: keep their row across re-sorts
        self._widths: tuple[int, ...] = ()
        self.ran_at: float | None = None  # when the last pass ended (the status line says it)

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical():
            yield Static("", id="checks-status")
            yield DataTable(id="checks-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="checks-detail"):
                yield Static("", id="checks-evidence")
        yield FittedFooter()

    def on_mount(self) -> None:
        self._rebuild()
        if self.autostart:
            self.action_rerun_all()
        else:
            self._status()

    def on_resize(self) -> None:
        if self._column_widths() != self._widths:
            self._rebuild()

    # ------------------------------------------------------------ table

    def _cells(self, r: CheckResult) -> tuple:
        return (Text(r.status.upper(), style=STYLE.get(r.status, "")), plain(one_line(r.id, 60)),
                plain(one_line(r.station, 60)), plain(one_line(r.summary, 500)))

    def _column_widths(self) -> tuple[int, ...]:
        """status, check and station as wide as their longest value; summary takes the rest."""
        rows = list(self.results.values())
        check = min(28, max([len("check"), *(len(one_line(r.id, 60)) for r in rows)]))
        station = min(28, max([len("station"), *(len(one_line(r.station, 60)) for r in rows)]))
        return (7, check, station, fill_width(self.size.width or self.app.size.width, [7, check, station]))

    def _sorted(self) -> list[CheckResult]:
        return sorted(self.results.values(), key=lambda r: (STATUS_ORDER.get(r.status, 9),
                                                            self._order.get(_key(r), 1 << 30)))

    def _rebuild(self, first_failure: bool = False) -> None:
        """Every row again, failures first, in columns fitted to the screen. The cursor stays on the
        operator's row; ``first_failure`` (a pass ended and the operator has not moved) puts it on
        the first row, which is the first failure when there is one."""
        table = self.query_one(DataTable)
        keep = None if first_failure and not self._moved else self._selected_key()
        self._widths = self._column_widths()
        table.clear(columns=True)
        for name, width in zip(COLUMNS, self._widths, strict=True):
            table.add_column(name, key=name, width=width)
        rows = self._sorted()
        for r in rows:
            table.add_row(*self._cells(r), key=_key(r))
        keys = [_key(r) for r in rows]
        if rows:
            row = keys.index(keep) if keep in keys else 0
            table.move_cursor(row=row, animate=False)
            self._detail(rows[row])

    def _show(self, r: CheckResult) -> None:
        table = self.query_one(DataTable)
        key = _key(r)
        self.results[key] = r
        self._order.setdefault(key, len(self._order))
        if key in table.rows:
            for col, value in zip(COLUMNS, self._cells(r), strict=True):
                table.update_cell(key, col, value)
        else:
            table.add_row(*self._cells(r), key=key)
        if table.cursor_row is not None and table.row_count and self._selected_key() == key:
            self._detail(r)

    def _selected_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _detail(self, r: CheckResult | None) -> None:
        body = Text()
        if r is not None:
            body.append(f"{one_line(r.id)}  {one_line(r.station)}  ", style="bold")
            body.append(one_line(r.status.upper()) + "\n", style=STYLE.get(r.status, ""))
            body.append(clean(r.summary) + "\n")
            if r.fix:
                body.append("\nFix: ", style="bold")
                body.append(clean(r.fix) + "\n")
            if r.evidence:
                body.append("\nEvidence\n", style="bold")
                body.append(clean(r.evidence))
        self.query_one("#checks-evidence", Static).update(body)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is not None:
            self._detail(self.results.get(event.row_key.value))

    def on_key(self, event) -> None:
        if event.key in ("up", "down", "j", "k", "pageup", "pagedown", "home", "end"):
            self._moved = True

    def on_click(self) -> None:
        self._moved = True

    def action_move(self, step: int) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            self._moved = True
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + step)))

    def _status(self, note: str = "") -> None:
        counts = {s: sum(r.status == s for r in self.results.values()) for s in ("fail", "warn", "pass", "skip")}
        running = sum(r.status == "running" for r in self.results.values())
        text = Text(f"running ({running} left)... " if self.busy and running else ("running... " if self.busy else ""))
        for s, n in counts.items():
            text.append(f"{n} {s}  ", style=STYLE[s] if n else "dim")
        if self.ran_at is not None and not self.busy:
            text.append(f"ran {time_of_day(self.ran_at)}  ", style="dim")
        if note:
            text.append(one_line(note, 300), style="italic")
        self.query_one("#checks-status", Static).update(text)

    # ------------------------------------------------------------ actions

    def action_rerun_all(self) -> None:
        self._run(None)

    def action_rerun_one(self) -> None:
        key = self._selected_key()
        if key is None:
            return
        r = self.results[key]
        if " " in r.station:  # an RDMA validation row: rerun the validation
            self.action_validate_rdma()
            return
        self._run([key])

    def action_cancel(self) -> None:
        self.workers.cancel_group(self, "checks")
        self.busy = False
        for r in list(self.results.values()):
            if r.status == "running":
                self._show(CheckResult(r.id, r.station, "skip", "cancelled", r.evidence, r.fix))
        self._status("cancelled")

    def _run(self, only: list[str] | None) -> None:
        self.busy = True
        self._status()
        self._checks_worker(only)

    @work(exclusive=True, group="checks")
    async def _checks_worker(self, only: list[str] | None) -> None:
        for id_, label in planned(self.config, only):
            key = f"{id_}@{label}"
            old = self.results.get(key)
            self._show(CheckResult(id_, label, "running", "running...", old.evidence if old else "",
                                   old.fix if old else ""))
        try:
            results = await run_checks(self.config, self.transports, only=only, on_result=self._live)
        finally:
            self.busy = False
        for r in results:
            self._show(r)
        self._rebuild(first_failure=True)
        self._status()
        self.ran_at = time.time()
        self._status()
        self.app.post_message(ChecksDone(list(self.results.values()), self.ran_at))

    def _live(self, result: CheckResult) -> None:
        """One check finished (called on the app's loop by run_checks)."""
        self._show(result)
        self._status()

    def action_validate_rdma(self) -> None:
        if len(self.config.stations) < 2:
            self.notify("RDMA validation needs two stations", severity="warning")
            return
        self.busy = True
        self._status("RDMA validation: perftest between the rails (c cancels, the server is cleaned up)")
        self._rdma_worker()

    @work(exclusive=True, group="checks")
    async def _rdma_worker(self) -> None:
        def progress(kind: str, detail: dict) -> None:
            if kind == "run-done":
                pass
            elif kind == "server-ready":
                self._status(f"{detail['rail']} {detail['memory']} memory: server ready on {detail['station']}")

        def channel(wait: ChannelWait) -> None:  # the console's queue, said as such
            self._status(wait.text() if wait.state == "waiting" else "RDMA validation: perftest between the rails")

        try:
            with channels.on_wait(channel):
                runs = await validate_rdma(self.config, self.transports, on_event=progress)
        finally:
            self.busy = False
        for run in runs:
            self._show(rdma_as_check(run))
        self._rebuild(first_failure=True)
        self._status()
        self.ran_at = time.time()
        self._status()
        self.app.post_message(ChecksDone(list(self.results.values()), self.ran_at))
