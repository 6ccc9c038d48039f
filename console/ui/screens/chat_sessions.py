"""The kept chats (Ctrl+S in the chat): newest first, Enter reopens one, ``e`` exports it as
Markdown and JSON into the data directory. The list is read off the event loop; titles and model
ids are outside text (the user's first line, the server's model id): shown as ``Text``, sanitized.
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from console.sanitize import one_line
from console.serving import chat_store
from console.serving.chat_export import export_both
from console.serving.chat_store import ChatStore, SavedSession, SessionSummary
from console.ui.widgets.fitted_footer import FittedFooter


async def load_saved(store: ChatStore, session_id: str) -> SavedSession | None:
    """The session once the writes before now have landed (read on a thread)."""
    def read() -> SavedSession | None:
        chat_store.flush()
        return store.load(session_id)

    return await asyncio.to_thread(read)


async def export_session(where: Widget, store: ChatStore, session_id: str) -> None:
    """Export a kept session (Markdown and JSON) and say where it went."""
    saved = await load_saved(store, session_id)
    if saved is None:
        where.notify("That chat is not kept (yet)", severity="warning")
        return
    try:
        md, js = await asyncio.to_thread(export_both, saved)
    except Exception as exc:  # noqa: BLE001 - a full disk is a notice, never the app's end
        where.notify(one_line(f"export failed: {exc}", 300), severity="error")
        return
    where.notify(one_line(f"Exported to {md} and {js.name}", 400), timeout=10)


def _row(s: SessionSummary, current: bool) -> Text:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated_at))
    t = Text(f"{when}  ", style="dim")
    t.append(one_line(s.title, 60), style="bold" if current else "")
    t.append(f"  · {s.turns} turn{'s' if s.turns != 1 else ''} · {one_line(s.model or '?', 40)}", style="dim")
    if current:
        t.append("  (on screen)", style="italic")
    return t


class SessionsScreen(ModalScreen[str | None]):
    """Pick a kept chat; dismisses with its id (None: nothing picked)."""

    DEFAULT_CSS = """
    SessionsScreen { align: center middle; }
    SessionsScreen > Vertical { width: 90%; height: 80%; border: round $accent; background: $surface; }
    SessionsScreen #sessions-title { height: 1; padding: 0 1; text-style: bold; }
    SessionsScreen OptionList { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "dismiss_none", "Close", id="sessions-close"),
        Binding("e", "export", "Export", id="sessions-export",
                tooltip="Write the highlighted chat as Markdown and JSON (reasoning and tool calls included)"),
    ]

    def __init__(self, store: ChatStore, current: str | None = None) -> None:
        super().__init__()
        self.store = store
        self.current = current
        self.sessions: list[SessionSummary] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Kept chats — Enter reopens, e exports, Esc closes", id="sessions-title")
            yield OptionList(id="sessions")
        yield FittedFooter()

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        self._load()

    @work(exclusive=True)
    async def _load(self) -> None:
        def read() -> list[SessionSummary]:
            chat_store.flush()
            return self.store.list_sessions()

        try:
            self.sessions = await asyncio.to_thread(read)
        except Exception as exc:  # noqa: BLE001 - an unreadable file is a line on screen
            self.query_one("#sessions-title", Static).update(Text(one_line(f"chats not readable: {exc}", 300)))
            return
        ol = self.query_one(OptionList)
        ol.clear_options()
        if not self.sessions:
            self.query_one("#sessions-title", Static).update("No chat kept yet — Esc closes")
            return
        ol.add_options([Option(_row(s, s.id == self.current), id=s.id) for s in self.sessions])
        ol.highlighted = 0

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)

    @work(exclusive=True, group="export")
    async def action_export(self) -> None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None or not self.sessions:
            return
        await export_session(self, self.store, self.sessions[ol.highlighted].id)
