"""The incident ledger on screen (``I`` on the dashboard): one row per incident, newest first, the
stalls of the last hour under them, and the chosen incident in full (its verdict, next step and
where its bundle went); ``p`` replays the chosen incident's window (console/ui/screens/replay.py). The ledger is read in a thread (SQLite may wait on another console)."""

from __future__ import annotations

import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Static

from console.commands.incidents import _length, _when, show
from console.incidents.recorder import stall_words
from console.incidents.store import Incident, Ledger, LedgerError
from console.sanitize import one_line
from console.ui.widgets.fitted_footer import FittedFooter


class IncidentsScreen(Screen):
    DEFAULT_CSS = """
    IncidentsScreen #incidents-table { height: 1fr; }
    IncidentsScreen #incident-detail { height: auto; max-height: 12; border: round $primary; padding: 0 1; }
    IncidentsScreen #incident-stalls { height: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="incidents-back"),
        Binding("r", "reload", "Reload", id="incidents-reload", tooltip="Read the ledger again"),
        Binding("p", "replay", "Replay", id="incidents-replay", tooltip="Replay the chosen incident's window"),
    ]

    def __init__(self, ledger: Ledger | None = None) -> None:
        super().__init__()
        self.ledger = ledger or Ledger()
        self.rows: list[Incident] = []
        self.chosen: Incident | None = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=getattr(self.app, "_clock", True))
        yield Static("reading the ledger…", id="incident-stalls")
        yield DataTable(id="incidents-table", cursor_type="row")
        yield Static("", id="incident-detail")
        yield FittedFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("ID", "Kind", "Start", "Length", "Stations", "Action", "Verdict")
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True)
    def _load(self) -> None:
        try:
            rows, stalls = self.ledger.incidents(), self.ledger.stalls(time.time() - 86400)
            err = None
        except LedgerError as exc:
            rows, stalls, err = [], [], str(exc)
        self.app.call_from_thread(self._show, rows, stalls, err)

    def _show(self, rows: list[Incident], stalls, err: str | None) -> None:
        self.rows = rows
        table = self.query_one(DataTable)
        table.clear()
        for i in rows:
            table.add_row(Text(str(i.id)), Text(i.kind), Text(_when(i.start)), Text(_length(i)),
                          Text(",".join(i.stations)), Text(i.action), Text(one_line(i.verdict, 80)), key=str(i.id))
        words = err or (f"{len(rows)} incident{'s' if len(rows) != 1 else ''} in the ledger ({self.ledger.path}); "
                        + (stall_words(stalls, time.time()) or "no stalls in the last hour"))
        self.query_one("#incident-stalls", Static).update(Text(words))
        self._detail(rows[0] if rows else None)

    def _detail(self, i: Incident | None) -> None:
        self.chosen = i
        self.query_one("#incident-detail", Static).update(Text(show(i) if i else "no incident recorded yet"))

    def on_data_table_row_highlighted(self, msg: DataTable.RowHighlighted) -> None:
        key = msg.row_key.value if msg.row_key is not None else None
        self._detail(next((i for i in self.rows if str(i.id) == key), None))

    def action_replay(self) -> None:
        from console.ui.screens.replay import ReplayScreen

        i = self.chosen
        if i is None:
            self.notify("no incident chosen", severity="warning")
            return
        if not i.bundle:
            self.notify(f"incident {i.id} has no bundle to replay ({one_line(i.note or i.action, 200)})",
                        severity="warning", markup=False)
            return
        config = getattr(self.app, "config", None)
        window_s = config.ui.progress_window_s if config is not None else 30.0
        self.app.push_screen(ReplayScreen(i.bundle, window_s, i.id))
