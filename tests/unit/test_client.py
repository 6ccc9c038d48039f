"""ApiClient against a loopback HTTP server replaying vLLM/SGLang wire formats byte for byte.

The server is real (aiohttp on 127.0.0.1); the bytes are the formats from engines.md: SSE
`data: {json}` lines, `reasoning` vs `reasoning_content`, tool-call fragments, the usage chunk,
the mid-stream error chunk, 401 and 503 bodies.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web

from console.serving.chat import (
    BUDGET_TRAP_WARNING,
    NO_THINK_IGNORED_WARNING,
    NO_TOOL_CALL_WARNING,
    SMOKE_TOOL,
    TOOL_PARSER_WARNING,
    TOOL_SWALLOWED_WARNING,
    ChatAccumulator,
    ChatRequest,
    events_from_chunk,
)
from console.serving.client import ApiClient


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]}


def usage(prompt: int, completion: int, reasoning: int | None = None) -> dict[str, Any]:
    u: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                         "total_tokens": prompt + completion}
    if reasoning is not None:
        u["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [], "usage": u}


Script = list[dict[str, Any] | str]


class Replay:
    """One aiohttp app whose chat endpoint replays the script set by the test."""

    def __init__(self) -> None:
        self.script: Script = []
        self.status = 200
        self.error_body: Any = None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.delay = 0.0
        self.closed = asyncio.Event()

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(await request.json())
        self.headers.append(dict(request.headers))
        if self.status != 200:
            return web.json_response(self.error_body, status=self.status)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            for item in self.script:
                if self.delay:
                    await asyncio.sleep(self.delay)
                data = item if isinstance(item, str) else json.dumps(item)
                await resp.write(f"data: {data}\n\n".encode())
        except (ConnectionResetError, asyncio.CancelledError):
            self.closed.set()
            raise
        return resp

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.status if self.status == 503 else 200)


@pytest.fixture
async def replay() -> AsyncIterator[tuple[Replay, Callable[..., ApiClient]]]:
    r = Replay()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", r.chat)
    app.router.add_get("/health", r.health)

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "glm-5.3", "object": "model",
                                                              "max_model_len": 8192}]})

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": "0.33.0"})

    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    clients: list[ApiClient] = []

    def make(**kw: Any) -> ApiClient:
        c = ApiClient(f"http://127.0.0.1:{port}", **kw)
        clients.append(c)
        return c

    yield r, make
    for c in clients:
        await c.aclose()
    await runner.cleanup()


REQ = ChatRequest(messages=({"role": "user", "content": "hi"},), model="glm-5.3", max_tokens=100)


async def test_reasoning_content_usage_and_body(replay) -> None:
    r, make = replay
    r.script = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning": "Let me "}),
                chunk({"reasoning": "think."}), chunk({"content": "Hello"}),
                chunk({"content": " there"}, finish="stop"), usage(5, 6, reasoning=3), "[DONE]"]
    req = ChatRequest(messages=REQ.messages, model="glm-5.3", max_tokens=100, temperature=0.0,
                      effort="high")
    seen: list[str] = []
    res = await make(api_key="sekret").chat(req, on_event=lambda ev: seen.append(ev.kind))
    assert res.error is None
    assert (res.reasoning, res.content, res.finish_reason) == ("Let me think.", "Hello there", "stop")
    assert res.usage["completion_tokens"] == 6 and res.output_tokens == 6
    assert res.ttft_s is not None and res.ttft_s >= 0 and res.tokens_per_s is not None
    assert res.warnings == []
    assert seen[:3] == ["role", "reasoning", "reasoning"] and seen[-1] == "usage"
    body = r.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["chat_template_kwargs"] == {"reasoning_effort": "high"}
    assert body["max_tokens"] == 100 and body["temperature"] == 0.0
    assert r.headers[0]["Authorization"] == "Bearer sekret"
    assert set(res.to_json()) == {"content", "reasoning", "tool_calls", "finish_reason", "usage",
                                  "ttft_s", "tokens_per_s", "warnings"}


async def test_sglang_reasoning_content_field_and_no_think(replay) -> None:
    r, make = replay
    r.script = [chunk({"reasoning_content": "hmm"}), chunk({"content": "ok"}, finish="stop"), "[DONE]"]
    req = ChatRequest(messages=REQ.messages, model="m", no_think=True)
    res = await make().chat(req)
    assert (res.reasoning, res.content) == ("hmm", "ok")
    assert res.usage is None and res.output_tokens is None
    assert r.requests[0]["chat_template_kwargs"] == {"enable_thinking": False}
    assert "Authorization" not in r.headers[0]
    assert res.warnings == [NO_THINK_IGNORED_WARNING]  # the server thought anyway


async def test_tool_call_fragments_are_assembled(replay) -> None:
    r, make = replay
    r.script = [
        chunk({"reasoning": "need weather"}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                               "function": {"name": "get_time", "arguments": "{}"}}]}),
        chunk({}, finish="tool_calls"), usage(10, 12), "[DONE]",
    ]
    res = await make().chat(ChatRequest(messages=REQ.messages, model="m", tools=(SMOKE_TOOL,)))
    assert res.finish_reason == "tool_calls"
    assert res.tool_calls == [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert res.warnings == []
    assert r.requests[0]["tools"][0]["function"]["name"] == "get_weather"


async def test_tool_parser_mismatch_and_no_call(replay) -> None:
    r, make = replay
    r.script = [chunk({"content": "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
                                  "</arg_value></tool_call>"}, finish="stop"), "[DONE]"]
    res = await make().chat(ChatRequest(messages=REQ.messages, model="m", tools=(SMOKE_TOOL,)))
    assert res.tool_calls == [] and res.warnings == [TOOL_PARSER_WARNING]
    r.script = [chunk({"content": "It is sunny."}, finish="stop"), usage(5, 4, reasoning=0), "[DONE]"]
    res = await make().chat(ChatRequest(messages=REQ.messages, model="m", tools=(SMOKE_TOOL,)))
    assert res.warnings == [NO_TOOL_CALL_WARNING]
    # nothing surfaced but the reasoning, yet 10 tokens were generated after it: swallowed
    r.script = [chunk({"reasoning": "Calling the tool"}), chunk({}, finish="stop"), usage(87, 13, reasoning=3),
                "[DONE]"]
    res = await make().chat(ChatRequest(messages=REQ.messages, model="m", tools=(SMOKE_TOOL,)))
    assert res.warnings == [TOOL_SWALLOWED_WARNING.format(n=10)]


async def test_budget_trap(replay) -> None:
    r, make = replay
    r.script = [chunk({"reasoning": "a b c d"}), chunk({"reasoning": " e"}, finish="length"),
                usage(5, 8, reasoning=8), "[DONE]"]
    res = await make().chat(ChatRequest(messages=REQ.messages, model="m", max_tokens=8))
    assert res.finish_reason == "length" and res.content == ""
    assert res.warnings == [BUDGET_TRAP_WARNING.format(max_tokens=8)]
    assert "~1000" in res.warnings[0]


async def test_error_chunk_mid_stream(replay) -> None:
    r, make = replay
    r.script = [chunk({"content": "par"}),
                {"error": {"message": "EngineCore encountered an issue.", "type": "InternalServerError",
                           "code": 500}}, "[DONE]"]
    res = await make().chat(REQ)
    assert res.error is not None and res.error.kind == "stream" and res.error.status == 500
    assert "EngineCore encountered an issue." in str(res.error)
    assert res.content == "par"  # what arrived before the error is kept
    assert res.to_json()["error"]["kind"] == "stream"


@pytest.mark.parametrize("key, expect", [(None, "--api-key missing"), ("k3y-value", "--api-key is wrong")])
async def test_401_says_which_key_problem_and_never_the_key(replay, key, expect) -> None:
    r, make = replay
    r.status, r.error_body = 401, {"error": "Unauthorized"}
    res = await make(api_key=key).chat(REQ)
    assert res.error is not None and res.error.kind == "unauthorized" and expect in str(res.error)
    assert "k3y-value" not in str(res.error) and "k3y-value" not in repr(make(api_key="k3y-value"))


async def test_503_dead_engine_and_health(replay) -> None:
    r, make = replay
    r.status, r.error_body = 503, {"error": {"message": "EngineDeadError", "code": 503}}
    c = make()
    res = await c.chat(REQ)
    assert res.error is not None and res.error.kind == "unavailable" and "dead" in str(res.error)
    h = await c.health()
    assert not h.ok and h.status == 503
    r.status = 200
    assert (await c.health()).ok
    assert (await c.models())[0]["id"] == "glm-5.3" and await c.version() == "0.33.0"


async def test_400_carries_server_message(replay) -> None:
    r, make = replay
    r.status = 400
    r.error_body = {"error": {"message": "max_tokens is too large: 99999999.", "type": "BadRequestError",
                              "param": None, "code": 400}}
    res = await make().chat(REQ)
    assert res.error.kind == "http" and "max_tokens is too large" in str(res.error)


async def test_unreachable_and_timeout(replay) -> None:
    r, make = replay
    dead = ApiClient("http://127.0.0.1:9", timeout=2.0)
    try:
        res = await dead.chat(REQ)
        assert res.error is not None and res.error.kind == "connect"
        assert not (await dead.health()).ok
    finally:
        await dead.aclose()
    r.script = [chunk({"content": "slow"}, finish="stop"), "[DONE]"]
    r.delay = 2.0
    res = await make(stream_timeout=0.2).chat(REQ)
    assert res.error is not None and res.error.kind == "timeout"


async def test_cancel_propagates_closes_stream_and_keeps_the_partial(replay) -> None:
    """The one cancellation rule: the cancel propagates (never swallowed into a result); the stream is
    closed; a caller that wants the partial reply passes its accumulator."""
    r, make = replay
    r.script = [chunk({"content": f"t{i} "}) for i in range(200)] + ["[DONE]"]
    r.delay = 0.01
    got = asyncio.Event()
    c = make()

    def on_event(ev) -> None:
        if ev.kind == "content" and ev.text == "t3 ":
            got.set()

    acc = ChatAccumulator(REQ, time.perf_counter())
    task = asyncio.create_task(c.chat(REQ, on_event=on_event, accumulator=acc))
    await asyncio.wait_for(got.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    res = acc.finish(cancelled=True)
    assert res.cancelled and res.content.startswith("t0 t1 t2 t3")
    await asyncio.wait_for(r.closed.wait(), 10)  # the server saw the client go away


def test_events_from_chunk_old_error_shape() -> None:
    from console.serving.errors import ApiError

    with pytest.raises(ApiError, match="bad thing"):
        events_from_chunk({"object": "error", "message": "bad thing", "type": "BadRequestError", "code": 400}, 0)
    evs = events_from_chunk(chunk({"content": "x", "reasoning": None, "reasoning_content": "y"}, "stop"), 1.0)
    assert [(e.kind, e.text) for e in evs] == [("reasoning", "y"), ("content", "x"), ("finish", "stop")]


async def test_connect_timeout_is_named_as_such() -> None:
    """A server whose accept queue is full drops our SYN: the error says connecting timed out, not
    that a stream went quiet for the (much longer) stream timeout."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):  # fill the accept queue; later SYNs are dropped, never refused
            f = socket.socket()
            f.setblocking(False)
            f.connect_ex(("127.0.0.1", port))
            fillers.append(f)
        c = ApiClient(f"http://127.0.0.1:{port}", timeout=0.5, stream_timeout=60)
        try:
            res = await c.chat(REQ)
        finally:
            await c.aclose()
        assert res.error is not None and res.error.kind == "timeout"
        assert "connecting to" in str(res.error) and "0.5s" in str(res.error)
        assert "no data for 60s" not in str(res.error)
    finally:
        for f in fillers:
            f.close()
        srv.close()


def test_sse_parser_line_ends_split_anywhere() -> None:
    """LF, CRLF and CR line ends, split at every byte (a CRLF across two chunks is one line end);
    comments dropped, multi-line data joined, an unfinished event at the end is no event."""
    from console.serving.client import _SseParser

    raw = b": keep-alive\r\ndata: {\"a\": 1}\r\n\r\ndata: x\rdata: y\r\rid: 3\nevent: e\ndata:z\n\ndata: unfinished"
    for step in (1, 2, 3, len(raw)):
        p = _SseParser()
        got = [d for i in range(0, len(raw), step) for d in p.feed(raw[i:i + step])]
        assert got == ['{"a": 1}', "x\ny", "z"], step


def test_gzip_is_decoded_a_slice_at_a_time() -> None:
    """A 64 MB gzip bomb fed as one 64 KB wire chunk never becomes one 64 MB piece."""
    import zlib

    from console.serving.client import INFLATE_SLICE, _Inflate

    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(z.compress(b"\0" * 1024 * 1024) for _ in range(64)) + z.flush()
    inflate = _Inflate("gzip")
    sizes = [len(p) for p in inflate.decode(bomb)] + [len(p) for p in inflate.flush()]
    assert max(sizes) <= INFLATE_SLICE and sum(sizes) == 64 * 1024 * 1024


@pytest.mark.parametrize(("status", "retried"), [(501, False), (404, False), (400, False), (503, True), (500, True),
                                                 (429, True)])
async def test_readiness_fails_at_once_on_a_clear_answer_and_retries_a_busy_one(replay, status, retried) -> None:
    """A 501 was retried until the launch timed out. A 4xx (but 408/429) or a 501 is the
    server's clear word: a failure at once; a busy or not-ready answer is asked again."""
    from console.serving.readiness import NotReady, first_token

    r, make = replay
    r.status, r.error_body = status, {"object": "error", "message": "no", "type": "x", "code": status}
    tries: list[int] = []
    t0 = time.monotonic()
    with pytest.raises(NotReady) as err:
        await first_token(make(), "glm-5.3", time.monotonic() + 2.5, on_retry=lambda n, e, d: tries.append(n))
    assert err.value.retryable is retried and bool(tries) is retried and str(status) in err.value.detail
    if not retried:
        assert time.monotonic() - t0 < 2.0 and len(r.requests) == 1
