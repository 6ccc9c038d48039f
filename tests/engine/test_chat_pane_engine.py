"""The chat pane and the serving panel (Pilot) against the real vLLM server of this tier."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

from rich.console import Console
from textual.app import App, ComposeResult
from textual.widgets import Input

from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor
from console.ui.screens.chat import ChatScreen
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate

_spec = importlib.util.spec_from_file_location("engine_build_model", Path(__file__).with_name("build_model.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
EXPECTED = _mod.EXPECTED


class ChatApp(App):
    def __init__(self, url: str, key: str) -> None:
        super().__init__()
        self.url, self.key = url, key

    def compose(self) -> ComposeResult:
        yield ServingPanel()

    def on_mount(self) -> None:
        self.push_screen(ChatScreen(self.url, api_key=self.key))

    def on_serving_update(self, msg: ServingUpdate) -> None:
        self.query_one(ServingPanel).show(msg.snapshot)


async def _idle(pilot, screen: ChatScreen) -> None:
    for _ in range(600):
        await pilot.pause()
        if not screen.busy:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("reply did not finish")


async def _send(pilot, screen: ChatScreen, text: str):
    screen.query_one("#prompt", Input).value = text
    await pilot.press("enter")
    await pilot.pause()
    await _idle(pilot, screen)
    return screen.replies[-1]


def _text(renderable) -> str:
    c = Console(width=120, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


async def test_chat_pane_against_vllm(engine) -> None:
    app = ChatApp(engine.url, engine.api_key)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        reply = await _send(pilot, screen, "hi")
        assert reply.reasoning.text == EXPECTED["reasoning"] and reply.content.text == EXPECTED["content"]
        assert screen.model == engine.model
        stats = str(reply.stats.render())
        assert f"{EXPECTED['completion_tokens']} output tokens" in stats and "finish: stop" in stats
        screen.query_one("#max-tokens", Input).value = "3"
        reply = await _send(pilot, screen, "hi")
        assert reply.content.text == "" and "max_tokens (3)" in str(reply.warnings.render())
        screen.query_one("#max-tokens", Input).value = "100"
        await pilot.press("ctrl+o")
        await _idle(pilot, screen)
        assert 'get_weather({"city": "Paris"})' in str(screen.replies[-1].tools.render())


async def test_serving_panel_against_vllm(engine) -> None:
    app = ChatApp(engine.url, engine.api_key)
    async with app.run_test(size=(120, 40)) as pilot, ApiClient(engine.url, api_key=engine.api_key) as c:
        app.pop_screen()
        mon = ServingMonitor(c, lambda s: app.post_message(ServingUpdate(s)))
        mon.post(await mon.poll_once())
        await pilot.pause()
        panel = app.query_one(ServingPanel)
        out = _text(panel.content)
        assert "● healthy" in out and f"{engine.model} (vllm 0.32" in out and "0 run · 0 wait" in out
        assert "MTP" not in out and "updated 0 s ago" in out
        c.set_api_key(None)  # the models list is behind --api-key; health and metrics are not
        mon.post(await mon.poll_once(refresh=True))
        await pilot.pause()
        out = _text(panel.content)
        assert "● API key refused" in out and "--api-key missing" in out and "updated 0 s ago" in out
        assert not panel.has_class("-stale")
