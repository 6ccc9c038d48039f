"""The TUI chat pane and serving panel (Pilot) against the hostile server: the app stays up, a model
id ``[/]`` is a name (it once ended the app with MarkupError), and what Textual would write to the
terminal for a full repaint carries no escape sequence but its own CSI drawing, no C0/C1 control,
and none of the payloads (no OSC 52 clipboard write, no title change)."""

from __future__ import annotations

import tracemalloc

from hostile_api import MODEL_ID, PAYLOAD_MARKERS, terminal_dirty
from textual.app import App, ComposeResult
from textual.widgets import Input

from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor
from console.ui.screens.chat import ChatScreen
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate
from tests.waiting import until


def terminal_output(app: App) -> str:
    """What Textual writes to the terminal for a full repaint of the current screen."""
    return app.screen._compositor.render_full_update().render_segments(app.console)


def assert_screen_clean(app: App, payloads: bool = True) -> str:
    """``payloads=False`` where JSON text is shown (tool arguments): a ``\\u001b`` there is six
    harmless characters, not an escape."""
    out = terminal_output(app)
    assert not terminal_dirty(out), terminal_dirty(out)
    assert "\x1b]" not in out and "\x1bP" not in out and "\x1b_" not in out  # no OSC / DCS / APC at all
    for marker in PAYLOAD_MARKERS if payloads else ():
        assert marker not in out
    return out


class ChatApp(App):
    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def on_mount(self) -> None:
        self.push_screen(ChatScreen(self.url))


async def _reply(pilot, screen: ChatScreen, text: str) -> None:
    screen.query_one("#prompt", Input).value = text
    await pilot.press("enter")
    await until(lambda: not screen.busy and screen.replies and screen.replies[-1].result is not None,
                what="the reply to finish", pilot=pilot)


async def test_chat_pane_shows_hostile_reply_as_plain_text(hostile):
    app = ChatApp(hostile.url)
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        await _reply(pilot, screen, "hi")
        assert app.is_running and screen.model == MODEL_ID  # the raw id is kept for the requests
        reply = screen.replies[-1]
        assert reply.result.error is None
        assert "[/] [bold red]x[/bold red]" in reply.content.text  # markup shown as text
        reply.collapsible.collapsed = False
        await pilot.pause()
        out = assert_screen_clean(app)
        assert "Chat · evil[/][bold]m[/bold]" in out  # the title: the id as a name, sanitized
        assert "finish: stop" in out

        hostile.mode = "tools"
        await _reply(pilot, screen, "tool please")
        await pilot.pause()
        assert "tool call → get[/]" in str(screen.replies[-1].tools.render())
        assert_screen_clean(app, payloads=False)

        for mode in ("error-400", "error-500-huge", "wrong-types", "nested"):
            hostile.mode = mode
            await _reply(pilot, screen, mode)
            await pilot.pause()
            assert app.is_running
            assert_screen_clean(app, payloads=False)


async def test_chat_pane_memory_stays_bounded_on_an_endless_reply(hostile, monkeypatch):
    import console.serving.client as client_mod

    monkeypatch.setattr(client_mod, "MAX_STREAM_BYTES", 4 * 1024 * 1024)
    hostile.mode = "endless-line"
    app = ChatApp(hostile.url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        tracemalloc.start()
        try:
            await _reply(pilot, screen, "hi")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert app.is_running
        assert screen.replies[-1].result.error.kind == "too-large"
        assert peak < 64 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB for a 4 MB cap"
        assert_screen_clean(app)


class PanelApp(App):
    def compose(self) -> ComposeResult:
        yield ServingPanel(id="serving")

    def on_serving_update(self, msg: ServingUpdate) -> None:
        self.query_one(ServingPanel).show(msg.snapshot)


async def test_serving_panel_hostile_ids_labels_and_a_huge_metrics_body(hostile):
    app = PanelApp()
    # timeout bounds the whole request: generous, the cap (not the clock) must end the 50 MB read
    async with app.run_test(size=(120, 14)) as pilot, ApiClient(hostile.url, timeout=20) as client:
        mon = ServingMonitor(client, lambda s: app.post_message(ServingUpdate(s)))
        mon.post(await mon.poll_once())  # small /metrics with escapes and markup in labels
        await pilot.pause()
        panel = app.query_one(ServingPanel)
        assert panel.snapshot.error is None and panel.snapshot.running == 1
        out = assert_screen_clean(app)
        assert "evil[/][bold]m[/bold]" in out and "vllm 0.33[/]" in out

        hostile.metrics_mb = 50  # a 50 MB /metrics, chunked (no Content-Length to refuse early)
        tracemalloc.start()
        try:
            mon.post(await mon.poll_once())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        await pilot.pause()
        snap = panel.snapshot
        assert snap.error == "metrics too large (over 8 MB): not read"
        assert hostile.metrics_sent < 40 * 1024 * 1024  # the client stopped reading
        assert peak < 40 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB"
        assert snap.gen_tok_s is None or snap.gen_tok_s < 1e6  # no absurd rate from the huge body
        out = assert_screen_clean(app)
        assert "metrics too large" in out
        assert app.is_running
