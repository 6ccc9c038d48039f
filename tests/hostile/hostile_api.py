"""A hostile OpenAI-compatible server on 127.0.0.1 (aiohttp, like console/sim/api.py): everything a
compromised or broken endpoint could send the console.

Escape sequences (OSC 52 clipboard writes, OSC 0 titles, CSI clear-screen, DCS/APC), C0/C1 control
bytes, a lone surrogate, bidi overrides and Rich/Textual markup in content, reasoning, tool-call
names and arguments, model ids, ``/version`` and error bodies; a huge ``/metrics``; SSE keep-alive
comments that never end; data events that never end; a line without a newline that never ends; JSON
nested 100,000 deep; fields of the wrong type.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

# Payloads a terminal acts on, and markup Rich/Textual would act on.
OSC52 = "\x1b]52;c;cHduZWQgY2xpcGJvYXJk\x07"
OSC_TITLE = "\x1b]0;owned terminal title\x07"
CLEAR = "\x1b[2J\x1b[H"
DCS = "\x1bP+q544e\x1b\\"
C1 = "\x9b31m\x9d0;c1\x9c\x85"
CONTROLS = "\x00\x07\x08\x7f\x0b\x0c"
BIDI = "\u202egnp.exe\u202c"
MARKUP = "[/] [bold red]x[/bold red] [link=file:///etc/passwd]l[/link] [@click=app.quit]q[/]"
HOSTILE = OSC52 + OSC_TITLE + CLEAR + DCS + C1 + CONTROLS + BIDI + MARKUP

MODEL_ID = "evil" + OSC52 + "[/]" + "[bold]m[/bold]"
VERSION = "0.33" + OSC_TITLE + "[/]"
# What must never appear in anything the console shows or prints (outside --json).
PAYLOAD_MARKERS = ("cHduZWQgY2xpcGJvYXJk", "owned terminal title")


def terminal_dirty(text: str) -> list[str]:
    """Everything in ``text`` a terminal would act on: any ESC sequence but plain CSI (Textual's own
    cursor/colour output), C1 controls, C0 controls but tab/newline/CR, lone surrogates."""
    rest = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", text)  # CSI: Textual's own drawing
    bad = re.findall(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]", rest)
    return sorted(set(bad))


def output_dirty(text: str) -> list[str]:
    """For plain CLI output (no CSI is ours there): any control or escape at all."""
    bad = re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text)
    return sorted(set(bad))


@dataclass
class HostileServer:
    url: str = ""
    mode: str = "reply"  # reply | tools | keepalive-drip | data-drip | silent | endless-line | nested | wrong-types
    #                      | error-400 | error-500-huge
    metrics_mb: float = 0.0  # >0: /metrics streams this many MB (chunked, no Content-Length)
    drip_interval_s: float = 0.2
    requests: list[dict[str, Any]] = field(default_factory=list)
    metrics_sent: int = 0


SRV: web.AppKey[HostileServer] = web.AppKey("srv", HostileServer)


def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"id": "x", "object": "chat.completion.chunk", "model": MODEL_ID,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _reply_events(srv: HostileServer) -> list[str]:
    evs = [_chunk({"role": "assistant"})]
    evs += [_chunk({"reasoning": "think " + HOSTILE}), _chunk({"reasoning_content": BIDI + " more"})]
    if srv.mode == "tools":
        evs += [_chunk({"tool_calls": [{"index": 0, "id": "call" + OSC52, "type": "function",
                                        "function": {"name": "get" + OSC_TITLE + "[/]", "arguments": ""}}]}),
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "' + "P\\u001b]52;c;"
                                                                 "cHduZWQgY2xpcGJvYXJk\\u0007[/]" + '"}'}}]})]
        evs.append(_chunk({}, finish="tool_calls"))
    else:
        evs += [_chunk({"content": "Hello " + HOSTILE}), _chunk({"content": "lone \ud800 surrogate"}),
                _chunk({"content": "tab\there\r\nCRLF and \r carriage"}), _chunk({}, finish="stop" + OSC_TITLE)]
    evs.append(json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 12,
                                                    "total_tokens": 15}}))
    return evs


async def _chat(request: web.Request) -> web.StreamResponse:
    srv: HostileServer = request.app[SRV]
    srv.requests.append(await request.json())
    if srv.mode == "error-400":
        return web.json_response({"error": {"message": "bad " + HOSTILE, "code": 400}}, status=400)
    if srv.mode == "error-500-huge":
        return web.Response(status=500, text=("boom " + HOSTILE) * 200_000)  # ~20 MB of it
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    try:
        if srv.mode == "keepalive-drip":
            await resp.write(b"data: " + _chunk({"role": "assistant"}).encode() + b"\n\n")
            while True:  # comments only: the console's --timeout must not be reset by them
                await asyncio.sleep(srv.drip_interval_s)
                await resp.write(b": keep-alive\n\n")
        if srv.mode == "silent":
            await resp.write(b"data: " + _chunk({"role": "assistant"}).encode() + b"\n\n")
            await asyncio.sleep(3600)  # no byte at all: only the console's limits end it
        if srv.mode == "data-drip":
            while True:  # a token forever: only the overall limit ends it
                await asyncio.sleep(srv.drip_interval_s)
                await resp.write(f"data: {_chunk({'content': 'drip '})}\n\n".encode())
        if srv.mode == "endless-line":
            await resp.write(b"data: {\"choices\": [{\"delta\": {\"content\": \"")
            block = b"A" * 65536
            while True:  # never a newline: memory must stay bounded anyway
                await resp.write(block)
        if srv.mode == "nested":
            await resp.write(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
            await resp.write(b"data: [DONE]\n\n")
            return resp
        if srv.mode == "wrong-types":
            for raw in ('{"choices": "nope"}', '{"choices": [1, "x", null]}',
                        '{"choices": [{"delta": {"content": 5, "reasoning": ["x"], "tool_calls": [1, {"index": "a",'
                        ' "function": {"name": 7, "arguments": {"a": 1}}}]}, "finish_reason": {"x": 1}}]}',
                        '{"choices": [{"delta": "str"}], "usage": [1, 2]}', '[1, 2, 3]', '"just a string"',
                        '{"choices": [{"delta": {"content": "ok"}}], "usage": {"completion_tokens": "many"}}'):
                await resp.write(f"data: {raw}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            return resp
        for ev in _reply_events(srv):
            await resp.write(f"data: {ev}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
        pass
    return resp


METRICS_HEAD = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="' + MODEL_ID.replace('"', "") + '",engine="0\x1b]0;t\x07"} 1\n'
    "# TYPE vllm:generation_tokens_total counter\n"
    'vllm:generation_tokens_total{model_name="[/]"} 100\n'
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    'vllm:kv_cache_usage_perc{model_name="m"} 0.25\n'
)


async def _metrics(request: web.Request) -> web.StreamResponse:
    srv: HostileServer = request.app[SRV]
    if srv.metrics_mb <= 0:
        return web.Response(text=METRICS_HEAD, content_type="text/plain")
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})  # chunked: no Content-Length
    await resp.prepare(request)
    line = 'vllm:generation_tokens_total{model_name="m%d"} 1e15\n'
    block = "".join(line % i for i in range(2000)).encode()
    try:
        await resp.write(METRICS_HEAD.encode())
        while srv.metrics_sent < srv.metrics_mb * 1024 * 1024:
            await resp.write(block)
            srv.metrics_sent += len(block)
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
        pass
    return resp


async def _models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}, {"id": 5},
                                                         "junk", {"id": ["x"]}]})


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION})


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok" + OSC52)


async def start_hostile() -> tuple[HostileServer, web.AppRunner]:
    srv = HostileServer()
    app = web.Application()
    app[SRV] = srv
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/version", _version)
    app.router.add_get("/health", _health)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    srv.url = f"http://127.0.0.1:{port}"
    return srv, runner
