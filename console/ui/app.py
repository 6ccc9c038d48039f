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
from textual.widgets import Button, Input, Label, Static

from console.config import Config, xdg_data_dir
from console.diagnosis.engine import Diagnoser
from console.probes.engine_log import EngineProgress
from console.remote.session import SessionRegistry
from console.remote.transport import HostKeyError, Transport, TransportError, ssh_of
from console.sanitize import one_line
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.station.monitor import StationService
from console.ui.providers import DashboardCommands, NavigationCommands, ScreenCommands
from console.ui.screens.checks import ChecksDone
from console.ui.screens.dashboard import DashboardScreen, setup_title
from console.ui.themes import load_themes
from console.ui.widgets.diagnosis import DiagnosisPanel, station_badge
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from console.ui.widgets.station_pane import StationPane
from console.vocabulary import HOST_KEY_STATES, LOG_READ_STATES


class TrustHostKeyScreen(ModalScreen[bool]):
    """The explicit trust step for an UNKNOWN key: its type and fingerprint, trusted only on a yes."""

    DEFAULT_CSS = """
    TrustHostKeyScreen { align: center middle; }
    TrustHostKeyScreen > Vertical { width: 84; height: auto; border: thick $warning; padding: 1 2;
                                    background: $surface; }
    TrustHostKeyScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    TrustHostKeyScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "dismiss(False)", "Cancel")]
    AUTO_FOCUS = "#no"  # Enter alone never trusts a key

    def __init__(self, station: str, host: str, fingerprint: str, known_hosts: str, key_type: str = "") -> None:
        super().__init__()
        self.station, self.host, self.fingerprint, self.known_hosts = station, host, fingerprint, known_hosts
        self.key_type = key_type

    def compose(self) -> ComposeResult:
        kind = self.key_type or "host"
        with Vertical():
            yield Label(Text.assemble(("Unknown host key", "bold"), f" for station {self.station} ({self.host})"))
            yield Static(Text.assemble(f"{kind} key fingerprint: ", (self.fingerprint, "bold yellow")))
            yield Static(f"Compare it with `ssh-keygen -lf /etc/ssh/ssh_host_{(self.key_type or 'ed25519').lower()}"
                         f"_key.pub` on the station.\nTrusting appends the key to {self.known_hosts}.")
            with Horizontal():
                yield Button("Cancel", id="no")
                yield Button("Trust this key", id="yes", variant="warning")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class ReplaceHostKeyScreen(ModalScreen[str | None]):
    """A CHANGED key is never trusted with a click: the operator types the new fingerprint, read on
    the station itself, and only that key replaces the old line(s)."""

    DEFAULT_CSS = """
    ReplaceHostKeyScreen { align: center middle; }
    ReplaceHostKeyScreen > Vertical { width: 96; height: auto; border: thick $error; padding: 1 2;
                                      background: $surface; }
    ReplaceHostKeyScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ReplaceHostKeyScreen Button { margin-left: 2; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]
    AUTO_FOCUS = "#fp"

    def __init__(self, station: str, host: str, error: HostKeyError) -> None:
        super().__init__()
        self.station, self.host, self.error = station, host, error

    def compose(self) -> ComposeResult:
        e = self.error
        with Vertical():
            yield Label(Text.assemble(("HOST KEY CHANGED", "bold red"), f" for station {self.station} ({self.host})"))
            for k in e.known:
                yield Static(Text.assemble("known:   ", (str(k), "bold")))
            yield Static(Text.assemble("offered: ", (str(e.offered) if e.offered else "?", "bold red")))
            yield Static("This can be an attack (someone between you and the station) or a reinstall. Read the "
                         "new fingerprint on the station itself (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) "
                         f"and type it to replace the old key in {e.known_hosts}.")
            yield Input(placeholder="SHA256:... (the fingerprint read on the station)", id="fp")
            with Horizontal():
                yield Button("Cancel", id="no")
                yield Button("Replace the key", id="yes", variant="error", disabled=True)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        ok = self.error.offered is not None and event.value.strip() == self.error.offered.fingerprint
        self.query_one("#yes", Button).disabled = not ok

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if not self.query_one("#yes", Button).disabled:
            self.dismiss(event.value.strip())

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value.strip() if event.button.id == "yes" else None)


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
        # One session per station for everything this app runs (monitor, checks, actions, diagnosis).
        self.sessions = SessionRegistry(config, self._transports)
        self._sessions_active = None
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
        self._sessions_active = self.sessions.active()
        self._sessions_active.__enter__()
        for st in self.config.stations if self._start_services else ():
            svc = StationService(self.config, st, self.post_message, self.sessions.transport(st.name),
                                 self._gpu_interval_ms)
            self.services[st.name] = svc
            svc.start()
        if self._start_services:
            self._serving_client = ApiClient(self.config.api_url(), api_key=self.config.api_key(),
                                             timeout=self.config.api.timeout_s)
            monitor = ServingMonitor(self._serving_client, lambda snap: self.post_message(ServingUpdate(snap)))
            self._serving_task = asyncio.create_task(self._supervised("serving monitor", monitor.run))
        # Diagnosis runs on the batches as they arrive; the panel is redrawn at most twice a second.
        self.set_interval(0.5, self.refresh_diagnosis)
        self.set_interval(1.0, self._tick_ages)

    async def _supervised(self, what: str, job) -> None:
        """A background job that must not die silently: an unexpected error is shown, then it restarts."""
        delay = 1.0
        while True:
            try:
                await job()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.notify(f"{what} failed ({type(exc).__name__}: {one_line(str(exc), 120)}); restarting in {delay:g} s",
                            severity="error", timeout=8, markup=False)
            await asyncio.sleep(delay)
            delay = min(30.0, delay * 2)

    def _tick_ages(self) -> None:
        for pane in self.panes.values():
            pane.tick()

    async def on_unmount(self) -> None:
        if self._serving_task:
            self._serving_task.cancel()
        await asyncio.gather(*(s.stop() for s in self.services.values()), return_exceptions=True)
        if self._serving_client:
            await self._serving_client.aclose()
        if self._sessions_active is not None:
            self._sessions_active.__exit__(None, None, None)
            self._sessions_active = None
        await self.sessions.close()

    # ------------------------------------------------------------------ messages

    def on_connection_state(self, msg: ConnectionState) -> None:
        pane = self.panes.get(msg.station)
        before = pane.conn_state if pane else None
        if pane:
            pane.set_connection(msg)
        self._unread.pop(msg.station, None)
        if msg.state not in LOG_READ_STATES:  # the diagnosis says whose log it cannot read
            self._unread[msg.station] = msg.state
        if self.screen_stack:  # (a state can still arrive while the app shuts down)
            self.dashboard.query_one(DiagnosisPanel).set_unread(self._unread)
        if msg.state in HOST_KEY_STATES and before != msg.state:
            what = "CHANGED" if msg.state == "host-key-changed" else "unknown"
            self.notify(f"{msg.station}: host key {what} ({msg.fingerprint}); press T to review",
                        severity="error" if what == "CHANGED" else "warning", timeout=8, markup=False)

    def on_gpu_sample(self, msg: GpuSample) -> None:
        if pane := self.panes.get(msg.station):
            pane.set_gpus(msg.gpus, msg.error, msg.at)

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
        self.diagnoser.feed(msg.station, msg.lines, msg.classified)  # the monitor's scan: no second one

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
        if self.diagnoser.version == self._diag_version or not self.screen_stack:
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
            if svc.state != "live":
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
        candidates = [p for p in self.panes.values() if p.conn_state in HOST_KEY_STATES]
        if pane is None or pane.conn_state not in HOST_KEY_STATES:
            pane = candidates[0] if candidates else None
        if pane is None:
            self.notify("No station is waiting for a host key decision.", timeout=4)
            return
        name = pane.station.name
        ssh = ssh_of(self.services[name].transport) if name in self.services else None
        err = pane.host_key
        if ssh is None or not isinstance(err, HostKeyError) or err.offered is None:
            self.notify(f"{name}: the host key could not be fetched; check the address.", severity="error")
            return
        if err.changed:
            self.push_screen(ReplaceHostKeyScreen(name, pane.station.host, err),
                             lambda fp: self._host_key_step(name, fp, True) if fp else None)
            return
        screen = TrustHostKeyScreen(name, pane.station.host, err.offered.fingerprint, ssh.known_hosts,
                                    err.offered.type)
        self.push_screen(screen, lambda yes: self._host_key_step(name, err.offered.fingerprint, False) if yes else None)

    @work(exclusive=False)
    async def _host_key_step(self, station: str, fingerprint: str, replace: bool) -> None:
        """Trust an unknown key, or replace a CHANGED one (the fingerprint the operator typed), then
        retry the station at once."""
        svc = self.services[station]
        ssh = ssh_of(svc.transport)
        assert ssh is not None
        try:
            fp = await (ssh.replace_host_key(fingerprint) if replace else ssh.trust_host_key(fingerprint))
        except TransportError as exc:
            self.notify(one_line(str(exc), 300), severity="error", timeout=10, markup=False)
            return
        self.notify(f"{station}: host key replaced by {fp} (old line removed)" if replace else f"{station}: trusted {fp}",
                    timeout=6, markup=False)
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
