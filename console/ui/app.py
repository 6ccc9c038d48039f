"""ConsoleApp: the services and the screens. Wires per-station services to the dashboard's panes
through messages.

The app holds no I/O of its own: each ``StationService`` owns its station's connection and
posts messages; handlers here only find the pane (on the dashboard, the app's default screen,
which owns its keys: ``console/ui/screens/dashboard.py``) and hand it the value.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Label, Static

from console.config import Config, xdg_data_dir
from console.diagnosis.engine import Diagnoser
from console.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.monitor import StationService
from console.probes.engine_log import EngineProgress
from console.remote.transport import SSHTransport, Transport, TransportError
from console.sanitize import one_line
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor
from console.ui.commands import DashboardCommands, NavigationCommands, ScreenCommands
from console.ui.screens.checks import ChecksDone
from console.ui.screens.dashboard import DashboardScreen, setup_title
from console.ui.themes import load_themes
from console.ui.widgets.diagnosis import LOG_READ_STATES, DiagnosisPanel, station_badge
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from console.ui.widgets.station_pane import StationPane


class TrustHostKeyScreen(ModalScreen[bool]):
    """The explicit trust step: show the fingerprint, trust only on a deliberate yes."""

    DEFAULT_CSS = """
    TrustHostKeyScreen { align: center middle; }
    TrustHostKeyScreen > Vertical { width: 84; height: auto; border: thick $warning; padding: 1 2;
                                    background: $surface; }
    TrustHostKeyScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    TrustHostKeyScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "dismiss(False)", "Cancel")]

    def __init__(self, station: str, host: str, fingerprint: str, known_hosts: str) -> None:
        super().__init__()
        self.station, self.host, self.fingerprint, self.known_hosts = station, host, fingerprint, known_hosts

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text.assemble(("Unknown host key", "bold"), f" for station {self.station} ({self.host})"))
            yield Static(Text.assemble("Fingerprint: ", (self.fingerprint, "bold yellow")))
            yield Static(f"Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the station.\n"
                         f"Trusting appends the key to {self.known_hosts}.")
            with Horizontal():
                yield Button("Cancel", id="no")
                yield Button("Trust this key", id="yes", variant="warning")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


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
    ]

    def __init__(self, config: Config, read_only: bool = False, theme: str | None = None,
                 transports: dict[str, Transport] | None = None, gpu_interval_ms: int | None = None,
                 start_services: bool = True, clock: bool = True) -> None:
        super().__init__()
        self._start_services = start_services
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
        self._diag_alerted: set[str] = set()
        self._unread: dict[str, str] = {}  # stations whose logs cannot be read now (down)
        self._serving_task: asyncio.Task | None = None
        self._serving_client: ApiClient | None = None
        self.head_engine: EngineProgress | None = None  # the head's engine phase (chat, bench, serving)

    # ------------------------------------------------------------------ layout

    def get_default_screen(self) -> Screen:
        return DashboardScreen(self.config)

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
        if self.config.keys:  # [keys] (checked by console/ui/keymap.py before the app starts)
            self.set_keymap(self.config.keys)
        for t in load_themes():
            self.register_theme(t)
        if self._theme_name in self.available_themes:
            self.theme = self._theme_name
        self.sub_title = setup_title(self.config, self.read_only)
        for st in self.config.stations if self._start_services else ():
            svc = StationService(self.config, st, self.post_message, self._transports.get(st.name),
                                 self._gpu_interval_ms)
            self.services[st.name] = svc
            svc.start()
        if self._start_services:
            self._serving_client = ApiClient(self.config.api_url(), api_key=self.config.api_key(),
                                             timeout=self.config.api.timeout_s)
            monitor = ServingMonitor(self._serving_client, lambda snap: self.post_message(ServingUpdate(snap)))
            self._serving_task = asyncio.create_task(monitor.run())
        # Diagnosis runs on the batches as they arrive; the panel is redrawn at most twice a second.
        self.set_interval(0.5, self.refresh_diagnosis)

    async def on_unmount(self) -> None:
        if self._serving_task:
            self._serving_task.cancel()
        await asyncio.gather(*(s.stop() for s in self.services.values()), return_exceptions=True)
        if self._serving_client:
            await self._serving_client.aclose()

    # ------------------------------------------------------------------ messages

    def on_connection_state(self, msg: ConnectionState) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_connection(msg.state, msg.detail, msg.fingerprint)
        self._unread.pop(msg.station, None)
        if msg.state not in LOG_READ_STATES:  # the diagnosis says whose log it cannot read
            self._unread[msg.station] = msg.state
        self.dashboard.query_one(DiagnosisPanel).set_unread(self._unread)
        if msg.state == "hostkey":
            self.notify(f"{msg.station}: host key not trusted ({msg.fingerprint}); press T to review",
                        severity="warning", timeout=8)

    def on_gpu_sample(self, msg: GpuSample) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_gpus(msg.gpus, msg.at)

    def on_apps_sample(self, msg: AppsSample) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_apps(msg.apps)

    def on_host_mem_sample(self, msg: HostMemSample) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_host_mem(msg.memory)

    def on_container_update(self, msg: ContainerUpdate) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_container(msg.info)
        info = msg.info  # a container that stopped with an error is never silent in the diagnosis
        self.diagnoser.note_exit(msg.station, info.exit_code if info.state in ("exited", "dead") else None,
                                 f"container {info.name}", oom_killed=info.oom_killed)

    def on_engine_update(self, msg: EngineUpdate) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_engine(msg.progress)
        if msg.station == self.config.head.name:  # the API's fate: serving panel, chat, bench
            self.head_engine = msg.progress
            for panel in pane.query(ServingPanel) if pane else ():
                panel.set_engine(msg.progress)
            for screen in self.screen_stack:
                if hasattr(screen, "set_head_engine"):
                    screen.set_head_engine(msg.progress)

    def on_log_batch(self, msg: LogBatch) -> None:
        if pane := self.panes.get(msg.station):
            pane.add_logs(msg.lines)
        self.diagnoser.feed(msg.station, msg.lines)

    def on_serving_update(self, msg: ServingUpdate) -> None:
        head = self.panes.get(self.config.head.name)
        if head is not None:
            for panel in head.query(ServingPanel):
                panel.show(msg.snapshot)

    def on_checks_done(self, msg: ChecksDone) -> None:
        self.last_checks = list(msg.results)
        for name, pane in self.panes.items():
            pane.set_badge("checks", msg.summary_text(name))
        self.diagnoser.add_check_results(msg.results)
        self.refresh_diagnosis()

    def refresh_diagnosis(self) -> None:
        if self.diagnoser.version == self._diag_version:
            return
        self._diag_version = self.diagnoser.version
        findings = self.diagnoser.ranked()
        self.dashboard.query_one(DiagnosisPanel).update_findings(findings)
        for name, pane in self.panes.items():
            pane.set_badge("diagnosis", station_badge(findings, name))
        for f in findings:
            if f.severity == "error" and f.id not in self._diag_alerted:
                self._diag_alerted.add(f.id)
                hint = "d; i: investigate" if f.id.startswith("nccl") else "d"
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
            if svc.state in ("unreachable", "connecting"):
                svc.retry_now()

    def action_doctor(self, reason: str = "") -> None:
        """The NCCL workbench, from the dashboard (n, i) or a failed launch's dialog (i)."""
        from console.ui.screens.doctor import DoctorScreen

        self.push_screen(DoctorScreen(self.config, read_only=self.read_only, reason=reason))

    def action_toggle_theme(self) -> None:
        self.theme = "dgx-light" if self.theme == "dgx-dark" else "dgx-dark"

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    def action_close_help(self) -> None:
        self.action_hide_help_panel()

    def action_trust(self) -> None:
        pane = self.focused_station()
        candidates = [p for p in self.panes.values() if p.conn_state == "hostkey"]
        if pane is None or pane.conn_state != "hostkey":
            pane = candidates[0] if candidates else None
        if pane is None:
            self.notify("No station is waiting for a host key decision.", timeout=4)
            return
        svc = self.services[pane.station.name]
        if not isinstance(svc.transport, SSHTransport) or not pane.fingerprint:
            self.notify(f"{pane.station.name}: the host key could not be fetched; check the address.",
                        severity="error")
            return
        screen = TrustHostKeyScreen(pane.station.name, pane.station.host, pane.fingerprint, svc.transport.known_hosts)
        self.push_screen(screen, lambda yes: self._trust(pane.station.name, pane.fingerprint) if yes else None)

    @work(exclusive=False)
    async def _trust(self, station: str, fingerprint: str | None) -> None:
        svc = self.services[station]
        assert isinstance(svc.transport, SSHTransport)
        try:
            fp = await svc.transport.trust_host_key(fingerprint)
        except TransportError as exc:
            self.notify(str(exc), severity="error", timeout=10)
            return
        self.notify(f"{station}: trusted {fp}", timeout=5)
        svc.retry_now()

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


def screenshot_dir() -> Path:
    """Where the palette's Screenshot goes: the XDG data dir (Textual's default, ~/Downloads, may
    not exist on a station or in a container)."""
    return xdg_data_dir() / "screenshots"
