"""Chats that are kept (Pilot, against the simulated API on 127.0.0.1): every finished turn lands in
the SQLite store under XDG_DATA_HOME, Ctrl+S lists the kept chats, Enter reopens one (its history
carries on), Ctrl+G and the list's ``e`` export it with the reasoning and tool calls, Ctrl+Y still
copies the last reply after a reopen."""

from __future__ import annotations

import json

from textual.widgets import OptionList

from console.serving import chat_store
from console.serving.chat_export import export_dir
from console.serving.chat_store import ChatStore
from console.ui.screens.chat import ChatScreen
from console.ui.screens.chat_sessions import SessionsScreen
from tests.ui.test_chat_screen import ChatApp, send, sim  # noqa: F401 - the fixture
from tests.waiting import until


def kept(store: ChatStore):
    chat_store.flush()
    return store.list_sessions()


async def test_turns_are_kept_listed_reopened_and_exported(sim) -> None:  # noqa: F811
    b, url = sim
    app = ChatApp(url)
    store = ChatStore()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, ChatScreen)
        first = await send(pilot, screen, "first chat, turn one")
        await send(pilot, screen, "first chat, turn two")
        first_id = screen.session.id
        await pilot.press("ctrl+o")  # the tool test is kept too, marked as such
        await until(lambda: not screen.busy and len(screen.session.turns) == 3, what="the tool test", pilot=pilot)
        await pilot.press("ctrl+l")  # a new chat; the first stays kept
        await pilot.pause()
        await send(pilot, screen, "second chat")
        await until(lambda: len(kept(store)) == 2, what="both chats on disk", pilot=pilot)
        sessions = kept(store)
        assert [s.title for s in sessions] == ["second chat", "first chat, turn one"]
        assert sessions[1].turns == 3 and sessions[1].model == "glm-5.3" and sessions[1].url == url
        saved = store.load(first_id)
        assert saved.turns[0].result.reasoning == first.reasoning.text  # the reasoning is kept
        assert saved.turns[2].tools and saved.turns[2].result.tool_calls

        await pilot.press("ctrl+s")
        await until(lambda: isinstance(app.screen, SessionsScreen) and app.screen.sessions,
                    what="the list of kept chats", pilot=pilot)
        ol = app.screen.query_one(OptionList)
        assert ol.option_count == 2
        ol.highlighted = 1
        await pilot.press("enter")
        await until(lambda: app.screen is screen and screen.session.id == first_id, what="the reopened chat",
                    pilot=pilot)
        await until(lambda: len(screen.replies) == 3, what="its turns on screen", pilot=pilot)
        assert screen.replies[0].content.text == first.content.text
        assert len(screen.history) == 4  # two answered turns; the tool test does not join the history
        copied = []
        app.copy_to_clipboard = copied.append
        await pilot.press("ctrl+y")  # the last reply of the reopened chat (the tool call)
        assert copied and "get_weather" in copied[0]
        before = list(screen.history)
        await send(pilot, screen, "carry on")  # the reopened history is what the next request carries
        assert screen.history[:4] == before and screen.history[4] == {"role": "user", "content": "carry on"}
        await until(lambda: kept(store)[0].id == first_id and kept(store)[0].turns == 4,
                    what="the reopened chat grown by one turn", pilot=pilot)

        await pilot.press("ctrl+g")
        await until(lambda: export_dir().is_dir() and len(list(export_dir().iterdir())) == 2,
                    what="the export files", pilot=pilot)
        md = next(export_dir().glob("*.md")).read_text()
        js = json.loads(next(export_dir().glob("*.json")).read_text())
        assert "<details>" in md and first.reasoning.text.strip()[:40] in md and "get_weather" in md
        assert js["id"] == first_id and len(js["turns"]) == 4
        assert js["turns"][0]["reply"]["reasoning"] == first.reasoning.text
        assert js["turns"][2]["tool_test"] and js["turns"][2]["reply"]["tool_calls"][0]["function"]["name"]


async def test_session_list_when_nothing_is_kept(sim) -> None:  # noqa: F811
    _, url = sim
    app = ChatApp(url)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+s")
        await until(lambda: isinstance(app.screen, SessionsScreen), what="the list", pilot=pilot)
        await until(lambda: "No chat kept" in str(app.screen.query_one("#sessions-title").render()),
                    what="the empty list's words", pilot=pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ChatScreen)
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert not export_dir().exists()
