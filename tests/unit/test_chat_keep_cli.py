"""``dgx-console chat --save`` / ``--export PATH`` (a subprocess against the simulated API), and the
last kept chat in the support bundle with secrets masked."""

from __future__ import annotations

import json

import pytest

from console.serving.chat_store import ChatStore
from tests.unit.test_client_chat_cli import api, cli  # noqa: F401 - the fixture


async def test_save_keeps_the_chat_where_the_tui_lists_it(api, tmp_path) -> None:  # noqa: F811
    _, url = api
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "-m", "keep me", "--save")
    assert rc == 0, err
    assert "kept as chat" in err
    sessions = ChatStore().list_sessions()  # the same XDG_DATA_HOME as the subprocess
    assert [s.title for s in sessions] == ["keep me"] and sessions[0].url == url
    turn = ChatStore().load(sessions[0].id).turns[0]
    assert turn.result.reasoning and "simulated glm-5.3" in turn.result.content


@pytest.mark.parametrize("suffix", [".md", ".json"])
async def test_export_by_suffix_with_reasoning_and_tool_calls(api, tmp_path, suffix) -> None:  # noqa: F811
    _, url = api
    path = tmp_path / f"chat{suffix}"
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "--tool-test", "--export", str(path), "--json")
    assert rc == 0, err
    assert json.loads(out)["tool_calls"]  # --json's stdout is unchanged
    text = path.read_text()
    if suffix == ".json":
        reply = json.loads(text)["turns"][0]["reply"]
        assert reply["reasoning"] and reply["tool_calls"][0]["function"]["name"] == "get_weather"
    else:
        assert "<details>" in text and "get_weather" in text and "Tool test" in text
    assert not ChatStore().list_sessions()  # --export alone keeps nothing
    assert "cli-key" not in text


async def test_bad_export_suffix_or_place_is_exit_2_before_sending(api, tmp_path) -> None:  # noqa: F811
    b, url = api
    rc, out, err = await cli("--url", url, "-m", "hi", "--export", str(tmp_path / "chat.txt"))
    assert rc == 2 and ".md or .markdown" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    rc, out, err = await cli("--url", url, "-m", "hi", "--export", str(tmp_path / "nodir" / "chat.md"))
    assert rc == 2 and "does not exist" in err and len(err.strip().splitlines()) == 1
    (tmp_path / "there.md").write_text("x")
    rc, out, err = await cli("--url", url, "-m", "hi", "--export", str(tmp_path / "there.md"))
    assert rc == 2 and (tmp_path / "there.md").read_text() == "x"


def test_the_bundle_carries_the_last_chat_masked(tmp_path, capsys, monkeypatch) -> None:
    from console.cli import main
    from console.serving.chat import ChatResult
    from console.serving.chat_store import SavedTurn, new_session_id
    from tests.unit.test_bundle import SECRET_KEY, SECRET_TOKEN, read_bundle

    store = ChatStore()
    store.add_turn(new_session_id(), "http://x", SavedTurn(
        f"my token is HF_TOKEN={SECRET_TOKEN}", ChatResult(content=f"use Bearer {SECRET_KEY} then",
                                                           reasoning="the key " + SECRET_KEY), model="m"))
    cfg = tmp_path / "c.toml"
    monkeypatch.setenv("DGX_CHAT_KEY", SECRET_KEY)  # the API key the config knows: masked wherever it appears
    cfg.write_text('profile = "glm53-nvfp4-2x-gb300-vllm"\n[api]\napi_key_env = "DGX_CHAT_KEY"\n'
                   '[[stations]]\nname = "a"\nrank = 0\nlocal = true\n')
    out = tmp_path / "b.tar.gz"
    assert main(["bundle", "--config", str(cfg), "--no-checks", str(out)]) == 0
    files = read_bundle(out)
    assert {"chat/last.json", "chat/last.md"} <= set(files)
    blob = b"".join(files.values())
    assert SECRET_KEY.encode() not in blob and SECRET_TOKEN.encode() not in blob
    data = json.loads(files["chat/last.json"])
    assert data["turns"][0]["reply"]["content"].startswith("use Bearer ")
    assert json.loads(files["manifest.json"])["chat"]["included"]
