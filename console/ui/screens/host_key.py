"""The host-key decision in the TUI (T on the dashboard): an UNKNOWN key is shown with its type and
fingerprint and trusted only on a deliberate yes; a CHANGED key is never trusted with a click: the
operator types the new fingerprint, read on the station itself. ``review_host_key`` opens the right
dialog and takes the decision through the one trust step every command uses
(``console.remote.host_keys``), then the station is retried at once.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from console.remote import host_keys
from console.remote.transport import HostKeyError, Transport, TransportError, ssh_of
from console.sanitize import one_line


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
    ReplaceHostKeyScreen #fp-note { height: auto; }
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
            yield Static("", id="fp-note")
            with Horizontal():
                yield Button("Cancel", id="no")
                yield Button("Replace the key", id="yes", variant="error", disabled=True)

    @on(Input.Changed)
    def _typed(self, event: Input.Changed) -> None:
        ok = self.error.offered is not None and event.value.strip() == self.error.offered.fingerprint
        self.query_one("#yes", Button).disabled = not ok
        self.query_one("#fp-note", Static).update("")

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        if not self.query_one("#yes", Button).disabled:
            self.dismiss(event.value.strip())
            return
        # Enter on a wrong fingerprint must say so (it did nothing): the key is not replaced
        typed = one_line(event.value.strip(), 80)
        said = ("type the fingerprint read on the station (SHA256:...)" if not typed else
                f"{typed} does not match the key the station offers now; the key is not replaced. Read it "
                "again on the station, or Esc to cancel.")
        self.query_one("#fp-note", Static).update(Text(said, style="bold red"))

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value.strip() if event.button.id == "yes" else None)


def review_host_key(app: App, station: str, host: str, transport: Transport | None, error: object,
                    retry: Callable[[], None]) -> None:
    """Open the dialog for this station's host-key problem (``error``: the HostKeyError the station
    reported); on a decision, trust or replace the key, say so, and ``retry`` the station."""
    ssh = ssh_of(transport) if transport is not None else None
    if ssh is None or not isinstance(error, HostKeyError) or error.offered is None:
        app.notify(f"{station}: the host key could not be fetched; check the address.", severity="error")
        return
    assert transport is not None

    async def decide(fingerprint: str, replace: bool) -> None:
        try:
            said = await host_keys.decide(station, transport, fingerprint, replace)
        except TransportError as exc:
            app.notify(one_line(str(exc), 300), severity="error", timeout=10, markup=False)
            return
        app.notify(said, timeout=6, markup=False)
        retry()

    def run(fingerprint: str, replace: bool) -> None:
        app.run_worker(decide(fingerprint, replace), name=f"host-key {station}", group="host-key",
                       exit_on_error=False)

    if error.revoked:  # refused always: nothing to trust or replace here
        app.notify(one_line(str(error), 400), severity="error", timeout=15, markup=False)
        return
    if error.changed:
        app.push_screen(ReplaceHostKeyScreen(station, host, error), lambda fp: run(fp, True) if fp else None)
        return
    offered = error.offered.fingerprint
    app.push_screen(TrustHostKeyScreen(station, host, offered, ssh.known_hosts, error.offered.type),
                    lambda yes: run(offered, False) if yes else None)
