"""ConsoleApp: the services, the stations' states and the screens.

The app holds no I/O of its own: each ``StationService`` owns its station's connection and
posts messages. Every long-lived job (a service per station, the serving monitor) is a named job of
the app's ``Supervisor`` (console/supervisor.py): a job that dies is shown (the station's ``error``
state; a notice for the serving monitor) and restarts. The app owns every station's ``StationState`` (console/station/state.py, one
place) and routes each station message one way: applied once to its station's state, then the
dashboard (the app's default screen, which owns its keys: ``console/ui/screens/dashboard.py``)
is told which station and which aspects changed, and the panes and the fleet table redraw from
the state. Log lines are kept by the station's state (its ``LogBuffer``, which the log view renders)
and go to the diagnosis numbered by that buffer. App-wide changes are Textual signals that screens
and panes subscribe to (the head's engine phase: chat, bench; the checks' badges: the panes). The
progress judge (``ProgressJudge``, a job beside the services) stores its verdicts on the fleet
(``stations.judged``) and the dashboard shows them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import App
from textual.binding import Binding
from textual.screen import Screen
from textual.signal import Signal

from console.config import Config, ConfigError, xdg_data_dir
from console.diagnosis.engine import Diagnoser
from console.durations import time_of_day
from console.probes.engine_log import EngineProgress
from console.remote.session import SessionRegistry
from console.remote.transport import Transport
from console.sanitize import one_line
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor
from console.station.aspects import Aspect
from console.station.checks.gpu_errors import FIX as GPU_ERRORS_FIX
from console.station.log_sources import StreamSource
from console.station.messages import (
    ConnectionState,
    ContainerUpdate,
    GpuSample,
    KernelEvents,
    LogBatch,
    ServingUpdate,
    StationMessage,
)
from console.station.monitor import StationService
from console.station.progress import ProgressJudge
from console.station.ras_monitor import start_ras_watch
from console.station.services import start_station_services
from console.station.state import Stations
from console.station.verdict import Judgement
from console.supervisor import JobFailure, Supervisor
from console.ui import clock
from console.ui.ending_signals import exit_on_ending_signals
from console.ui.heap import release_heap, settle_heap
from console.ui.incidents_hook import incident_recorder
from console.ui.providers import DashboardCommands, NavigationCommands, ScreenCommands
from console.ui.screens.checks import ChecksDone
from console.ui.screens.dashboard import DashboardScreen, setup_title
from console.ui.screens.host_key import review_host_key
from console.ui.themes import load_themes
from console.ui.widgets.diagnosis import DiagnosisPanel, station_badge
from console.ui.widgets.station_pane import StationPane
from console.vocabulary import CONTAINER_ENDED_STATES, HOST_KEY_STATES, ConnState

if TYPE_CHECKING:
    import httpx  # annotations only: the client loads it when the API is first polled


class ConsoleApp(App):
    TITLE = "dgx-console"
    COMMANDS = App.COMMANDS | {DashboardCommands, NavigationCommands, ScreenCommands}
    CSS = """
    /* Dialogs: a scrolled box inside a dialog's border is a tinted panel, not a second frame (its
       2-cell scrollbar beside a round border read as a doubled right border). */
    ModalScreen VerticalScroll { border: none; background: $boost; padding: 0 1;
                                 scrollbar-size-vertical: 1; scrollbar-background: $boost; }
    """
    # The app's own keys, on every screen; the dashboard's are its screen's (DashboardScreen).
    BINDINGS = [
        Binding("f1,question_mark", "toggle_help", "Help", id="help", tooltip="Show all keys (F1 or ?; Esc closes)"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="theme", tooltip="Switch dark / light theme"),
        Binding("q", "quit", "Quit", id="quit", tooltip="Stop watching and leave (stations keep running)"),
        Binding("escape", "close_help", "Close help", id="close-help", show=False, priority=True),
        Binding("colon", "colon_palette", "Commands", id="palette-colon", show=False,
                tooltip="The command palette, as in k9s (ctrl+p too)"),
    ]

    def __init__(self, config: Config, read_only: bool = False, theme: str | None = None,
                 transports: dict[str, Transport] | None = None, gpu_interval_ms: int | None = None,
                 start_services: bool = True, clock: bool = True,
                 serving_transport: httpx.AsyncBaseTransport | None = None,
                 late_checks: Callable[[], None] | None = None) -> None:
        super().__init__()
        self._start_services = start_services
        # the config's checks left for after the first frame (console.config.library_checks): its
        # ConfigError ends the app and is kept here for the command to report (one line, exit 2)
        self._late_checks = late_checks
        self.late_error: ConfigError | None = None
        # an ending signal (console/ui/ending_signals.py) before the first frame waits for it
        self.first_frame_shown = False
        self.ending_signal: int | None = None
        self._clock = clock
        self.config = config
        self.read_only = read_only
        self._theme_name = theme or config.ui.theme
        self._transports = transports or {}
        self._gpu_interval_ms = gpu_interval_ms
        self.services: dict[str, StationService] = {}
        self.diagnoser = Diagnoser(gpudirect_expected=config.profile.link.gpudirect, nodes=config.profile.nnodes)
        self._diag_version = 0
        self.last_checks: list | None = None  # the checks screen reopens with them
        self._checks_pass: ChecksDone | None = None  # the last pass (its time and its counts for the badges)
        self._diag_alerted: set[str] = set()
        # every fact about every station: the one place (its ages judged by the GPU interval sampled)
        self.stations = Stations.for_config(config, gpu_interval_ms / 1000 if gpu_interval_ms else None)
        self.jobs = Supervisor()  # the app's long-lived jobs: named, restarted, stopped on unmount
        # the head's engine phase when it changes: the API's fate, for the screens that show it (chat,
        # bench subscribe; the app pokes no screen)
        self.head_engine_changed: Signal[EngineProgress | None] = Signal(self, "head-engine-changed")
        # the checks' badge of the stations a pass or a connection change speaks about, by name: each
        # station pane subscribes and takes its own
        self.check_badges: Signal[dict[str, Text]] = Signal(self, "check-badges")
        # the one progress judge: its verdicts are stored on the fleet (stations.judged) for every reader
        self.judge = ProgressJudge(self.stations, config.ui.progress_window_s)
        self._serving_client: ApiClient | None = None
        self._serving_transport = serving_transport
        # One session per station for everything this app runs (monitor, checks, actions, diagnosis).
        self.sessions = SessionRegistry(config, self._transports)
        self._sessions_active = None
        self.incidents = incident_recorder(self)  # the flight recorder: window, ledger, auto-capture

    @property
    def log_source(self) -> StreamSource | None:
        """Where a launch, restart or relaunch started here reads the container logs: the monitors'
        own streams (one ``docker logs -f`` per station, one scan per batch). None while the services
        do not run (the action then follows the logs itself)."""
        if not self.services:
            return None
        return StreamSource({name: svc.logs for name, svc in self.services.items()})

    @property
    def head_engine(self) -> EngineProgress | None:
        """The head's engine phase (serving panel, chat, bench)."""
        return self.stations.head_engine

    # ------------------------------------------------------------------ layout

    def get_default_screen(self) -> Screen:
        return DashboardScreen(self.config, self.stations)

    @property
    def dashboard(self) -> DashboardScreen:
        screen = self.screen_stack[0] if self.screen_stack else None
        assert isinstance(screen, DashboardScreen)
        return screen

    @property
    def panes(self) -> dict[str, StationPane]:
        """The dashboard's station panes, by station name."""
        return self.dashboard.panes if self.screen_stack else {}

    def on_mount(self) -> None:
        exit_on_ending_signals(self)  # a closed terminal or a kill ends the app through its teardown
        if self.config.keys:  # [keys] (checked by console/ui/keymap.py before the app starts)
            self.set_keymap(self.config.keys)
        broken: list[str] = []
        for t in load_themes(broken):
            self.register_theme(t)
        for line in broken:  # file names and parser words: plain text, never markup
            self.notify(one_line(line, 200), title="theme", severity="warning", markup=False, timeout=15)
        if self._theme_name in self.available_themes:
            self.theme = self._theme_name
        self.sub_title = setup_title(self.config, self.read_only)
        self._sessions_active = self.sessions.active()
        self._sessions_active.__enter__()
        # after the first frame: the config's library checks, then connecting (both load asyncssh and httpx)
        self.call_after_refresh(self._after_first_frame)
        self.call_after_refresh(settle_heap)
        # Diagnosis runs on the batches as they arrive; the panel is redrawn at most twice a second.
        self.set_interval(0.5, self.refresh_diagnosis)
        # The progress judge, a job beside the station services: pure (no I/O), so it runs whether they
        # do or not; a wedge shows by time passing, not by a message.
        self.jobs.start(JUDGE_JOB, lambda: self.judge.run(self._progress_judged, lambda: clock.now()),
                        on_failure=self._job_failed)

    def _after_first_frame(self) -> None:
        self.first_frame_shown = True
        if self.ending_signal is not None:  # SIGTERM / SIGHUP while the screen was still being built
            self.exit(return_code=128 + self.ending_signal)
            return
        if self._late_checks is not None:
            check, self._late_checks = self._late_checks, None
            try:
                check()
            except ConfigError as exc:
                self.late_error = exc
                self.exit(return_code=2)
                return
        if self._start_services:
            self._start_jobs()

    def _start_jobs(self) -> None:
        """The stations' services, the API's poll, the RAS watch and the incident recorder."""
        if self._start_services and not self.services and self.is_running:
            self.services = start_station_services(self.jobs, self.config, self.post_message, self.sessions,
                                                   self._gpu_interval_ms)
            self._serving_client = ApiClient(self.config.api_url(), api_key=self.config.api_key(),
                                             timeout=self.config.api.timeout_s, transport=self._serving_transport)
            monitor = ServingMonitor(self._serving_client, lambda snap: self.post_message(ServingUpdate(snap)))
            self.jobs.start(SERVING_JOB, monitor.run, on_failure=self._job_failed)
            # the job's NCCL RAS, one short read every few s while an engine serves: ranks out of step show
            start_ras_watch(self.jobs, self.sessions, self.stations, self.post_message, self._job_failed)
            self.jobs.start("incidents", self.incidents.run, on_failure=self._job_failed)
            self.call_after_refresh(settle_heap)  # and what connecting loaded

    def _job_failed(self, failure: JobFailure) -> None:
        """A job of the app died (the supervisor restarts it): never silent."""
        self.notify(f"{failure.job} failed ({type(failure.error).__name__}: {one_line(str(failure.error), 120)}); "
                    f"restarting in {failure.retry_in_s:g} s", severity="error", timeout=8, markup=False)

    async def on_unmount(self) -> None:
        await self.jobs.stop()  # every service ends and closes its connection
        if self._serving_client:
            await self._serving_client.aclose()
        if self._sessions_active is not None:
            self._sessions_active.__exit__(None, None, None)
            self._sessions_active = None
        await self.sessions.close()
        release_heap()

    # ------------------------------------------------------------------ messages

    @on(StationMessage)
    @on(ServingUpdate)
    def _route(self, msg: StationMessage | ServingUpdate) -> None:
        """Every station message (and the API's poll, the head's), one way: applied once to its
        station's state, then what else it feeds (the diagnosis, the log view, a notice), then the
        dashboard redraws what changed."""
        state = self.stations.state_of(msg)
        if state is None:
            return
        before = state.conn.state
        changed = state.apply(msg)
        self.incidents.note(msg)
        if isinstance(msg, LogBatch):  # the state's log buffer has the lines now (the pane shows them)
            # numbered by the buffer's one counter: a finding's "line N" is line N of the log view
            self.diagnoser.feed(msg.station, msg.lines, msg.classified,  # the monitor's scan: no second one
                                first=state.log.total - len(msg.lines) + 1)
        elif isinstance(msg, ContainerUpdate):
            info = msg.info  # a container that stopped with an error is never silent in the diagnosis
            # findings belong to a run: a newer run of the container sends the old one's to "previous run"
            self.diagnoser.note_run(msg.station, info.started_at, info.finished_at)
            self.diagnoser.note_exit(msg.station, info.exit_code if info.state in CONTAINER_ENDED_STATES else None,
                                     f"container {info.name}", oom_killed=info.oom_killed)
        elif isinstance(msg, KernelEvents):
            self._feed_kernel(msg)
        elif isinstance(msg, GpuSample) and Aspect.GPUS in changed:  # a GPU in error is a finding
            bad = ",".join(str(g.index) for g in state.gpus_in_error)
            self.diagnoser.note_gpu_errors(state.name, state.gpu_error_words(), GPU_ERRORS_FIX.replace("INDEX", bad))
        if isinstance(msg, ConnectionState) and before != state.conn.state and before != ConnState.CONNECTING:
            self._checks_outdated(state.name, before, state.conn.state)
        if isinstance(msg, ConnectionState) and msg.state in HOST_KEY_STATES and before != msg.state:
            what = "CHANGED" if msg.state == ConnState.HOST_KEY_CHANGED else "unknown"
            if getattr(msg.host_key, "revoked", False):
                what = "REVOKED"
            self.notify(f"{msg.station}: host key {what} ({msg.fingerprint}); press T to review",
                        severity="warning" if what == "unknown" else "error", timeout=8, markup=False)
        if not self.screen_stack:  # (a message can still arrive while the app shuts down)
            return
        if Aspect.SERVING in changed or Aspect.RAS in changed:
            # a new counter or RAS read: judged once the messages queued now are applied, not on the next
            # tick and not once per message (a burst of reads is one judgement)
            self.judge.soon()
        if Aspect.ENGINE in changed and state is self.stations.head:  # the API's fate: chat, bench
            self.head_engine_changed.publish(state.engine)
        self.dashboard.station_changed(state.name, changed)

    def _progress_judged(self, judged: Judgement) -> None:
        """The judge ticked (its judgement is on the fleet already): the dashboard shows it."""
        if self.screen_stack:
            self.dashboard.progress_judged(judged)

    def judge_progress(self) -> Judgement:
        """A tick of the judge now, out of its turn (a test's, a caller that cannot wait), shown."""
        judged = self.judge.tick(clock.now())
        self._progress_judged(judged)
        return judged

    # Each station's kernel log (since its container started) feeds the live diagnosis
    def _feed_kernel(self, msg: KernelEvents) -> None:
        """The health channel's kernel events (its one ``journalctl -k -f`` per station) of the
        container's run, each once (the station's state keeps which), to the diagnosis (the panel
        redraws on its interval)."""
        if new := self.stations[msg.station].run_kernel_new():
            self.diagnoser.feed_kernel_events(msg.station, new)

    def on_checks_done(self, msg: ChecksDone) -> None:
        self.last_checks = list(msg.results)
        self._checks_pass = msg
        self.check_badges.publish({name: msg.badge(name) for name in self.stations})
        self.diagnoser.add_check_results(msg.results)
        self.refresh_diagnosis()

    def _checks_outdated(self, name: str, before: str, after: str) -> None:
        """The station's connection changed after the last checks ran: its badge says so (dimmed, with
        the change and its time) instead of a verdict the change may have undone."""
        done = self._checks_pass
        if done is not None:
            self.check_badges.publish({name: done.badge(name, stale=f"{before} → {after} at "
                                                                  f"{time_of_day(time.time())}")})

    def refresh_diagnosis(self) -> None:
        if self.diagnoser.version == self._diag_version or not self.screen_stack:
            return
        self._diag_version = self.diagnoser.version
        findings = self.diagnoser.ranked()
        for panel in self.dashboard.query(DiagnosisPanel):  # none while the app tears its screens down
            panel.update_findings(findings, self.diagnoser.previous_runs())
        for name, pane in self.panes.items():
            pane.set_badge("diagnosis", station_badge(findings, name))
        shown = self.screen is self.dashboard and self.dashboard.has_class("-show-diagnosis")
        for f in findings:
            if f.severity == "error" and f.id not in self._diag_alerted:
                self._diag_alerted.add(f.id)
                if shown:  # the open panel lists it: a toast would only cover its Cause and Fix
                    continue
                hint = "d; i: investigate" if f.next == "workbench" else "d"
                self.notify(f"Diagnosis: {f.id} on {one_line(f.station)} — {one_line(f.cause, 90)} (press {hint})",
                            severity="error", timeout=10, markup=False)

    def on_diagnosis_panel_finding_selected(self, msg: DiagnosisPanel.FindingSelected) -> None:
        ev = next((e for e in msg.finding.evidence if e.source in self.panes), None)
        if ev is not None:
            self.dashboard.reveal(ev.source)  # in the fleet view its pane opens first
            self.panes[ev.source].log_pane.jump_to(ev.line)

    # ------------------------------------------------------------------ actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Esc closes the help panel first, and is the screen's own Esc when no help is shown."""
        if action == "close_help":
            return bool(self.screen.query("HelpPanel"))
        return True

    def focused_station(self) -> StationPane | None:
        return self.dashboard.focused_station()

    def action_reconnect(self) -> None:
        for svc in self.services.values():
            if svc.state != ConnState.LIVE:
                svc.retry_now()

    def action_doctor(self, reason: str = "") -> None:
        """The NCCL workbench, from the dashboard (n, i) or a failed launch's dialog (i)."""
        from console.ui.screens.doctor import DoctorScreen

        self.push_screen(DoctorScreen(self.config, read_only=self.read_only, reason=reason))

    def action_incidents(self) -> None:
        """The incident ledger (dashboard I)."""
        from console.ui.screens.incidents import IncidentsScreen

        self.push_screen(IncidentsScreen(self.incidents.ledger))

    def action_hang_evidence(self) -> None:
        """The hang evidence of every rank at the same moment (dashboard h, workbench h)."""
        from console.ui.screens.hang_evidence import HangEvidenceScreen

        self.push_screen(HangEvidenceScreen(self.config, requests=self.incidents.requests_now))

    def action_copy(self, kind: str) -> None:
        """The copy screen: the checkpoint or the image to the other station (palette)."""
        from console.service.copy import CopyKind
        from console.ui.screens.copy import CopyScreen

        self.push_screen(CopyScreen(self.config, CopyKind(kind), read_only=self.read_only))

    def action_colon_palette(self) -> None:
        """``:`` opens the command palette (k9s's habit); a text box that has the focus keeps its ``:``."""
        self.action_command_palette()

    def action_process_list(self, station: str | None = None) -> None:
        """Every GPU process (user, container, command, CPU, RSS), sorted; end one after a confirm."""
        from console.ui.screens.processes import ProcessScreen

        if not isinstance(self.screen, ProcessScreen):
            self.push_screen(ProcessScreen(self.config, read_only=self.read_only, station=station))

    def action_toggle_theme(self) -> None:
        self.theme = "dgx-light" if self.theme == "dgx-dark" else "dgx-dark"

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_show_help_panel(self) -> None:
        """The app's keys first, one line each (``widgets/help_panel.py``)."""
        from console.ui.widgets.help_panel import ConsoleHelpPanel

        if not self.screen.query("HelpPanel"):
            self.screen.mount(ConsoleHelpPanel())

    def action_close_help(self) -> None:
        self.action_hide_help_panel()

    def action_trust(self) -> None:
        pane = self.focused_station()
        candidates = [p for p in self.panes.values() if p.conn_state in HOST_KEY_STATES]
        if pane is None or pane.conn_state not in HOST_KEY_STATES:
            pane = candidates[0] if candidates else None
        if pane is None:
            self.notify("No station is waiting for a host key decision.", timeout=4)
            return
        name = pane.station.name
        svc = self.services.get(name)
        review_host_key(self, name, pane.station.host, svc.transport if svc else None, pane.host_key,
                        svc.retry_now if svc else lambda: None)

    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """Textual's screenshot, saved where a directory exists; Textual's notice names the file."""
        if path is None:
            target = screenshot_dir()
            try:
                target.mkdir(parents=True, exist_ok=True)
            except OSError:
                target = Path.cwd()
            path = str(target)
        return super().deliver_screenshot(filename, path, time_format)


SERVING_JOB = "serving monitor"  # the supervisor's name for the API poll (its notice says it)
JUDGE_JOB = "progress judge"  # the supervisor's name for the progress judge


def screenshot_dir() -> Path:
    """Where the palette's Screenshot goes: the XDG data dir (Textual's default, ~/Downloads, may
    not exist on a station or in a container)."""
    return xdg_data_dir() / "screenshots"
