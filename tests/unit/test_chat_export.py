"""Kept chats on disk and their exports: the store keeps every field of a reply; the Markdown
export folds the reasoning in ``<details>`` and no model output can break out of its fence (a
hostile ``</details>``, HTML, an unclosed code fence, escape sequences); the suffix picks the
format; the support bundle carries the last chat with secrets masked."""

from __future__ import annotations

import json
import re

import pytest

from console.serving.chat import ChatResult
from console.serving.chat_export import export_format, fenced, to_json, to_markdown, write_export
from console.serving.chat_store import (
    SCHEMA_VERSION,
    ChatStore,
    ChatStoreError,
    SavedTurn,
    new_session_id,
    result_from_record,
    result_record,
)
from console.serving.errors import ApiError

HOSTILE_REASONING = "think\n</details>\n<script>alert(1)</script>\n```\nunclosed fence\x1b]52;c;cGF3bmVk\x07"
HOSTILE_CONTENT = "answer ```` four ticks\n</details><details open><summary>fake</summary>\n\x1b[31mred"


def reply(**kw) -> ChatResult:
    base = dict(content="the answer", reasoning="because", finish_reason="stop",
                usage={"completion_tokens": 12}, ttft_s=0.25, tokens_per_s=50.0, latency_s=0.5)
    return ChatResult(**(base | kw))


def test_a_reply_round_trips_through_its_record() -> None:
    r = reply(tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
              warnings=["w"], error=ApiError("cut", "cut short"), cancelled=True)
    back = result_from_record(json.loads(json.dumps(result_record(r))))
    assert (back.content, back.reasoning, back.tool_calls, back.finish_reason, back.usage, back.warnings,
            back.cancelled, back.latency_s) == (r.content, r.reasoning, r.tool_calls, "stop", r.usage, ["w"], True, 0.5)
    assert back.error.kind == "cut" and str(back.error) == "cut short"
    assert result_from_record({"content": 3, "tool_calls": "x", "usage": [1]}).content == ""  # wrong types dropped


def test_store_keeps_sessions_in_order_and_private(tmp_path) -> None:
    store = ChatStore(tmp_path / "chats.sqlite3")
    assert store.list_sessions() == [] and store.last() is None
    a, b = new_session_id(), new_session_id()
    store.add_turn(a, "http://x", SavedTurn("first\nline", reply(), at=100.0, model="m"))
    store.add_turn(b, "http://y", SavedTurn("other", reply(), at=200.0, model="m2"))
    store.add_turn(a, "http://x", SavedTurn("[tool test] weather", reply(content=""), tools=True, at=300.0))
    assert [s.id for s in store.list_sessions()] == [a, b]  # the newest turn first
    s = store.load(a)
    assert s.summary.title.startswith("first") and "\n" not in s.summary.title  # a title is one line
    assert [t.user for t in s.turns] == ["first\nline", "[tool test] weather"] and s.summary.turns == 2
    assert s.summary.model == "m" and s.turns[1].tools
    assert s.history() == [{"role": "user", "content": "first\nline"}, {"role": "assistant", "content": "the answer"}]
    assert (store.path.stat().st_mode & 0o777) == 0o600
    store.delete(b)
    assert store.load(b) is None and store.last().summary.id == a


def test_the_schema_is_numbered_and_a_newer_or_foreign_file_is_one_line_never_rewritten(tmp_path) -> None:
    import sqlite3

    path = tmp_path / "chats.sqlite3"
    store = ChatStore(path)
    sid = new_session_id()
    store.add_turn(sid, "http://x", SavedTurn("kept", reply(), at=1.0))
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        con.execute("PRAGMA user_version = 0")  # a file kept before the schema had a number
    assert store.load(sid).turns[0].user == "kept"  # read as it was, numbered again
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = path.read_bytes()
    with pytest.raises(ChatStoreError, match="newer than this console's") as err:
        store.add_turn(sid, "http://x", SavedTurn("lost?", reply(), at=2.0))
    assert isinstance(err.value, OSError) and "\n" not in str(err.value)  # the CLI's file-problem line
    assert path.read_bytes() == before
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database at all\n" * 100)
    with pytest.raises(ChatStoreError, match="chats file"):
        ChatStore(junk).list_sessions()
    assert junk.read_bytes() == b"not a database at all\n" * 100


def test_markdown_folds_reasoning_and_no_output_breaks_the_fold(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    sid = new_session_id()
    calls = [{"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"`Paris`"}'}}]
    store.add_turn(sid, "http://x", SavedTurn("hi", reply(reasoning=HOSTILE_REASONING, content=HOSTILE_CONTENT,
                                                          tool_calls=calls), model="m</summary>"))
    md = to_markdown(store.load(sid))
    assert "\x1b" not in md and "\x07" not in md  # sanitized: cat-ing the file writes no clipboard
    # exactly one fold, opened and closed by us: every hostile tag sits inside a fence
    assert md.count("<details>") == 1
    outside = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?\n\1$", "", md)  # drop every fenced block
    assert outside.count("</details>") == 1 and "<script>" not in outside and "<details open>" not in outside
    assert "m</summary>" not in outside  # the model id is escaped in its line
    inner = md[md.index("<details>"):md.index("</details>", md.index("unclosed fence"))]
    assert "unclosed fence" in inner and "think" in inner  # the reasoning is inside the fold
    assert "get_weather" in md and "four ticks" in md
    # the fence of the content is longer than its longest run of backticks
    assert fenced("a ```` b").startswith("`````")


def test_json_export_keeps_the_text_as_it_came(tmp_path) -> None:
    store = ChatStore(tmp_path / "c.sqlite3")
    sid = new_session_id()
    store.add_turn(sid, "http://x", SavedTurn("hi", reply(reasoning=HOSTILE_REASONING), model="m"))
    data = json.loads(json.dumps(to_json(store.load(sid))))
    assert data["format"] == "dgx-console-chat/1" and data["turns"][0]["reply"]["reasoning"] == HOSTILE_REASONING
    assert data["messages"][1] == {"role": "assistant", "content": "the answer"}


@pytest.mark.parametrize("name, fmt", [("a.md", "markdown"), ("a.MARKDOWN", "markdown"), ("a.json", "json")])
def test_the_suffix_picks_the_format(name, fmt) -> None:
    assert export_format(name) == fmt


@pytest.mark.parametrize("name", ["a.txt", "a", "a.md.bak"])
def test_a_bad_suffix_is_one_line(name) -> None:
    with pytest.raises(ValueError, match=r"\.md or \.markdown \(Markdown\), \.json \(JSON\)"):
        export_format(name)


def test_write_export_refuses_a_symlink(tmp_path) -> None:
    from console.safe_files import FileProblem

    store = ChatStore(tmp_path / "c.sqlite3")
    sid = new_session_id()
    store.add_turn(sid, "http://x", SavedTurn("hi", reply()))
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.md").symlink_to(victim)
    with pytest.raises(FileProblem):
        write_export(store.load(sid), tmp_path / "out.md", force=True)
    assert victim.read_text() == "precious"
