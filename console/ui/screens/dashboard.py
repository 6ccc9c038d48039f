"""The dashboard: the stations side by side (or the fleet table), the diagnosis panel, the keys.

A ``Screen`` of its own (the app's default screen) that owns its bindings, as posting and
harlequin lay theirs out: its keys are simply not in the binding chain of a screen pushed over
it (chat, checks, bench), so the app needs no ``check_action`` to hide them. The app keeps the
services (one per station, the serving monitor, the diagnosis) and the stations' states: it
applies each station message to its state, then tells this screen which station and which
aspects changed (``station_changed``); the panes and the fleet table render those states
(``app.panes`` is this screen's).

Views: ``grid`` (every pane, 1-3 columns), ``fleet`` (one row per station: the default from 5
stations, ``f`` at any count) and ``station`` (one pane full size, opened from the fleet with
Enter; Esc goes back to the fleet).
"""

from __future__ import annotations

import math
from typing import Literal

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import Screen
from textual.widgets import Header, Static

from console.config import Config, gpus_per_station
from console.station.aspects import Aspect
from console.station.state import Stations
from console.station.verdict import Judgement
from console.ui import clock
from console.ui.incidents_hook import incidents_tick
from console.ui.memory_guard_hook import memory_guard_tick
from console.ui.widgets.diagnosis import DiagnosisPanel
from console.ui.widgets.fitted_footer import FittedFooter
from console.ui.widgets.fleet_table import FleetTable
from console.ui.widgets.progress_banner import ProgressBanner
from console.ui.widgets.serving_panel import ServingPanel
from console.ui.widgets.station_pane import StationPane

ENGINE_NAME = {"vllm": "vLLM", "sglang": "SGLang"}
FLEET_FROM = 5  # stations from which the fleet table is the first view
View = Literal["grid", "fleet", "station"]


def setup_title(config: Config, read_only: bool = False) -> str:
    """What the header says is being served, derived from the stations configured (a 2x profile
    on 4 stations is "4x GB300 · vLLM TP=4", never the profile's "2x" name). DEMO comes first so a
    narrow header keeps it."""
    p = config.profile
    n = len(config.stations)
    gpus = gpus_per_station(p) * n
    model = p.model.rsplit("/", 1)[-1] or p.name
    gpu = p.gpu.name.removeprefix("NVIDIA ").strip()
    parts = ["DEMO"] if config.simulated else []
    parts += [f"{model} on {gpus}x {gpu}", f"{ENGINE_NAME.get(p.engine, p.engine)} TP={config.tensor_parallel}",
              f"{n} station{'s' if n != 1 else ''}"]
    if read_only:
        parts.append("read-only")
    return " · ".join(parts)


def expected_gpu_fill(profile) -> float | None:
    """The serving GPU's memory fill once loaded, as the profile expects it: vLLM claims its
    --gpu-memory-utilization up front (0.93: 231 of 251 GiB is normal, not a warning)."""
    util = profile.serving.get("gpu_memory_utilization")
    if util:
        return float(util)
    if profile.gpu.memory_total_mib and profile.gpu.loaded_gib:
        return profile.gpu.loaded_gib * 1024 / profile.gpu.memory_total_mib
    return None


def css_id(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)


class DashboardScreen(Screen):
    """Every station of the config; the diagnosis panel below them (``d``)."""

    AUTO_FOCUS = "StationPane LogView"
    DEFAULT_CSS = """
    DashboardScreen #demo-banner { height: 1; background: $warning; color: $background; text-style: bold;
                                   content-align: center middle; display: none; }
    DashboardScreen.-demo #demo-banner { display: block; }
    DashboardScreen #stations { grid-gutter: 0 1; height: 1fr; }
    DashboardScreen #fleet { display: none; }
    DashboardScreen.-fleet #fleet { display: block; }
    DashboardScreen.-fleet #stations { display: none; }
    DashboardScreen.-station #stations StationPane { display: none; }
    DashboardScreen.-station #stations StationPane.-chosen { display: block; }
    DashboardScreen #diagnosis { dock: bottom; height: 16; border: round $warning; display: none; }
    DashboardScreen.-show-diagnosis #diagnosis { display: block; }
    DashboardScreen StationPane.-unreachable { border: round $error; }
    DashboardScreen StationPane.-failed { border: round $error; }
    """
    # Binding ids are a contract with users' [keys] tables: keep them.
    BINDINGS = [
        Binding("slash", "filter", "Filter", id="filter", tooltip="Filter the focused station's log"),
        # T and r are offered where they apply (a pane waiting for a host key, a station down) and in
        # the help; the footer keeps its room for the keys that always do something
        Binding("T", "app.trust", "Trust key", id="trust", show=False, tooltip="Review an unknown or changed host key"),
        Binding("r", "app.reconnect", "Reconnect", id="reconnect", show=False,
                tooltip="Retry stations that are down now"),
        Binding("k", "checks", "Checks", id="checks", tooltip="Link and preflight checks, RDMA validation"),
        Binding("n", "doctor", "Doctor", id="doctor", tooltip="NCCL troubleshooting workbench (the ladder)"),
        Binding("h", "app.hang_evidence", "Hang", id="hang",
                tooltip="Evidence from every rank at the same moment: stacks, flight recorder, NCCL RAS, counters"),
        Binding("i", "investigate", "Investigate", id="investigate",
                tooltip="Open the NCCL workbench on the selected NCCL finding"),
        Binding("p", "toggle_processes", "Processes", id="processes",
                tooltip="The processes on the focused station's GPUs (pid, name, memory), as nvitop lists them"),
        Binding("P", "process_list", "Process list", id="process-list", show=False,
                tooltip="Every GPU process: user, container, command, CPU %, RSS; sort; end one (TERM, then KILL)"),
        Binding("d", "toggle_diagnosis", "Diagnosis", id="diagnosis", tooltip="Findings from every station's log"),
        Binding("f", "toggle_fleet", "Fleet", id="fleet", tooltip="One row per station / the panes side by side"),
        Binding("c", "chat", "Chat", id="chat", tooltip="Chat with the served model"),
        Binding("b", "bench", "Bench", id="bench", tooltip="Concurrency sweep against NVIDIA's table"),
        Binding("L", "service('launch')", "Launch", id="launch", tooltip="Start workers, then the head"),
        Binding("S", "service('stop')", "Stop", id="stop", tooltip="Stop the head, then the workers"),
        Binding("R", "service('restart')", "Restart", id="restart", tooltip="docker start workers, then head"),
        Binding("I", "app.incidents", "Incidents", id="incidents", show=False,
                tooltip="The incident ledger: wedges, stuck start-ups, stalls, where their evidence went"),
        Binding("escape", "back_to_fleet", "Back to fleet", id="fleet-back",
                tooltip="Back from one station's pane to the fleet table"),
    ]

    def __init__(self, config: Config, stations: Stations) -> None:
        super().__init__(id="dashboard")
        self.config = config
        self.stations = stations  # the app's: read here, applied to by the app
        self.panes: dict[str, StationPane] = {}
        self.view: View = "fleet" if len(config.stations) >= FLEET_FROM else "grid"
        self.chosen: str | None = None  # the station shown alone (station view)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=getattr(self.app, "_clock", True))
        yield Static("DEMO — simulated stations, nothing here touches real hardware", id="demo-banner")
        yield ProgressBanner(id="progress-banner")  # wedged or stuck, with the evidence
        p = self.config.profile
        with Grid(id="stations"):
            for st in sorted(self.config.stations, key=lambda s: s.rank):
                pane = StationPane(st, self.stations[st.name], unified=p.gpu.unified_memory, engine=p.engine,
                                   gpudirect=p.link.gpudirect, serving_gpu=p.gpu.name, expected_frac=expected_gpu_fill(p),
                                   id=f"station-{css_id(st.name)}")
                self.panes[st.name] = pane
                yield pane
        yield FleetTable(serving_gpu=p.gpu.name, expected_frac=expected_gpu_fill(p), id="fleet")
        yield DiagnosisPanel(id="diagnosis")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.set_class(self.config.simulated, "-demo")
        self._show_view(self.view)
        self.set_interval(0.5, self._refresh_fleet)
        self.set_interval(1.0, self._tick_ages)

    # ------------------------------------------------------------------ the stations' states

    def station_changed(self, name: str, aspects: frozenset[Aspect]) -> None:
        """The app applied a message to station ``name``'s state: redraw what these aspects show
        (the fleet table follows on its own timer: its ages move anyway)."""
        if not aspects:
            return
        if pane := self.panes.get(name):
            pane.show_state(aspects)
        if Aspect.CONN in aspects:  # the diagnosis says whose log it cannot read
            for panel in self.query(DiagnosisPanel):
                panel.set_unread(self.stations.unreadable_logs())

    def _tick_ages(self) -> None:
        for pane in self.panes.values():
            pane.tick()

    # ------------------------------------------------------------------ views

    def _layout_grid(self) -> None:
        n = 1 if self.view == "station" else len(self.panes)
        cols = 1 if n == 1 else (2 if n <= 4 else 3)
        grid = self.query_one("#stations", Grid)
        grid.styles.grid_size_columns = cols
        grid.styles.grid_size_rows = max(1, math.ceil(n / cols))

    def _show_view(self, view: View, station: str | None = None) -> None:
        self.view = view
        self.chosen = station if view == "station" else None
        self.set_class(view == "fleet", "-fleet")
        self.set_class(view == "station", "-station")
        for name, pane in self.panes.items():
            pane.set_class(name == self.chosen, "-chosen")
        self._layout_grid()
        if view == "fleet":
            self._refresh_fleet()
            self.query_one(FleetTable).focus()
        elif view == "station" and station in self.panes:
            self.panes[station].log_pane.log_widget.focus()
        self.refresh_bindings()

    def _refresh_fleet(self) -> None:
        if self.view == "fleet":
            self.query_one(FleetTable).update_from(self.stations.by_rank(), verdicts=self.stations.judged.stations)

    def progress_judged(self, judged: Judgement) -> None:
        """The progress judge ticked (console/station/progress.py ProgressJudge, which stored its
        judgement on the fleet): show the service's verdict in the banner and the serving panel's
        health (the fleet rows read it on their timer), and tick the hooks that follow the judge."""
        now = judged.at if judged.at is not None else clock.now()
        incidents_tick(self, judged, now)  # the flight recorder: incidents, stalls (the pane's words)
        memory_guard_tick(self, now)  # GB10: MemAvailable under the floor during a start-up
        for banner in self.query(ProgressBanner):  # none yet while the screen's children mount
            banner.show(judged.service, now)
        for panel in self.query(ServingPanel):
            panel.set_progress(judged.service)

    def reveal(self, station: str) -> None:
        """Make this station's pane visible (the fleet view opens it)."""
        if self.view != "grid" and station in self.panes:
            self._show_view("station", station)

    def on_fleet_table_station_chosen(self, msg: FleetTable.StationChosen) -> None:
        self._show_view("station", msg.station)

    def action_toggle_fleet(self) -> None:
        self._show_view("grid" if self.view == "fleet" else "fleet")

    def action_back_to_fleet(self) -> None:
        self._show_view("fleet")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc goes back to the fleet only from one station's pane (else it is another key's)."""
        if action == "back_to_fleet":
            return self.view == "station"
        return True

    # ------------------------------------------------------------------ keys

    def focused_station(self) -> StationPane | None:
        node = self.focused
        while node is not None:
            if isinstance(node, StationPane):
                return node
            node = node.parent
        if self.chosen in self.panes:
            return self.panes[self.chosen]
        return next(iter(self.panes.values()), None)

    def action_filter(self) -> None:
        pane = self.focused_station()
        if pane:
            if self.view == "fleet":  # a log is filtered in its pane
                self._show_view("station", pane.station.name)
            pane.log_pane.open_filter()

    def action_toggle_processes(self) -> None:
        """The focused station's GPU processes (from the fleet: the station under the cursor, in its pane)."""
        if self.view == "fleet":
            name = self.query_one(FleetTable).cursor_station()
            if name not in self.panes:
                return
            self._show_view("station", name)
            pane = self.panes[name]
        else:
            pane = self.focused_station()
        if pane is not None:
            pane.toggle_processes()

    def action_toggle_diagnosis(self) -> None:
        self.toggle_class("-show-diagnosis")
        if self.has_class("-show-diagnosis"):
            self.app.refresh_diagnosis()
            self.app.clear_notifications()  # a toast must not cover the Cause and Fix
            panel = self.query_one(DiagnosisPanel)
            panel.select_first()  # the root cause first, whatever was highlighted last time
            panel.query_one("OptionList").focus()

    def action_checks(self) -> None:
        from console.ui.screens.checks import ChecksScreen

        # Reopening shows the last results (and reruns them) instead of an empty table.
        self.app.push_screen(ChecksScreen(self.config, results=getattr(self.app, "last_checks", None)))

    def action_doctor(self) -> None:
        self.app.action_doctor()

    def action_process_list(self) -> None:
        pane = self.focused_station() if self.view != "fleet" else None
        self.app.action_process_list(pane.station.name if pane is not None else None)  # type: ignore[attr-defined]

    def action_investigate(self) -> None:
        """From an NCCL finding (the selected one when the diagnosis panel is open) to the workbench."""
        panel = self.query_one(DiagnosisPanel)
        sel = panel.selected if self.has_class("-show-diagnosis") else None
        nccl = [f for f in panel.findings if f.next == "workbench" or f.id.startswith("nccl")]
        f = sel if sel is not None and sel in nccl else (nccl[0] if nccl else None)
        self.app.action_doctor(f"{f.id} on {f.station}" if f is not None else "")

    def action_chat(self) -> None:
        from console.ui.screens.chat import ChatScreen

        self.app.push_screen(ChatScreen(self.config, head_engine=self.stations.head_engine))

    def action_bench(self) -> None:
        from console.ui.screens.bench import BenchScreen

        self.app.push_screen(BenchScreen(self.config, head_engine=self.stations.head_engine))

    def action_service(self, action: str) -> None:
        from console.ui.screens.actions import start_action

        start_action(self.app, self.config, action, read_only=getattr(self.app, "read_only", False),
                     log_source=getattr(self.app, "log_source", None))  # the monitors' log streams
