"""``chat`` and ``bench`` against the hostile server: no control byte or escape sequence in any
output, ``--json`` keeps the data, every stream ends (keep-alive drip at ``--timeout``, a data drip at
``--max-time``, an endless line at the byte cap), never a traceback."""

from __future__ import annotations

import asyncio
import json
import tracemalloc

import pytest
from hostile_api import HOSTILE, MODEL_ID, PAYLOAD_MARKERS, output_dirty

import console.serving.client as client_mod
from console.cli import main


async def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``console.cli.main`` in a thread (it runs its own event loop; the server runs in ours)."""

    def call() -> int:
        try:
            return main(list(argv))
        except SystemExit as exc:  # argparse: --help, usage errors
            return int(exc.code or 0)

    rc = await asyncio.wait_for(asyncio.to_thread(call), 60)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def assert_clean(*texts: str, json_out: bool = False) -> None:
    """No control byte; outside --json (and JSON text like tool arguments) not even the payload of a
    removed sequence."""
    for text in texts:
        assert not output_dirty(text), output_dirty(text)
        assert "Traceback" not in text
        if not json_out:
            for marker in PAYLOAD_MARKERS:
                assert marker not in text


async def test_chat_prints_hostile_reply_clean_and_json_keeps_it(hostile, capsys):
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi")
    assert rc == 0, err
    assert_clean(out, err)
    assert "Hello" in out and "[/] [bold red]x[/bold red]" in out  # markup is just text
    assert "lone \ufffd surrogate" in out  # a lone surrogate is shown, and never crashes the print
    assert "gnp.exe" in out and "\u202e" not in out
    assert hostile.requests[-1]["model"] == MODEL_ID  # the raw id went back to the server

    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--json")
    assert rc == 0, err
    assert_clean(out, json_out=True)  # JSON escapes every control character
    assert_clean(err)
    data = json.loads(out)
    assert HOSTILE in data["content"] and "\x1b]52;c;" in data["reasoning"]  # the data, unchanged


async def test_chat_tool_call_names_and_arguments_are_clean(hostile, capsys):
    hostile.mode = "tools"
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "--tool-test")
    assert rc == 0, err
    assert_clean(err)
    assert_clean(out, json_out=True)  # the arguments are JSON text: their \u001b is six harmless characters
    assert "tool call: get[/]" in out and "owned terminal title" not in out
    rc, out, _ = await run_cli(capsys, "chat", "--url", hostile.url, "--tool-test", "--json")
    call = json.loads(out)["tool_calls"][0]
    assert "\x1b]0;" in call["function"]["name"] and "\\u001b]52" in call["function"]["arguments"]


@pytest.mark.parametrize("mode", ["error-400", "error-500-huge"])
async def test_error_bodies_are_one_clean_line(hostile, capsys, mode):
    hostile.mode = mode
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi")
    assert rc == 1
    assert_clean(out, err)
    line = next(ln for ln in err.splitlines() if ln.startswith("dgx-console: chat:"))
    assert len(line) < 1000  # a 20 MB error page becomes a short message
    assert ("HTTP 400" in line and "bad" in line) or "HTTP 500" in line


async def test_keepalive_comments_do_not_reset_the_timeout(hostile, capsys):
    hostile.mode = "keepalive-drip"  # a comment every 0.2 s, forever
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--timeout", "1")
    assert rc == 1
    assert "no data for 1s" in err
    assert_clean(out, err)


async def test_a_data_drip_ends_at_max_time(hostile, capsys):
    hostile.mode = "data-drip"
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--timeout", "5",
                                 "--max-time", "1.5")
    assert rc == 1
    assert "longer than 1.5s in all" in err and "drip" in out


async def test_a_silent_server_ends_at_max_time_below_the_timeout(hostile, capsys):
    hostile.mode = "silent"
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--timeout", "30",
                                 "--max-time", "1")
    assert rc == 1 and "longer than 1s in all" in err


async def test_an_endless_line_is_cut_at_the_byte_cap_with_bounded_memory(hostile, capsys, monkeypatch):
    hostile.mode = "endless-line"
    monkeypatch.setattr(client_mod, "MAX_STREAM_BYTES", 4 * 1024 * 1024)
    tracemalloc.start()
    try:
        rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi", "--timeout", "30")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rc == 1 and "larger than 4 MB" in err
    assert peak < 48 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB for a 4 MB cap"


@pytest.mark.parametrize("mode", ["nested", "wrong-types"])
async def test_hostile_json_is_an_error_or_ignored_never_a_traceback(hostile, capsys, mode):
    hostile.mode = mode
    rc, out, err = await run_cli(capsys, "chat", "--url", hostile.url, "-m", "hi")
    assert rc in (0, 1), err
    assert_clean(out, err)
    if mode == "nested":
        assert "not JSON" in err
    else:
        assert "ok" in out


async def test_bench_output_is_clean(hostile, capsys):
    rc, out, err = await run_cli(capsys, "bench", "--url", hostile.url, "--concurrency", "1,2",
                                 "--requests-per-level", "2", "--warmup", "0", "--max-tokens", "16")
    assert rc in (0, 1), err
    assert_clean(out, err)
    assert "conc" in out
    hostile.mode = "error-400"
    rc, out, err = await run_cli(capsys, "bench", "--url", hostile.url, "--concurrency", "1",
                                 "--requests-per-level", "1", "--warmup", "0", "--max-tokens", "16")
    assert rc == 1
    assert_clean(out, err)
    assert "error: http: HTTP 400" in out  # the server's message, one clean line


@pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999", "ftp://x", "http://", "http://a b",
                                 "http://x\x1b]0;t\x07"])
async def test_bad_urls_are_one_line_exit_2(capsys, url):
    for cmd in (["chat", "-m", "hi"], ["bench"]):
        rc, out, err = await run_cli(capsys, *cmd, "--url", url)
        assert rc == 2, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("dgx-console: --url")
        assert_clean(out, err)


@pytest.mark.parametrize("flag", ["--timeout", "--max-time"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e9"])
async def test_bad_timeouts_are_one_line_exit_2(capsys, flag, value):
    rc, _, err = await run_cli(capsys, "chat", "--url", "http://127.0.0.1:9", "-m", "hi", f"{flag}={value}")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and flag in err
