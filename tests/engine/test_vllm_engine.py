"""Client, ``chat`` command, metrics and health against the real vLLM server of this tier.

The model's replies are chains fixed by ``build_model.py``; vLLM's own ``glm45`` reasoning
parser and ``glm47`` tool parser split them, so every field below is known in advance.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from console.serving.chat import SMOKE_TOOL, SMOKE_TOOL_PROMPT, TOOL_SWALLOWED_WARNING, ChatRequest
from console.serving.client import ApiClient
from console.serving.metrics import ServingMonitor, parse_metrics
from tests.waiting import until


def _expected() -> dict:
    """EXPECTED from build_model.py, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("engine_build_model", Path(__file__).with_name("build_model.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.EXPECTED


EXPECTED = _expected()
HI = ({"role": "user", "content": "hi"},)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


async def test_health_version_models(engine) -> None:
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        assert (await c.health()).ok
        assert (await c.version() or "").startswith("0.32")
        models = await c.models()
    assert [m["id"] for m in models] == [engine.model]
    assert models[0]["max_model_len"] == engine.max_model_len


async def test_chat_reasoning_content_usage(engine) -> None:
    kinds: list[str] = []
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100, temperature=0.0),
                         on_event=lambda ev: kinds.append(ev.kind))
    assert r.error is None
    assert r.reasoning == EXPECTED["reasoning"] and r.content == EXPECTED["content"]
    assert r.finish_reason == "stop" and r.tool_calls == [] and r.warnings == []
    assert r.usage["completion_tokens"] == EXPECTED["completion_tokens"]
    assert r.usage["completion_tokens_details"]["reasoning_tokens"] == EXPECTED["reasoning_tokens"]
    assert r.ttft_s is not None and r.ttft_s > 0 and r.tokens_per_s is not None and r.tokens_per_s > 0
    # streamed: several reasoning deltas, then content, and the usage chunk last
    assert kinds.count("reasoning") >= 2 and kinds.index("content") > kinds.index("reasoning")
    assert kinds[-1] == "usage"


async def test_no_think_and_effort(engine) -> None:
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100, no_think=True))
        assert (r.reasoning, r.content) == ("", EXPECTED["content"])
        assert r.usage["completion_tokens"] == EXPECTED["no_think_completion_tokens"]
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100, effort="max"))
        assert r.error is None and r.reasoning == EXPECTED["reasoning"]  # the server took the kwarg


async def test_budget_trap(engine) -> None:
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=3))
    assert r.finish_reason == "length" and r.content == "" and r.usage["completion_tokens"] == 3
    assert r.reasoning == "The user says"
    assert len(r.warnings) == 1 and "max_tokens (3)" in r.warnings[0] and "~1000" in r.warnings[0]


async def test_tool_call(engine) -> None:
    req = ChatRequest(({"role": "user", "content": SMOKE_TOOL_PROMPT},), engine.model, max_tokens=100,
                      tools=(SMOKE_TOOL,))
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        r = await c.chat(req)
    assert r.finish_reason == "tool_calls" and r.warnings == []
    assert len(r.tool_calls) == 1
    call = r.tool_calls[0]
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == EXPECTED["tool_name"]
    assert json.loads(call["function"]["arguments"]) == EXPECTED["tool_arguments"]
    assert r.reasoning == EXPECTED["tool_reasoning"] and r.content == ""
    assert r.usage["completion_tokens"] == EXPECTED["tool_completion_tokens"]


async def test_tool_call_text_swallowed_is_flagged(engine) -> None:
    """With tool_choice none the server runs no tool parser: the GLM tool-call text the model
    wrote surfaces nowhere (as with a wrong --tool-call-parser); the client must say so."""
    req = ChatRequest(({"role": "user", "content": SMOKE_TOOL_PROMPT},), engine.model, max_tokens=100,
                      tools=(SMOKE_TOOL,), extra={"tool_choice": "none"})
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        r = await c.chat(req)
    assert r.tool_calls == [] and r.content == "" and r.finish_reason == "stop"
    hidden = EXPECTED["tool_completion_tokens"] - r.usage["completion_tokens_details"]["reasoning_tokens"]
    assert r.warnings == [TOOL_SWALLOWED_WARNING.format(n=hidden)]
    assert "tool-parser-mismatch" in r.warnings[0]


async def test_api_key_401_states(engine) -> None:
    for key, hint in ((None, "--api-key missing"), ("not-the-key", "--api-key is wrong")):
        async with ApiClient(engine.url, api_key=key) as c:
            r = await c.chat(ChatRequest(HI, engine.model, max_tokens=10))
            assert r.error is not None and r.error.kind == "unauthorized" and hint in str(r.error)
            assert (await c.health()).ok  # /health is not behind --api-key
            assert "vllm:" in await c.metrics_text()  # nor is /metrics


async def test_stream_timeout_is_a_state(engine) -> None:
    """A read timeout shorter than the gap between vLLM's chunks (~10 ms a decode step here)."""
    async with ApiClient(engine.url, api_key=engine.api_key, stream_timeout=0.001) as c:
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100))
        assert r.error is not None and r.error.kind == "timeout" and "timed out" in str(r.error)
        assert (await c.health()).ok  # the server is fine; only this stream gave up


async def _counters(c: ApiClient) -> dict[str, float]:
    return parse_metrics(await c.metrics_text()).counters


async def _quiet_counters(c: ApiClient) -> dict[str, float]:
    """Counters once the server is idle and they hold still: a request an earlier test gave up on
    (the stream timeout above) can still be scheduled after it returned, and its prefix-cache lookup
    would then count in this test's delta (CI saw 12 queries for a 6-token prompt)."""
    last: dict[str, float] | None = None
    for _ in range(100):
        m = parse_metrics(await c.metrics_text())
        idle = not m.gauges.get("running") and not m.gauges.get("waiting")
        if idle and last is not None and m.counters == last:
            return m.counters
        last = m.counters if idle else None
        await asyncio.sleep(0.1)
    raise AssertionError("the engine did not go idle within 10 s")


async def test_metric_counters_match_tokens_received(engine) -> None:
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        before = await _quiet_counters(c)
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100))
        want = before["generation_tokens"] + r.usage["completion_tokens"]
        after = await _counters(c)
        for _ in range(50):  # the API process publishes the engine's stats a moment after the reply
            if after["generation_tokens"] >= want:
                break
            await asyncio.sleep(0.1)
            after = await _counters(c)
    assert after["generation_tokens"] - before["generation_tokens"] == r.usage["completion_tokens"]
    assert after["prompt_tokens"] - before["prompt_tokens"] == r.usage["prompt_tokens"]
    assert after["prefix_queries"] - before["prefix_queries"] == r.usage["prompt_tokens"]


async def test_serving_monitor_snapshot(engine) -> None:
    posted = []
    async with ApiClient(engine.url, api_key=engine.api_key) as c:
        mon = ServingMonitor(c, posted.append)
        first = await mon.poll_once()
        generated = parse_metrics(await c.metrics_text()).counters["generation_tokens"]
        r = await c.chat(ChatRequest(HI, engine.model, max_tokens=100))

        async def counted() -> bool:  # the engine publishes its counters a little after the reply ends
            now = parse_metrics(await c.metrics_text()).counters["generation_tokens"]
            return now >= generated + r.usage["completion_tokens"]

        await until(counted, what="the reply's tokens in /metrics", timeout=30)
        snap = await mon.poll_once()
    assert first.healthy and first.status == "ok" and first.model == engine.model
    assert first.version.startswith("0.32") and first.engine == "vllm"
    assert snap.running == 0 and snap.waiting == 0 and 0 <= snap.kv_usage <= 1
    assert snap.gen_tok_s is not None and snap.gen_tok_s > 0
    assert snap.ttft_p50_s is not None and 0 < snap.ttft_p50_s < 60
    assert snap.itl_p50_s is not None and snap.itl_p50_s > 0
    assert snap.prefix_hit_rate is not None and 0 <= snap.prefix_hit_rate <= 1
    assert snap.spec_accept_rate is None  # no speculative decoding on this server
    assert snap.error is None and snap.updated_at is not None
    assert r.usage["completion_tokens"] == EXPECTED["completion_tokens"]


def test_chat_command_json(engine) -> None:
    p = cli("chat", "--url", engine.url, "--api-key", engine.api_key, "--message", "hi", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == {"content", "reasoning", "tool_calls", "finish_reason", "usage", "ttft_s",
                        "tokens_per_s", "warnings"}
    assert out["content"] == EXPECTED["content"] and out["reasoning"] == EXPECTED["reasoning"]
    assert out["finish_reason"] == "stop" and out["tool_calls"] == [] and out["warnings"] == []
    assert out["usage"]["completion_tokens"] == EXPECTED["completion_tokens"]
    assert engine.api_key not in p.stdout + p.stderr


def test_chat_command_budget_trap_and_tool_test(engine) -> None:
    p = cli("chat", "--url", engine.url, "--api-key", engine.api_key, "-m", "hi", "--max-tokens", "4", "--json")
    assert p.returncode == 0, p.stderr  # a reply, with a warning
    out = json.loads(p.stdout)
    assert out["finish_reason"] == "length" and out["content"] == "" and "max_tokens (4)" in out["warnings"][0]
    p = cli("chat", "--url", engine.url, "--api-key", engine.api_key, "--tool-test", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["tool_calls"][0]["function"]["name"] == "get_weather" and out["finish_reason"] == "tool_calls"
    p = cli("chat", "--url", engine.url, "-m", "hi", "--no-think")  # text mode, key missing
    assert p.returncode == 1 and "--api-key missing" in p.stderr and "Traceback" not in p.stderr


def test_chat_command_uses_configured_head(engine, tmp_path: Path) -> None:
    cfg = tmp_path / "dgx-console.toml"
    cfg.write_text(
        '[[stations]]\nname = "head"\nhost = "127.0.0.1"\nrank = 0\nlocal = true\n\n'
        f'[api]\nurl = "{engine.url}"\napi_key_env = "DGX_TEST_ENGINE_KEY"\n'
    )
    p = cli("chat", "--config", str(cfg), "-m", "hi", "--no-think", env={"DGX_TEST_ENGINE_KEY": engine.api_key})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == EXPECTED["content"]
    assert "4 output tokens" in p.stderr and engine.api_key not in p.stdout + p.stderr


def test_server_log_shows_the_parsers(engine) -> None:
    """A guard that the tier tests what it claims: vLLM loaded the GLM parsers, CPU backend."""
    log = engine.log.read_text(errors="replace")
    assert "Application startup complete." in log
    assert "glm45" in log and "glm47" in log
