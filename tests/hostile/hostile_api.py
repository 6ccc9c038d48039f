"""A hostile OpenAI-compatible server on 127.0.0.1 (aiohttp, like console/sim/api.py): everything a
compromised or broken endpoint could send the console.

Escape sequences (OSC 52 clipboard writes, OSC 0 titles, CSI clear-screen, DCS/APC), C0/C1 control
bytes, a lone surrogate, bidi overrides and Rich/Textual markup in content, reasoning, tool-call
names and arguments, model ids, ``/version`` and error bodies; a huge ``/metrics``; SSE keep-alive
comments that never end; data events that never end; a line without a newline that never ends; JSON
nested 100,000 deep; fields of the wrong type.

Round two: gzip bombs (a small compressed body that decodes to hundreds of MB) on the
stream, the JSON bodies and ``/metrics``; bytes dripped one at a time (headers or body) by a raw
TCP server that never finishes an answer; cut streams (no ``[DONE]``, no finish reason, an empty 200);
hostile ``/metrics`` values (negative, 309 digits, -inf, a bad bucket label); model lists that are an
HTML page, ``[]``, ``{"data": [1]}`` or not UTF-8; a 302 on ``/health``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
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
    #                      | error-400 | error-500-huge | gzip-bomb | cut | empty | done-only
    metrics_mb: float = 0.0  # >0: /metrics streams this many MB (chunked, no Content-Length)
    metrics_mode: str = "normal"  # normal | hostile-values | gzip-bomb | drip
    models_mode: str = "normal"  # normal | html | list | data-int | bad-utf8 | gzip-bomb | drip
    health_mode: str = "normal"  # normal | 302
    bomb_mb: int = 256  # what a gzip bomb decodes to
    drip_interval_s: float = 0.2
    requests: list[dict[str, Any]] = field(default_factory=list)
    metrics_sent: int = 0
    raw_url: str = ""  # the raw TCP server that drips (see RawDrip)
    raw: RawDrip | None = None


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
    if srv.mode == "gzip-bomb":  # ~bomb_mb of SSE, a few hundred KB on the wire
        return web.Response(body=sse_bomb(srv.bomb_mb), headers={"Content-Type": "text/event-stream",
                                                                 "Content-Encoding": "gzip"})
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    try:
        if srv.mode == "empty":  # a 200 and not one byte
            return resp
        if srv.mode == "done-only":
            await resp.write(b"data: [DONE]\n\n")
            return resp
        if srv.mode == "cut":  # some tokens, then the connection ends: no finish reason, no [DONE]
            for ev in (_chunk({"role": "assistant"}), _chunk({"content": "The answer is"}),
                       _chunk({"content": " forty"})):
                await resp.write(f"data: {ev}\n\n".encode())
            return resp
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


# Out-of-range values and a bad bucket label, next to good series that must still be shown.
METRICS_HOSTILE_VALUES = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="m",engine="0"} -5\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{model_name="m",engine="0"} 1' + "0" * 308 + "\n"
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    'vllm:kv_cache_usage_perc{model_name="m",engine="0"} -3.5\n'
    "# TYPE vllm:gpu_prefix_cache_hit_rate gauge\n"
    'vllm:gpu_prefix_cache_hit_rate{model_name="m"} -inf\n'
    "# TYPE vllm:generation_tokens_total counter\n"
    'vllm:generation_tokens_total{model_name="m"} 1000\n'
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    'vllm:time_to_first_token_seconds_bucket{model_name="m",le="-2.0"} 10\n'
    'vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 10\n'
    "# TYPE vllm:inter_token_latency_seconds histogram\n"
    'vllm:inter_token_latency_seconds_bucket{model_name="m",le="zzz"} 3\n'
    'vllm:inter_token_latency_seconds_bucket{model_name="m",le="0.01"} 4\n'
    'vllm:inter_token_latency_seconds_bucket{model_name="m",le="0.05"} 10\n'
    'vllm:inter_token_latency_seconds_bucket{model_name="m",le="+Inf"} 10\n'
    "this line is not Prometheus at all {{{\n"
    "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n"
    'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.5\n'
)

_BOMBS: dict[tuple[str, int], bytes] = {}


def gzip_bomb(kind: str, mb: int) -> bytes:
    """gzip of ``mb`` MB of a repeated block: a few hundred KB to a few MB that decode to ``mb`` MB.
    Cached (on disk from 256 MB: zlib writes ~150 MB/s here)."""
    if (kind, mb) in _BOMBS:
        return _BOMBS[(kind, mb)]
    cache = Path(tempfile.gettempdir()) / "dgx-hostile-bombs" / f"{kind}-{mb}.gz"
    if mb >= 256 and cache.is_file():
        _BOMBS[(kind, mb)] = cache.read_bytes()
        return _BOMBS[(kind, mb)]
    block = {"sse": (f"data: {_chunk({'content': 'A' * 4000})}\n\n" * 16).encode(),
             "metrics": ('vllm:generation_tokens_total{model_name="m"} 1\n' * 1000).encode(),
             "json": b" " * 65536}[kind]
    head = b'{"data": [' if kind == "json" else b""
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    out = [z.compress(head)]
    for _ in range(mb * 1024 * 1024 // len(block)):
        out.append(z.compress(block))
    out.append(z.compress(b'{"id": "m"}]}' if kind == "json" else b"data: [DONE]\n\n" if kind == "sse" else b""))
    out.append(z.flush())
    _BOMBS[(kind, mb)] = b"".join(out)
    if mb >= 256:
        cache.parent.mkdir(exist_ok=True)
        cache.write_bytes(_BOMBS[(kind, mb)])
    return _BOMBS[(kind, mb)]


def sse_bomb(mb: int) -> bytes:
    return gzip_bomb("sse", mb)


async def _metrics(request: web.Request) -> web.StreamResponse:
    srv: HostileServer = request.app[SRV]
    if srv.metrics_mode == "hostile-values":
        return web.Response(text=METRICS_HOSTILE_VALUES, content_type="text/plain")
    if srv.metrics_mode == "gzip-bomb":
        return web.Response(body=gzip_bomb("metrics", srv.bomb_mb),
                            headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
    if srv.metrics_mode == "drip":
        return await _drip_body(request, srv, METRICS_HEAD.encode())
    if srv.metrics_mb <= 0:
        return web.Response(text=METRICS_HEAD, content_type="text/plain")
    resp = web.StreamResponse(headers={"Content-Type": "text/plain"})  # chunked: no Content-Length
    await resp.prepare(request)
    line = 'vllm:generation_tokens_total{model_name="m%d"} 1e15\n'
    block = "".join(line % i for i in range(2000)).encode()
    sent = 0  # this answer's; metrics_sent counts every answer's
    try:
        await resp.write(METRICS_HEAD.encode())
        while sent < srv.metrics_mb * 1024 * 1024:
            await resp.write(block)
            sent += len(block)
            srv.metrics_sent += len(block)
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
        pass
    return resp


async def _drip_body(request: web.Request, srv: HostileServer, body: bytes) -> web.StreamResponse:
    """Headers at once, then the body one byte at a time (never idle long enough for a read timeout)."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    await resp.prepare(request)
    try:
        for i in range(len(body)):
            await resp.write(body[i:i + 1])
            await asyncio.sleep(srv.drip_interval_s)
    except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
        pass
    return resp


async def _models(request: web.Request) -> web.StreamResponse:
    srv: HostileServer = request.app[SRV]
    mode = srv.models_mode
    if mode == "html":
        return web.Response(text="<!DOCTYPE html><html><body><form>Sign in " + OSC52 + "</form></body></html>",
                            content_type="text/html")
    if mode == "list":
        return web.json_response([])
    if mode == "data-int":
        return web.json_response({"data": [1]})
    if mode == "bad-utf8":
        return web.Response(body=b'{"data": [{"id": "m\xff\xfe\xc3"}]}', content_type="application/json")
    if mode == "gzip-bomb":
        return web.Response(body=gzip_bomb("json", srv.bomb_mb),
                            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})
    if mode == "drip":
        return await _drip_body(request, srv, json.dumps({"data": [{"id": "m"}]}).encode() + b" " * 100_000)
    return web.json_response({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}, {"id": 5},
                                                         "junk", {"id": ["x"]}]})


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"version": VERSION})


async def _health(request: web.Request) -> web.Response:
    srv: HostileServer = request.app[SRV]
    if srv.health_mode == "302":  # a login proxy in front of the engine
        return web.Response(status=302, headers={"Location": "https://sso.example/login?[/][bold]x"})
    return web.Response(text="ok" + OSC52)


class RawDrip:
    """A raw HTTP/1.1 server that reads a request and answers one byte per ``interval_s``: the
    status line and headers (``mode="headers"``) or, after complete headers, the body
    (``mode="body"``). It gives up after ``give_up_s`` (so a test of a client that never stops
    ends anyway, with a failure, not a hung suite)."""

    def __init__(self, interval_s: float = 0.2, give_up_s: float = 30.0) -> None:
        self.mode = "headers"
        self.interval_s, self.give_up_s = interval_s, give_up_s
        self.server: asyncio.Server | None = None
        self.connections = 0
        self._tasks: set[asyncio.Task] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        loop = asyncio.get_running_loop()
        end = loop.time() + self.give_up_s
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Padding: " + b"x" * 4000 + b"\r\n\r\n"
        body = b"data: " + b" " * 10_000_000
        try:
            await reader.readuntil(b"\r\n\r\n")
            if self.mode == "body":
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 10000006\r\n\r\n")
            data = head if self.mode == "headers" else body
            for i in range(len(data)):
                if loop.time() > end:
                    break
                writer.write(data[i:i + 1])
                await writer.drain()
                await asyncio.sleep(self.interval_s)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


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
    srv.raw = RawDrip(srv.drip_interval_s)
    srv.raw_url = await srv.raw.start()
    return srv, runner
