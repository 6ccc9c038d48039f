"""``dgx-console chat`` end to end (a subprocess) against the simulated API on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp import web

from console.sim.api import FixedBackend, create_app


@dataclass
class Backend(FixedBackend):
    api_key: str | None = "cli-key"
    tokens_per_s: float = 3000.0
    max_num_seqs: int = 4


@pytest.fixture
async def api() -> AsyncIterator[tuple[Backend, str]]:
    b = Backend()
    runner = web.AppRunner(create_app(b))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield b, f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "console", "chat", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**os.environ, "NO_COLOR": "1", **(env or {})})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, out.decode(), err.decode()


async def test_json_reply_and_contract(api) -> None:
    b, url = api
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "-m", "hi", "--effort", "low", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert list(data) == ["content", "reasoning", "tool_calls", "finish_reason", "usage", "ttft_s",
                          "tokens_per_s", "warnings"]
    assert data["finish_reason"] == "stop" and "simulated glm-5.3" in data["content"] and data["reasoning"]
    assert data["usage"]["completion_tokens_details"]["reasoning_tokens"] == 40 and data["warnings"] == []
    assert "cli-key" not in out + err


async def test_text_mode_streams_and_summarises(api) -> None:
    b, url = api
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "-m", "hi", "--max-tokens", "15")
    assert rc == 0
    assert err.startswith("[reasoning] ") and "finish: length" in err  # reasoning on stderr
    assert "[reasoning]" not in out
    assert "warning: the reply hit max_tokens (15)" in err
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "--tool-test")
    assert rc == 0 and 'tool call: get_weather({"city": "Paris"})' in out


async def test_stdout_holds_only_the_answer_reasoning_goes_to_stderr(api) -> None:
    """``chat -m ... > reply.txt`` keeps the answer alone."""
    b, url = api
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "-m", "hi")
    assert rc == 0, err
    assert "[reasoning]" not in out and "simulated glm-5.3" in out
    assert err.startswith("[reasoning] ") and "simulated glm-5.3" not in err.split("finish:")[0]


async def test_server_problems_exit_1(api) -> None:
    b, url = api
    rc, out, err = await cli("--url", url, "-m", "hi")
    assert rc == 1 and "--api-key missing" in err and "Traceback" not in err
    b.state = "dead"
    rc, out, err = await cli("--url", url, "--api-key", "cli-key", "--model", "glm-5.3", "-m", "hi", "--json")
    assert rc == 1 and json.loads(out)["error"]["kind"] == "unavailable"
    rc, out, err = await cli("--url", "http://127.0.0.1:9", "-m", "hi")
    assert rc == 1 and "cannot reach" in err


@pytest.mark.parametrize("args, msg", [
    (["--url", "http://127.0.0.1:9"], "--message TEXT is required"),
    (["--url", "ftp://x", "-m", "hi"], "--url must start with http"),
    (["--url", "http://127.0.0.1:9", "-m", "hi", "--max-tokens", "0"], "--max-tokens must be an integer 1..10,000,000"),
    (["--url", "http://127.0.0.1:9", "-m", "hi", "--effort", "huge"], "invalid choice"),
    (["-m", "hi", "--config", "/nonexistent/dgx-console.toml"], "nonexistent"),
])
async def test_usage_errors_exit_2(args: list[str], msg: str) -> None:
    rc, out, err = await cli(*args)
    assert rc == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) <= 2
