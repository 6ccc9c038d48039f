"""The simulated OpenAI API (console/sim/api.py) through the real client, over loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from aiohttp import web

from console.serving.chat import SMOKE_TOOL, SMOKE_TOOL_PROMPT, ChatAccumulator, ChatRequest
from console.serving.client import ApiClient
from console.serving.metrics import MetricsTracker, ServingMonitor, parse_metrics
from console.sim.api import FixedBackend, create_app
from console.sim.replies import EFFORT_REASONING_TOKENS, plan_reply
from tests.waiting import until


@dataclass
class Backend(FixedBackend):
    tokens_per_s: float = 4000.0
    max_num_seqs: int = 4


Serve = Callable[..., Any]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    runners: list[web.AppRunner] = []
    clients: list[ApiClient] = []

    async def start(**kw: Any) -> tuple[Backend, ApiClient]:
        key = kw.pop("client_key", None)
        b = Backend(**kw)
        runner = web.AppRunner(create_app(b))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        c = ApiClient(f"http://127.0.0.1:{port}", api_key=key or b.api_key, timeout=5)
        clients.append(c)
        return b, c

    yield start
    for c in clients:
        await c.aclose()
    for r in runners:
        await r.cleanup()


def hi(text: str = "hello there") -> tuple[dict[str, str], ...]:
    return ({"role": "user", "content": text},)


async def counters(c: ApiClient) -> dict[str, float]:
    return parse_metrics(await c.metrics_text()).counters


async def test_health_models_version_and_dead_engine(serve) -> None:
    b, c = await serve()
    assert (await c.health()).ok and await c.version() == "0.30.0"
    assert (await c.models())[0] == {"id": "glm-5.3", "object": "model", "created": pytest.approx(0, abs=1e10),
                                     "owned_by": "vllm", "root": "glm-5.3", "parent": None, "max_model_len": 8192}
    b.state = "dead"
    h = await c.health()
    assert not h.ok and h.status == 503
    r = await c.chat(ChatRequest(hi(), "glm-5.3"))
    assert r.error is not None and r.error.kind == "unavailable"


async def test_vllm_stream_reasoning_content_usage_and_counters(serve) -> None:
    b, c = await serve()
    before = await counters(c)
    r = await c.chat(ChatRequest(hi(), "glm-5.3", max_tokens=1000))
    after = await counters(c)
    plan = plan_reply({"messages": list(hi())}, "glm-5.3", "vllm")
    assert r.error is None and r.finish_reason == "stop" and r.warnings == []
    assert r.reasoning == "".join(plan.reasoning) and len(plan.reasoning) == EFFORT_REASONING_TOKENS["high"]
    assert r.content == "".join(plan.content) and "simulated glm-5.3" in r.content and "hello there" in r.content
    assert r.usage["completion_tokens"] == len(plan.reasoning) + len(plan.content) + 1  # + EOS
    assert r.usage["completion_tokens_details"]["reasoning_tokens"] == len(plan.reasoning)
    assert after["generation_tokens"] - before.get("generation_tokens", 0) == r.usage["completion_tokens"]
    assert after["prompt_tokens"] - before.get("prompt_tokens", 0) == r.usage["prompt_tokens"]


async def test_effort_and_no_think(serve) -> None:
    b, c = await serve()
    low = await c.chat(ChatRequest(hi(), "glm-5.3", effort="low"))
    mx = await c.chat(ChatRequest(hi(), "glm-5.3", effort="max"))
    off = await c.chat(ChatRequest(hi(), "glm-5.3", no_think=True))
    assert low.usage["completion_tokens_details"]["reasoning_tokens"] == EFFORT_REASONING_TOKENS["low"]
    assert mx.usage["completion_tokens_details"]["reasoning_tokens"] == EFFORT_REASONING_TOKENS["max"]
    assert off.reasoning == "" and off.content == low.content


async def test_sglang_field_names_and_metrics(serve) -> None:
    b, c = await serve(engine="sglang", num_speculative_tokens=3)
    async with httpx.AsyncClient() as raw:
        resp = await raw.post(c.base_url + "/v1/chat/completions", json={
            "model": "glm-5.3", "messages": list(hi()), "stream": True, "max_tokens": 50})
    assert '"reasoning_content"' in resp.text and '"reasoning":' not in resp.text
    assert resp.text.rstrip().endswith("data: [DONE]")
    r = await c.chat(ChatRequest(hi(), "glm-5.3"))
    assert r.reasoning and r.content
    s = parse_metrics(await c.metrics_text())
    assert s.engine == "sglang" and s.gauges["running"] == 0 and s.gauges["waiting"] == 0
    assert 1.0 < s.gauges["spec_accept_length"] <= 4.0 and 0 < s.gauges["spec_accept_rate"] <= 1
    assert s.counters["generation_tokens"] == 50 + r.usage["completion_tokens"]


async def test_tool_call(serve) -> None:
    b, c = await serve()
    r = await c.chat(ChatRequest(({"role": "user", "content": SMOKE_TOOL_PROMPT},), "glm-5.3", tools=(SMOKE_TOOL,)))
    assert r.finish_reason == "tool_calls" and r.warnings == [] and r.content == ""
    assert [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in r.tool_calls] == [
        ("get_weather", {"city": "Paris"})]


async def test_budget_trap(serve) -> None:
    b, c = await serve()
    r = await c.chat(ChatRequest(hi(), "glm-5.3", max_tokens=12))
    assert r.finish_reason == "length" and r.content == "" and len(r.reasoning.split()) >= 8
    assert r.usage["completion_tokens"] == 12 and "max_tokens (12)" in r.warnings[0]


async def test_api_key(serve) -> None:
    b, c = await serve(api_key="sim-key", client_key="wrong-key")
    r = await c.chat(ChatRequest(hi(), "glm-5.3"))
    assert r.error.kind == "unauthorized" and "--api-key is wrong" in str(r.error)
    c.set_api_key(None)
    r = await c.chat(ChatRequest(hi(), "glm-5.3"))
    assert r.error.kind == "unauthorized" and "--api-key missing" in str(r.error)
    assert "vllm:generation_tokens_total" in await c.metrics_text()  # /metrics is open
    c.set_api_key("sim-key")
    assert (await c.chat(ChatRequest(hi(), "glm-5.3", max_tokens=20))).error is None


async def test_mtp_spec_decode_counters(serve) -> None:
    b, c = await serve(num_speculative_tokens=4)
    mon = ServingMonitor(c, lambda s: None)
    await mon.poll_once()
    r = await c.chat(ChatRequest(hi(), "glm-5.3"))
    snap = await mon.poll_once()
    n = await counters(c)
    assert n["spec_draft_tokens"] == 4 * n["spec_drafts"]
    # every step emits 1 + accepted tokens; the EOS is one more
    assert n["spec_drafts"] + n["spec_accepted"] == r.usage["completion_tokens"] - 1
    assert 0 < snap.spec_accept_rate < 1 and 1 < snap.spec_mean_len < 5
    assert snap.spec_mean_len == pytest.approx(1 + n["spec_accepted"] / n["spec_drafts"])
    assert snap.engine == "vllm" and snap.model == "glm-5.3" and snap.status == "ok"


async def test_waiting_when_full_and_cancel_aborts(serve) -> None:
    b, c = await serve(max_num_seqs=1, tokens_per_s=40)
    started = asyncio.Event()

    def on_event(ev) -> None:
        if ev.kind == "reasoning":
            started.set()

    # a cancelled chat raises CancelledError (never swallowed); its partial reply is in the accumulator
    req1 = ChatRequest(hi(), "glm-5.3")
    acc1 = ChatAccumulator(req1, time.perf_counter())
    first = asyncio.create_task(c.chat(req1, on_event=on_event, accumulator=acc1))
    await asyncio.wait_for(started.wait(), 10)
    second = asyncio.create_task(c.chat(ChatRequest(hi("second"), "glm-5.3")))

    async def gauges() -> dict:
        return parse_metrics(await c.metrics_text()).gauges

    async def one_waiting() -> dict | None:
        g = await gauges()
        return g if g["waiting"] == 1 else None

    s = await until(one_waiting, what="the second request waiting", timeout=5)
    assert s["running"] == 1 and s["waiting"] == 1 and s["kv_usage"] > 0
    first.cancel()
    second.cancel()
    for task in (first, second):
        with pytest.raises(asyncio.CancelledError):
            await task
    assert acc1.finish(cancelled=True).reasoning  # what streamed before the cancel is kept

    async def idle() -> bool:
        g = await gauges()
        return g["running"] == 0 and g["waiting"] == 0

    await until(idle, what="no request running or waiting", timeout=5)
    # both requests end as aborts (the queued one is dropped when it reaches the engine)
    assert 'finished_reason="abort",model_name="glm-5.3"} 2.0' in await c.metrics_text()


async def test_engine_dies_mid_stream(serve) -> None:
    b, c = await serve(tokens_per_s=100)

    def on_event(ev) -> None:
        if ev.kind == "reasoning":
            b.state = "dead"

    r = await c.chat(ChatRequest(hi(), "glm-5.3", effort="max"), on_event=on_event)
    assert r.error is not None and r.error.kind == "stream" and "fatal error" in str(r.error)
    assert r.reasoning  # what came before is kept


async def test_non_streaming_and_bad_requests(serve) -> None:
    b, c = await serve()
    async with httpx.AsyncClient(base_url=c.base_url) as raw:
        resp = await raw.post("/v1/chat/completions", json={"model": "glm-5.3", "messages": list(hi()),
                                                            "max_tokens": 400})
        data = resp.json()
        assert data["object"] == "chat.completion" and data["choices"][0]["finish_reason"] == "stop"
        assert data["choices"][0]["message"]["reasoning"] and "simulated" in data["choices"][0]["message"]["content"]
        assert data["usage"]["completion_tokens"] > 100
        assert (await raw.post("/v1/chat/completions", json={"messages": []})).status_code == 400
        assert (await raw.post("/v1/chat/completions", json={"model": "x", "messages": list(hi())})).status_code == 404
        too_long = await raw.post("/v1/chat/completions", json={"messages": list(hi()), "max_tokens": 10**6})
        assert too_long.status_code == 400 and "maximum context length" in too_long.json()["error"]["message"]


async def test_prefix_cache_hits_on_chat_history(serve) -> None:
    b, c = await serve()
    m1 = hi("first question")
    r1 = await c.chat(ChatRequest(m1, "glm-5.3", no_think=True))
    m2 = m1 + ({"role": "assistant", "content": r1.content}, {"role": "user", "content": "and then?"})
    await c.chat(ChatRequest(m2, "glm-5.3", no_think=True))
    n = await counters(c)
    assert 0 < n["prefix_hits"] < n["prefix_queries"]
    tr = MetricsTracker()
    tr.add(parse_metrics(await c.metrics_text(), 0))
    assert 0 < tr.derive()["prefix_hit_rate"] < 1


async def test_monitor_dead_engine_is_unhealthy_not_stale(serve) -> None:
    b, c = await serve()
    mon = ServingMonitor(c, lambda s: None)
    assert (await mon.poll_once()).status == "ok"
    b.state = "dead"  # /health 503 while /metrics still answers, as vLLM's API process does
    missed = [await mon.poll_once() for _ in range(2)]  # red only after 3 misses in a row
    assert [m.status for m in missed] == ["missed", "missed"] and missed[1].misses == 2
    assert missed[0].miss == "HTTP 503: error"
    snap = await mon.poll_once()
    assert snap.status == "unhealthy" and not snap.healthy and snap.error is None and snap.misses == 3
    assert "503" in snap.note and not snap.is_stale()
