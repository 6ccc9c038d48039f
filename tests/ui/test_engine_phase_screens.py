"""What a person at the desk reads while the engine loads (Pilot, the real app, no services: the
messages the station services would post are posted by the test): the serving box says
"starting" in a calm colour, the chat says "still loading (capturing CUDA graphs)" instead of
"unreachable", and the chat's settings fit and stay readable at 80 columns."""

from __future__ import annotations

from pair_app import pair_app
from rich.console import Console
from textual.widgets import Input, Label, Select, Static

from console.probes.engine_log import EngineProgress
from console.serving.metrics import ServingSnapshot
from console.station.messages import EngineUpdate
from console.ui.app import ConsoleApp
from console.ui.screens.chat import ChatScreen
from console.ui.widgets.serving_panel import ServingPanel, ServingUpdate, render_snapshot
from console.ui.widgets.settings_bar import SettingsBar
from tests.ports import refused_port
from tests.waiting import until


def _text(renderable, width: int = 90) -> str:
    c = Console(width=width, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


def _app(tmp_path) -> ConsoleApp:
    return pair_app(tmp_path, api_url=f"http://127.0.0.1:{refused_port()}")


UNREACHABLE = ServingSnapshot(url="http://127.0.0.1:9", status="unreachable", healthy=False,
                              error="cannot reach http://127.0.0.1:9: All connection attempts failed", polled_at=1.0)


def test_render_says_starting_while_the_engine_loads_and_not_answering_once_it_should():
    graphs = EngineProgress(phase="graphs")
    out = _text(render_snapshot(UNREACHABLE, now=2.0, engine=graphs))
    assert "starting (engine capturing CUDA graphs)" in out and "not answering" not in out
    assert "answers once the engine is ready" in out and "All connection attempts failed" not in out
    ready = _text(render_snapshot(UNREACHABLE, now=2.0, engine=EngineProgress(phase="ready")))
    assert "not answering" in ready  # ready but silent: that is a failure
    assert "not answering" in _text(render_snapshot(UNREACHABLE, now=2.0, engine=EngineProgress(phase="failed")))


async def test_serving_box_is_calm_while_the_head_engine_loads(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(200, 50)) as pilot:
        panel = app.panes["A"].query_one(ServingPanel)
        app.post_message(ServingUpdate(UNREACHABLE))
        await until(lambda: panel.snapshot is not None, what="the snapshot", pilot=pilot)
        assert panel.has_class("-down")  # no engine phase known: not answering is a failure
        app.post_message(EngineUpdate("A", EngineProgress(phase="loading", load_pct=40)))
        await until(lambda: panel.engine is not None, what="the head's phase", pilot=pilot)
        assert panel.has_class("-starting") and not panel.has_class("-down")
        assert "starting (engine loading weights 40%)" in _text(panel.content)
        app.post_message(EngineUpdate("B", EngineProgress(phase="failed")))  # a worker's phase is not the API's
        b = app.stations["B"]
        await until(lambda: b.engine is not None and b.engine.phase == "failed", what="B's phase", pilot=pilot)
        await pilot.pause()  # whatever B's update would have made the app post has been handled
        assert panel.engine.phase == "loading"


async def test_chat_says_still_loading_instead_of_unreachable(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(120, 35)) as pilot:
        app.post_message(EngineUpdate("A", EngineProgress(phase="graphs")))
        await until(lambda: app.head_engine is not None, what="the head's phase", pilot=pilot)
        await pilot.press("c")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        chat = app.screen
        assert "engine still loading (capturing CUDA graphs)" in str(chat.query_one("#chat-title", Static).content)
        chat.query_one("#prompt", Input).value = "hello"
        await pilot.press("enter")
        await until(lambda: chat.replies and chat.replies[-1].result is not None and not chat.busy,
                    what="reply", pilot=pilot)
        stats = str(chat.replies[-1].stats.content)
        assert stats.startswith("◌ still loading (capturing CUDA graphs)") and "unreachable" not in stats
        assert chat.replies[-1].stats.has_class("-waiting") and not chat.replies[-1].stats.has_class("-error")
        # the engine is up now (the app hands the phase over while the chat is open): a refusal is an error
        app.post_message(EngineUpdate("A", EngineProgress(phase="ready")))
        await until(lambda: chat.head_engine.phase == "ready", what="the new phase", pilot=pilot)
        assert "still loading" not in str(chat.query_one("#chat-title", Static).content)
        chat.query_one("#prompt", Input).value = "again"
        await pilot.press("enter")
        await until(lambda: len(chat.replies) == 2 and chat.replies[-1].result is not None
                     and not chat.busy, what="the second reply", pilot=pilot)
        assert str(chat.replies[-1].stats.content).startswith("✖ unreachable")


async def test_chat_settings_fit_at_80_columns_and_show_1000_and_the_focus(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("c")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        chat = app.screen
        bar = chat.query_one(SettingsBar)
        assert bar.has_class("-compact")  # one line a row on a 24-row terminal
        for field in bar.query("Input, Select, Switch"):
            assert field.region.width > 0 and field.region.right <= 80, field.id  # nothing off-screen
        conv = chat.query_one("#conversation")
        assert conv.region.height >= 10  # room left for the conversation
        max_tokens = chat.query_one("#max-tokens", Input)
        max_tokens.focus()
        await pilot.press("end")
        await pilot.pause()
        assert "1000" in max_tokens.render_line(0).text  # all four digits with the cursor after them
        labels = {str(lbl.content): lbl for lbl in bar.query(Label)}
        assert labels["Max tokens"].has_class("-focused") and not labels["Temp"].has_class("-focused")
        chat.query_one("#effort", Select).focus()
        await pilot.pause()
        assert labels["Effort"].has_class("-focused") and not labels["Max tokens"].has_class("-focused")
    async with _app(tmp_path).run_test(size=(200, 50)) as pilot:  # wide: one row of tall fields
        await pilot.press("c")
        await until(lambda: isinstance(pilot.app.screen, ChatScreen), what="the chat", pilot=pilot)
        bar = pilot.app.screen.query_one(SettingsBar)
        assert not bar.has_class("-compact") and bar.per_row == 5
        max_tokens = pilot.app.screen.query_one("#max-tokens", Input)
        max_tokens.focus()
        await pilot.press("end")
        await pilot.pause()
        assert "1000" in max_tokens.render_line(0).text


async def test_bench_says_still_loading_instead_of_cannot_reach(tmp_path):
    from console.ui.screens.bench import BenchScreen

    app = _app(tmp_path)
    async with app.run_test(size=(150, 45)) as pilot:
        app.post_message(EngineUpdate("A", EngineProgress(phase="kv-cache")))
        await until(lambda: app.head_engine is not None, what="the head's phase", pilot=pilot)
        await pilot.press("b")
        await until(lambda: isinstance(app.screen, BenchScreen), what="the bench", pilot=pilot)
        bench = app.screen
        await pilot.press("ctrl+r")
        await until(lambda: bench.state == "error" and not bench.running, what="the refusal", pilot=pilot)
        status = str(bench.query_one("#status", Static).content)
        assert status.startswith("◌ still loading (allocating KV cache)") and "cannot reach" not in status


async def test_chat_header_says_the_engine_failed_once(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(120, 35)) as pilot:
        app.post_message(EngineUpdate("A", EngineProgress(phase="failed")))
        await until(lambda: app.head_engine is not None, what="the head's phase", pilot=pilot)
        await pilot.press("c")
        await until(lambda: isinstance(app.screen, ChatScreen), what="the chat", pilot=pilot)
        title = str(app.screen.query_one("#chat-title", Static).content)
        assert "· the engine failed at start-up" in title and "engine the engine" not in title
