"""Chat pane: a smoke chat with the served model, reasoning shown apart (dimmed, collapsible).

Streams through the same ``ApiClient`` as ``dgx-console chat``. The request runs as a worker in
the app's loop (httpx is async, nothing blocks); each delta is appended to a ``StreamText``, so a
long reply costs what it adds, not a re-render of everything so far. After a reply: TTFT, output
tokens (reasoning included), tokens/s, the finish reason and any warning (the reasoning budget
trap, a tool-call parser mismatch). The API key field is a password field and is never echoed.
What the server sends (model ids, reply text, tool calls, finish reasons, error bodies) is outside
text: it is shown sanitized and as ``Text``, never as markup (a model id ``[/]`` is just a name).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from dataclasses import dataclass, field
from functools import partial

from rich.text import Text
from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Collapsible, Input, Label, Select, Static, Switch

from console.config import Config
from console.probes.engine_log import EngineProgress
from console.sanitize import one_line, plain
from console.serving import chat_store
from console.serving.chat import (
    EFFORTS,
    SMOKE_TOOL,
    SMOKE_TOOL_PROMPT,
    ChatAccumulator,
    ChatEvent,
    ChatRequest,
    ChatResult,
)
from console.serving.chat_store import ChatStore, SavedTurn, new_session_id
from console.serving.client import ApiClient
from console.serving.errors import ApiError
from console.ui.engine_state import follow_head_engine, why_no_api
from console.ui.providers import ChatCommands
from console.ui.screens.chat_sessions import SessionsScreen, export_session, load_saved
from console.ui.widgets.fitted_footer import FittedFooter
from console.ui.widgets.settings_bar import SettingsBar
from console.ui.widgets.stream_text import StreamText
from console.vocabulary import EnginePhase

DEFAULT_MAX_TOKENS = 1000
STREAM_TIMEOUT_S = 120.0  # the longest wait for the headers and for each data event (chat --timeout's default)
TOTAL_TIMEOUT_S = 900.0  # the longest whole reply (chat --max-time's default)


@dataclass
class ChatSession:
    """The conversation with one API, kept for the app's lifetime so leaving the chat and
    coming back (a new ChatScreen) shows it again; every finished turn is also saved on disk
    under ``id`` (``serving/chat_store.py``), so it can be listed and reopened later."""

    history: list[dict[str, str]] = field(default_factory=list)
    turns: list[tuple[str, ChatResult]] = field(default_factory=list)  # (user line, reply)
    id: str = field(default_factory=new_session_id)
    tools: list[bool] = field(default_factory=list)  # per turn: the tool test


_SESSIONS: weakref.WeakKeyDictionary[App, dict[str, ChatSession]] = weakref.WeakKeyDictionary()


def chat_session(app: App, url: str) -> ChatSession:
    return _SESSIONS.setdefault(app, {}).setdefault(url, ChatSession())


def set_chat_session(app: App, url: str, session: ChatSession) -> ChatSession:
    """``session`` becomes the conversation with ``url`` (a new chat, or one reopened from disk)."""
    _SESSIONS.setdefault(app, {})[url] = session
    return session


def format_stats(r: ChatResult) -> str:
    """One line after a reply: TTFT, output tokens (reasoning included), tok/s, finish reason."""
    parts = []
    if r.ttft_s is not None:
        parts.append(f"TTFT {r.ttft_s * 1000:,.0f} ms")
    if r.output_tokens is not None:
        parts.append(f"{r.output_tokens:,} output tokens (reasoning incl.)")
    if r.tokens_per_s is not None:
        parts.append(f"{r.tokens_per_s:,.1f} tok/s")
    parts.append(f"finish: {one_line(str(r.finish_reason or '-'), 40)}")
    return " · ".join(parts)


class UserMessage(Static):
    DEFAULT_CSS = """
    UserMessage { margin: 1 0 0 0; padding: 0 1; background: $boost; text-style: bold; }
    """


class ReplyView(Vertical):
    """One assistant turn: reasoning (collapsible, dimmed), content, tool calls, then the stats."""

    DEFAULT_CSS = """
    ReplyView { height: auto; margin: 0 0 1 0; }
    ReplyView Collapsible { padding: 0; margin: 0; border: none; background: transparent; }
    ReplyView Collapsible.-empty { display: none; }
    ReplyView .reasoning { color: $text-muted; text-style: dim italic; }
    ReplyView .content { padding: 0 1; }
    ReplyView .tools { color: $accent; padding: 0 1; display: none; }
    ReplyView .tools.-shown { display: block; }
    ReplyView .stats { color: $text-muted; padding: 0 1; }
    ReplyView .stats.-error { color: $error; }
    ReplyView .stats.-waiting { color: $secondary; }
    ReplyView .warnings { color: $warning; padding: 0 1; }
    """

    def __init__(self, done: ChatResult | None = None, engine: EngineProgress | None = None) -> None:
        super().__init__()
        self.engine = engine  # the head's engine phase when the request was sent
        self.reasoning = StreamText(done.reasoning if done else "", classes="reasoning", live=done is None)
        self.content = StreamText(done.content if done else "", classes="content", live=done is None)
        self.collapsible = Collapsible(self.reasoning, title="Reasoning", collapsed=bool(done and done.content),
                                       classes="" if done and done.reasoning else "-empty")
        self._done = done
        self.tools = Static(classes="tools")
        self.stats = Static("…", classes="stats")
        self.warnings = Static(classes="warnings")
        self.result: ChatResult | None = None

    def compose(self) -> ComposeResult:
        yield self.collapsible
        yield self.content
        yield self.tools
        yield self.stats
        yield self.warnings

    def on_mount(self) -> None:
        if self._done is not None:  # a reply from before the screen was (re)opened
            self.finish(self._done)

    def add_event(self, ev: ChatEvent) -> None:
        if ev.kind == "reasoning":
            if not len(self.reasoning):
                self.collapsible.remove_class("-empty")
            self.reasoning.append(ev.text)
        elif ev.kind == "content":
            if len(self.reasoning) and not len(self.content):
                self.collapsible.collapsed = True  # the answer started: fold the thinking away
            self.content.append(ev.text)

    def finish(self, r: ChatResult) -> None:
        self.result = r
        self.reasoning.seal()
        self.content.seal()
        if r.tool_calls:
            lines = []
            for call in r.tool_calls:
                fn = call.get("function") or {}
                args = fn.get("arguments") or ""
                try:
                    args = json.dumps(json.loads(args), ensure_ascii=False)
                except ValueError:
                    pass
                lines.append(f"tool call → {one_line(str(fn.get('name')), 200)}({one_line(str(args), 4000)})")
            self.tools.update(plain("\n".join(lines)))
            self.tools.add_class("-shown")
        if r.error is not None:
            waiting = why_no_api(self.engine) if r.error.kind in ("connect", "unavailable") else None
            if waiting is not None and self.engine is not None and self.engine.phase != EnginePhase.FAILED:
                self.stats.update(Text(f"◌ {waiting}: the API answers once the engine is ready; send again then"))
                self.stats.add_class("-waiting")
            else:
                self.stats.update(plain(_error_line(r.error) + (f" — {waiting}" if waiting else "")))
                self.stats.add_class("-error")
        elif r.cancelled:
            self.stats.update(plain("cancelled · " + format_stats(r)))
        else:
            self.stats.update(plain(format_stats(r)))
        if r.warnings:
            self.warnings.update(plain("\n".join(f"⚠ {one_line(w, 500)}" for w in r.warnings)))
        n_reason = len(self.reasoning)
        self.collapsible.title = f"Reasoning ({n_reason:,} chars)" if n_reason else "Reasoning"


def _error_line(e: ApiError) -> str:
    label = {"unauthorized": "API key", "unavailable": "engine down", "timeout": "timeout",
             "connect": "unreachable", "stream": "server error", "http": "request failed",
             "too-large": "reply too large", "cut": "reply cut short"}.get(e.kind, e.kind)
    return f"✖ {label}: {e}"


class ChatScreen(Screen):
    """Chat with the served model. ``config_or_url``: the console's Config or an API base URL."""

    COMMANDS = {ChatCommands}
    DEFAULT_CSS = """
    ChatScreen #chat-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    ChatScreen #effort { width: 16; }
    ChatScreen #max-tokens { width: 12; }
    ChatScreen #temperature { width: 13; }
    ChatScreen #api-key { width: 22; }
    ChatScreen #conversation { height: 1fr; padding: 0 1; border-top: hkey $panel-lighten-2;
                               border-title-color: $text-muted; }
    ChatScreen #conversation:focus { border-top: hkey $accent; border-title-color: $accent; }
    ChatScreen #prompt { dock: bottom; margin: 0 0 1 0; }
    """
    BINDINGS = [
        Binding("escape", "back", "Back / stop", id="chat-back",
                tooltip="Stop the reply being streamed, else leave the chat"),
        Binding("ctrl+o", "tool_test", "Tool test", id="chat-tool-test",
                tooltip="Offer a get_weather tool and show the parsed call"),
        Binding("ctrl+l", "clear", "Clear", id="chat-clear", tooltip="Forget the conversation"),
        Binding("ctrl+y", "copy_last", "Copy reply", id="chat-copy", tooltip="Copy the last reply to the clipboard"),
        Binding("ctrl+r", "toggle_reasoning", "Reasoning", id="chat-reasoning",
                tooltip="Fold or unfold the last reasoning"),
        Binding("ctrl+s", "sessions", "Sessions", id="chat-sessions",
                tooltip="The kept chats: reopen one, export it (Markdown and JSON)"),
        Binding("ctrl+g", "export", "Export", id="chat-export",
                tooltip="Write this chat, reasoning and tool calls included, as Markdown and JSON"),
    ]

    def __init__(self, config_or_url: Config | str, *, api_key: str | None = None, model: str | None = None,
                 head_engine: EngineProgress | None = None, name: str | None = None, id: str | None = None,
                 stream_timeout: float = STREAM_TIMEOUT_S, total_timeout: float = TOTAL_TIMEOUT_S,
                 store: ChatStore | None = None) -> None:
        super().__init__(name=name, id=id)
        self.store = store or ChatStore()  # every finished turn is kept there (off the event loop)
        if isinstance(config_or_url, Config):
            self.url = config_or_url.api_url()
            self._config_key = api_key or config_or_url.api_key()
            self._model_hint = model or config_or_url.profile.served_model_name
        else:
            self.url = str(config_or_url).rstrip("/")
            self._config_key = api_key
            self._model_hint = model
        self.model: str | None = model
        # bounded like ``dgx-console chat``: headers and each data event within stream_timeout, the
        # whole reply within total_timeout, the model list within 10 s (a dripping server ends in words)
        self.client = ApiClient(self.url, api_key=self._config_key, timeout=10.0, stream_timeout=stream_timeout,
                                total_timeout=total_timeout)
        self.session = ChatSession()
        self.replies: list[ReplyView] = []
        self.busy = False
        self.head_engine = head_engine  # the head station's phase, then the app's signal (no I/O here)

    @property
    def history(self) -> list[dict[str, str]]:
        return self.session.history

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="chat-title")
        yield SettingsBar(
            Label("Effort"),
            Select([("default", "default")] + [(e, e) for e in EFFORTS], value="default", allow_blank=False,
                   id="effort"),
            Label("No think"), Switch(False, id="no-think"),
            Label("Max tokens"), Input(str(DEFAULT_MAX_TOKENS), type="integer", id="max-tokens"),
            Label("Temp"), Input("", placeholder="default", type="number", id="temperature"),
            Label("API key"),
            Input("", placeholder="(from config)" if self._config_key else "(none)", password=True, id="api-key"),
            id="settings")
        conv = VerticalScroll(id="conversation")
        conv.border_title = "conversation (↑↓ PgUp PgDn scroll)"  # a Tab stop says what it is
        yield conv
        yield Input(placeholder="Message — Enter to send, Ctrl+O tool test, Esc stop/back", id="prompt")
        yield FittedFooter()

    def on_mount(self) -> None:
        follow_head_engine(self, self.set_head_engine)
        self.session = chat_session(self.app, self.url)
        self._show_turns()
        self.query_one("#prompt", Input).focus()

    def _show_turns(self) -> None:
        conv = self.query_one("#conversation", VerticalScroll)
        for user_line, result in self.session.turns:
            reply = ReplyView(result)
            conv.mount(UserMessage(plain(user_line)))
            conv.mount(reply)
            self.replies.append(reply)
        conv.anchor()

    async def on_unmount(self) -> None:
        await self.client.aclose()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one(SettingsBar).fit(self.app.size.width, self.app.size.height)

    def set_head_engine(self, progress: EngineProgress | None) -> None:
        """The head station's engine phase (its title says when the API cannot answer yet)."""
        self.head_engine = progress
        if not self.busy:
            with contextlib.suppress(NoMatches):
                self.query_one("#chat-title", Static).update(self._title())

    def _title(self, state: str = "") -> Text:
        """The model id comes from the server: plain Text (``[/]`` in an id once crashed the app)."""
        model = one_line(self.model or self._model_hint or "?", 120)
        if not state and (waiting := why_no_api(self.head_engine)):
            # "the engine failed at start-up" names the engine itself; "still loading (...)" does not
            state = waiting if waiting.startswith("the engine") else f"engine {waiting}"
        return Text(f"Chat · {model}" + (f" · {state}" if state else "") + f" · {one_line(self.url, 120)}")

    # ------------------------------------------------------------------ settings

    @on(Input.Changed, "#api-key")
    def _key_changed(self, event: Input.Changed) -> None:
        self.client.set_api_key(event.value.strip() or self._config_key)

    def _settings(self) -> dict:
        effort = self.query_one("#effort", Select).value
        raw_max = self.query_one("#max-tokens", Input).value.strip()
        raw_temp = self.query_one("#temperature", Input).value.strip()
        max_tokens = int(raw_max) if raw_max.isdigit() and int(raw_max) > 0 else None
        try:
            temperature = float(raw_temp) if raw_temp else None
        except ValueError:
            temperature = None
        return {"effort": None if effort in ("default", Select.BLANK) else str(effort),
                "no_think": self.query_one("#no-think", Switch).value,
                "max_tokens": max_tokens, "temperature": temperature}

    # ------------------------------------------------------------------ sending

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.busy:
            self.notify("A reply is still streaming (Esc stops it)", severity="warning")
            return
        event.input.value = ""
        self.send(text)

    def action_tool_test(self) -> None:
        if not self.busy:
            self.send(SMOKE_TOOL_PROMPT, tools=True)

    def send(self, text: str, tools: bool = False) -> None:
        """Show the message and stream the reply (a worker in the app's loop)."""
        conv = self.query_one("#conversation", VerticalScroll)
        reply = ReplyView(engine=self.head_engine)
        user_line = ("[tool test] " if tools else "") + text
        conv.mount(UserMessage(plain(user_line)))
        conv.mount(reply)
        self.replies.append(reply)
        messages = [*self.history, {"role": "user", "content": text}]
        self.busy = True
        self._run(reply, user_line, messages, tools)

    @work(exclusive=True, group="chat")
    async def _run(self, reply: ReplyView, user_line: str, messages: list[dict[str, str]], tools: bool) -> None:
        title = self.query_one("#chat-title", Static)
        try:
            if self.model is None:
                title.update(self._title("finding the model…"))
                try:
                    ids = [m["id"] for m in await self.client.models()]
                except ApiError as exc:
                    reply.engine = self.head_engine
                    reply.finish(ChatResult(error=exc))
                    return
                except asyncio.CancelledError:
                    reply.finish(ChatResult(cancelled=True))
                    raise
                self.model = self._model_hint if self._model_hint in ids else (ids[0] if ids else self._model_hint)
                if not self.model:
                    reply.finish(ChatResult(error=ApiError("http", "the server lists no model")))
                    return
            title.update(self._title("streaming…"))
            req = ChatRequest(messages=tuple(messages), model=self.model, tools=(SMOKE_TOOL,) if tools else (),
                              **self._settings())
            acc = ChatAccumulator(req, time.perf_counter())
            try:
                result = await self.client.chat(req, on_event=reply.add_event, accumulator=acc)
            except asyncio.CancelledError:  # Esc: what arrived stays on screen, marked cancelled
                result = acc.finish(cancelled=True)
                reply.engine = self.head_engine
                reply.finish(result)
                self._record(user_line, result, tools)
                raise
            except Exception as exc:  # noqa: BLE001 - a broken reply is a visible error, never the app's end
                result = ChatResult(error=ApiError("stream", f"internal error: {type(exc).__name__}: {exc}"))
            reply.engine = self.head_engine  # the phase when the answer (or the refusal) came
            reply.finish(result)
            self._record(user_line, result, tools)
            if result.error is None and not result.cancelled and not tools:
                self.session.history = [*messages, {"role": "assistant", "content": result.content}]
        finally:
            self.busy = False
            title.update(self._title())

    # ------------------------------------------------------------------ actions

    def action_back(self) -> None:
        if self.busy:
            self.workers.cancel_group(self, "chat")
        else:
            self.app.pop_screen()

    def action_clear(self) -> None:
        """A new chat: the one on screen stays kept on disk (Ctrl+S lists it)."""
        self.open_session(ChatSession())

    def open_session(self, session: ChatSession) -> None:
        """Show ``session`` instead of the conversation on screen (a new chat, or a reopened one)."""
        if self.busy:
            self.workers.cancel_group(self, "chat")
        self.session = set_chat_session(self.app, self.url, session)
        self.replies = []
        self.query_one("#conversation", VerticalScroll).remove_children()
        self._show_turns()

    def _record(self, user_line: str, result: ChatResult, tools: bool) -> None:
        """A finished turn: into the conversation, and onto the disk by the store's writer thread."""
        self.session.turns.append((user_line, result))
        self.session.tools.append(tools)
        turn = SavedTurn(user_line, result, tools, time.time(), self.model)
        chat_store.submit(partial(self.store.add_turn, self.session.id, self.url, turn),
                          on_error=self._store_failed)

    def _store_failed(self, exc: BaseException) -> None:  # on the writer thread
        with contextlib.suppress(Exception):  # the app may be gone
            self.app.call_from_thread(self.app.notify, one_line(f"chat not saved: {exc}", 300), severity="error")

    def action_sessions(self) -> None:
        self.app.push_screen(SessionsScreen(self.store, self.session.id), self._reopen)

    def _reopen(self, session_id: str | None) -> None:
        if session_id and session_id != self.session.id:
            self._load_session(session_id)

    @work(exclusive=True, group="chat-load")
    async def _load_session(self, session_id: str) -> None:
        saved = await load_saved(self.store, session_id)
        if saved is None:
            self.notify("That chat is no longer kept", severity="warning")
            return
        self.open_session(ChatSession(history=saved.history(), turns=[(t.user, t.result) for t in saved.turns],
                                      id=saved.summary.id, tools=[t.tools for t in saved.turns]))
        if saved.summary.url != self.url:
            self.notify(one_line(f"Reopened a chat with {saved.summary.url}; new turns go to {self.url}", 300))

    @work(exclusive=True, group="chat-export")
    async def action_export(self) -> None:
        if not self.session.turns:
            self.notify("Nothing to export yet")
            return
        await export_session(self, self.store, self.session.id)

    def last_reply_text(self) -> str | None:
        for reply in reversed(self.replies):
            if reply.result is not None and (reply.content.text or reply.result.tool_calls):
                return reply.content.text or json.dumps(reply.result.tool_calls)
        return None

    def action_copy_last(self) -> None:
        text = self.last_reply_text()
        if text is None:
            self.notify("No reply to copy yet")
            return
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the last reply ({len(text):,} characters)")

    def action_toggle_reasoning(self) -> None:
        if self.replies:
            c = self.replies[-1].collapsible
            c.collapsed = not c.collapsed
