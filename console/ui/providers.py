"""Command palette providers: every action and screen of the app, one provider per screen.

As in posting (darrenburns/posting, ``commands.py``), each screen offers its own commands; here a
screen's commands are its key bindings (the footer's, with their tooltips as help), so a key
added to a screen is in the palette without a second list to keep. ``NavigationCommands`` opens
every screen from anywhere (typing ``chat`` finds "Open the chat"); ``DashboardCommands`` holds
the dashboard's keys and ``ScreenCommands`` those of any other screen that has no provider of its
own (checks, actions, doctor). Providers do no I/O: they read bindings and call actions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.screen import ModalScreen, Screen


@dataclass(frozen=True)
class Command:
    name: str  # what the palette shows and matches: "chat: Copy reply"
    help: str
    run: Callable[[], object]


class CommandList(Provider):
    """A provider over a list of commands: all of them on discovery, fuzzy-matched on search
    (the name first, the help text at half weight)."""

    def commands(self) -> Iterator[Command]:
        raise NotImplementedError

    async def discover(self) -> Hits:
        for c in self.commands():
            yield DiscoveryHit(c.name, c.run, help=c.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for c in self.commands():
            score = max(matcher.match(c.name), matcher.match(c.help) * 0.5)
            if score > 0:
                yield Hit(score, matcher.highlight(c.name), c.run, help=c.help)


class BindingCommands(CommandList):
    """A screen's bindings as commands. Subclasses name the screen (``PREFIX``) and say whether
    the palette was opened on it (``applies``). The app's own keys (quit, theme, help) are ``app:``
    except on the dashboard, the app's home."""

    PREFIX = "screen"

    def applies(self, screen: Screen) -> bool:
        return True

    def commands(self) -> Iterator[Command]:
        screen = self.screen
        if not self.applies(screen):
            return
        app = self.app
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            # a key kept out of the footer for room (T, r) is still a command when it says what it does
            offered = binding.show or bool(binding.tooltip)
            if not active.enabled or not offered or not binding.description or binding.action in seen:
                continue
            if binding.action in ("command_palette", "app.command_palette", "colon_palette", "app.colon_palette") or (
                    _on_dashboard(screen) and binding.action in _NAVIGATION_ACTIONS):
                continue  # the palette itself; the screens are NavigationCommands' ("Open the chat")
            seen.add(binding.action)
            prefix = self.PREFIX if active.node is not app or _on_dashboard(screen) else "app"
            help_text = f"{binding.tooltip or binding.description}  (key: {app.get_key_display(binding)})"
            yield Command(f"{prefix}: {binding.description}", help_text,
                          partial(app.run_action, binding.action, active.node))
        yield from self.extra()

    def extra(self) -> Iterator[Command]:
        """Commands of the screen that have no key."""
        return iter(())

def _on_dashboard(screen: Screen) -> bool:
    return screen is screen.app.screen_stack[0]


class DashboardCommands(BindingCommands):
    """The dashboard's keys (both stations side by side)."""

    PREFIX = "dashboard"

    def applies(self, screen: Screen) -> bool:
        return _on_dashboard(screen)


class ScreenCommands(BindingCommands):
    """Any other screen's keys, for screens without a provider of their own."""

    def applies(self, screen: Screen) -> bool:
        own = getattr(type(screen), "COMMANDS", set())
        return not _on_dashboard(screen) and not any(isinstance(p, type) and issubclass(p, BindingCommands)
                                                     for p in own)

    def commands(self) -> Iterator[Command]:
        self.PREFIX = getattr(self.screen, "PALETTE_NAME", type(self.screen).__name__.removesuffix("Screen").lower())
        yield from super().commands()


class ChatCommands(BindingCommands):
    PREFIX = "chat"


class BenchCommands(BindingCommands):
    PREFIX = "bench"


#: (name, help, action): the screens, opened from anywhere (the dashboard's actions run on it).
SCREENS: tuple[tuple[str, str, str], ...] = (
    ("Open the chat", "Chat with the served model (reasoning apart, tool test)", "chat"),
    ("Open the bench", "Concurrency sweep and NVIDIA's throughput figure", "bench"),
    ("Open the checks", "Link and preflight checks, RDMA validation", "checks"),
    ("Open the NCCL workbench", "The troubleshooting ladder: links, RDMA, NCCL, env, addresses, hang", "doctor"),
    ("Open the hang evidence", "Every rank at the same moment: stacks, flight recorder, NCCL RAS, counters",
     "app.hang_evidence"),
    ("Copy the checkpoint to the other station", "Over the rail, resumable, sha256 of every file compared",
     "app.copy('checkpoint')"),
    ("Copy the image to the other station", "docker save, over the rail, docker load, image ids compared",
     "app.copy('image')"),
    ("Show the diagnosis", "Findings from every station's log", "toggle_diagnosis"),
    ("Show the GPU processes", "pid, process and GPU memory on the focused station's GPUs (nvidia-smi)",
     "toggle_processes"),
    ("Open the process list", "Every GPU process: user, container, command, CPU %, RSS; sort; end one (TERM, "
     "then KILL)", "app.process_list"),
    ("Show the fleet", "One row per station (state, memory, engine, last error); Enter opens one", "toggle_fleet"),
    ("Show the keys (help)", "Every key of the screen you are on (F1; Esc closes)", "app.toggle_help"),
)
_NAVIGATION_ACTIONS = frozenset(action.removeprefix("app.") for _, _, action in SCREENS)


class NavigationCommands(CommandList):
    """Every screen of the app, from any screen: going there returns to the dashboard first."""

    def commands(self) -> Iterator[Command]:
        for name, help_text, action in SCREENS:
            yield Command(name, help_text, partial(self._go, action))
        if not _on_dashboard(self.screen):
            yield Command("Back to the dashboard", "Close this screen (the stations side by side)",
                          self._home)

    def _home(self) -> bool:
        """Back to the dashboard; a dialog (a confirmation, a running action) is never closed here."""
        if any(isinstance(s, ModalScreen) for s in self.app.screen_stack[1:]):
            self.app.notify("Close the dialog first (Esc).", severity="warning")
            return False
        while len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        return True

    async def _go(self, action: str) -> None:
        if action.startswith("app."):
            await self.app.run_action(action)
        elif self._home():  # on the dashboard: its own actions
            await self.app.run_action(action, self.app.screen_stack[0])
