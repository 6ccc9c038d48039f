"""The chat pane (Pilot) against the simulated API on 127.0.0.1: streaming, reasoning apart,
settings, stats, the budget trap, the tool test, errors, cancel, clear and copy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web
from textual.app import App
from textual.widgets import Input, Select, Switch

from console.sim.api import FixedBackend
from console.sim.api import create_app as sim_app
from console.sim.replies import EFFORT_REASONING_TOKENS, plan_reply
from console.ui.screens.chat import ChatScreen, ReplyView
from tests.waiting import until


@dataclass
class Backend(FixedBackend):
    tokens_per_s: float = 3000.0
    max_num_seqs: int = 4


class ChatApp(App):
    def __init__(self, url: str, **kw) -> None:
        super().__init__()
        self.url, self.kw = url, kw

    def on_mount(self) -> None:
        self.push_screen(ChatScreen(self.url, **self.kw))


@pytest.fixture
async def sim() -> AsyncIterator[tuple[Backend, str]]:
    b = Backend()
    runner = web.AppRunner(sim_app(b))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield b, f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def wait_idle(pilot, screen: ChatScreen) -> None:
    await until(lambda: not screen.busy, what="the reply to finish", timeout=20, pilot=pilot)


async def send(pilot, screen: ChatScreen, text: str) -> ReplyView:
    prompt = screen.query_one("#prompt", Input)
    prompt.value = text
    await pilot.press("enter")
    await pilot.pause()
    await wait_idle(pilot, screen)
    return screen.replies[-1]


async def test_reply_streams_with_reasoning_apart_and_stats(sim) -> None:
    b, url = sim
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        reply = await send(pilot, screen, "hello there")
        plan = plan_reply({"messages": [{"role": "user", "content": "hello there"}]}, "glm-5.3", "vllm")
        assert reply.reasoning.text == "".join(plan.reasoning)
        assert reply.content.text == "".join(plan.content)
        assert reply.collapsible.collapsed  # folded once the answer began
        stats = str(reply.stats.render())
        n = len(plan.reasoning) + len(plan.content) + 1
        assert "TTFT" in stats and f"{n:,} output tokens" in stats and "tok/s" in stats and "finish: stop" in stats
        assert screen.model == "glm-5.3"
        assert screen.history[-1] == {"role": "assistant", "content": reply.content.text}
        # the next turn carries the history
        await send(pilot, screen, "and then?")
        assert len(screen.history) == 4 and len(screen.replies) == 2


async def test_settings_reach_the_request_and_budget_trap(sim) -> None:
    b, url = sim
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        screen.query_one("#effort", Select).value = "low"
        reply = await send(pilot, screen, "hi")
        assert len(reply.reasoning.text.split()) <= EFFORT_REASONING_TOKENS["low"]
        assert reply.result.usage["completion_tokens_details"]["reasoning_tokens"] == EFFORT_REASONING_TOKENS["low"]
        screen.query_one("#no-think", Switch).value = True
        reply = await send(pilot, screen, "hi")
        assert reply.reasoning.text == "" and reply.collapsible.has_class("-empty") and reply.content.text
        screen.query_one("#no-think", Switch).value = False
        screen.query_one("#effort", Select).value = "max"
        screen.query_one("#max-tokens", Input).value = "20"
        reply = await send(pilot, screen, "hi")
        assert reply.content.text == "" and reply.result.finish_reason == "length"
        warning = str(reply.warnings.render())
        assert "max_tokens (20)" in warning and "~1000" in warning
        assert "finish: length" in str(reply.stats.render())


async def test_tool_test_shows_the_parsed_call(sim) -> None:
    b, url = sim
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await pilot.press("ctrl+o")
        await wait_idle(pilot, screen)
        reply = screen.replies[-1]
        assert 'get_weather({"city": "Paris"})' in str(reply.tools.render())
        assert reply.result.finish_reason == "tool_calls" and screen.history == []


async def test_errors_are_states_and_key_field_is_used(sim) -> None:
    b, url = sim
    b.api_key = "sim-secret"
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        reply = await send(pilot, screen, "hi")
        line = str(reply.stats.render())
        assert reply.stats.has_class("-error") and "--api-key missing" in line
        screen.query_one("#api-key", Input).value = "sim-secret"
        await pilot.pause()
        reply = await send(pilot, screen, "hi")
        assert reply.result.error is None and reply.content.text
        for w in screen.query("Static, Label"):  # the key is never on screen
            assert "sim-secret" not in str(w.render())
        b.state = "dead"
        reply = await send(pilot, screen, "hi")
        assert "engine down" in str(reply.stats.render())


async def test_cancel_clear_and_copy(sim) -> None:
    b, url = sim
    b.tokens_per_s = 30
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        screen.query_one("#prompt", Input).value = "long one"
        await pilot.press("enter")
        await until(lambda: screen.replies and len(screen.replies[-1].reasoning),
                    what="the reasoning to stream", timeout=10, pilot=pilot)
        await pilot.press("escape")  # stops the stream, stays on the screen
        await wait_idle(pilot, screen)
        reply = screen.replies[-1]
        assert reply.result.cancelled and "cancelled" in str(reply.stats.render())
        assert app.screen is screen and screen.history == []
        b.tokens_per_s = 3000
        await send(pilot, screen, "short")
        copied = []
        app.copy_to_clipboard = copied.append  # the terminal clipboard (OSC 52) is not there headless
        await pilot.press("ctrl+y")
        assert copied == [screen.replies[-1].content.text]
        await pilot.press("ctrl+l")
        await pilot.pause()
        assert screen.history == [] and not screen.query(ReplyView)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ChatScreen)


def test_format_stats() -> None:
    from console.serving.chat import ChatResult
    from console.ui.screens.chat import format_stats

    r = ChatResult(finish_reason="stop", usage={"completion_tokens": 1234}, ttft_s=0.4567, tokens_per_s=115.26)
    assert format_stats(r) == "TTFT 457 ms · 1,234 output tokens (reasoning incl.) · 115.3 tok/s · finish: stop"
    assert json.dumps(format_stats(ChatResult())) == '"finish: -"'


async def test_conversation_survives_leaving_the_screen(sim) -> None:
    b, url = sim
    app = ChatApp(url)
    async with app.run_test(size=(120, 40)) as pilot:
        first = app.screen
        reply = await send(pilot, first, "remember me")
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ChatScreen)
        again = ChatScreen(url)  # what pressing `c` again does
        await app.push_screen(again)
        await pilot.pause()
        assert [r.content.text for r in again.replies] == [reply.content.text]
        assert again.replies[0].reasoning.text == reply.reasoning.text
        assert "finish: stop" in str(again.replies[0].stats.render())
        assert again.history[0] == {"role": "user", "content": "remember me"} and len(again.history) == 2
        await send(pilot, again, "second")
        assert len(again.history) == 4
