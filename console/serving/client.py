"""HTTP client for the served model's OpenAI-compatible API (vLLM or SGLang).

One small async client used by the TUI (serving panel, chat pane) and the headless ``chat``
command alike. Every failure becomes an :class:`ApiError` with a ``kind`` the screens can show
as a state (``unauthorized``, ``unavailable``, ``timeout``, ``connect``, ``http``, ``stream``,
``too-large``), never a traceback; the API key is only ever put in the Authorization header.

The server is outside text: every read is bounded (``/metrics`` at 8 MB, other bodies smaller, a
streamed reply at 64 MB), a stream's idle timeout counts data events only (SSE keep-alive comments
never reset it) and a whole reply has an overall limit; JSON that is deeply nested, of the wrong
type or not JSON at all is an error, never an exception. Error messages are sanitized one-liners;
reply text stays raw in :class:`ChatResult` (``--json`` keeps it) and is sanitized where shown.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import SSEError, aconnect_sse

from console.safe_files import KIB, MIB
from console.serving.chat import ChatAccumulator, ChatEvent, ChatRequest, ChatResult, events_from_chunk
from console.serving.errors import ApiError

MAX_METRICS_BYTES = 8 * MIB
MAX_BODY_BYTES = 4 * MIB  # /v1/models, /version, /health
MAX_ERROR_BYTES = 64 * KIB  # what is read of an error body (a message is shown, not a page)
MAX_STREAM_BYTES = 64 * MIB  # one streamed reply (8k tokens of SSE framing is ~2.5 MB)
DEFAULT_TOTAL_TIMEOUT_S = 3600.0  # a whole streamed reply, however often the server sends something


def valid_api_key(key: str) -> bool:
    """What an ``Authorization: Bearer`` header can carry: printable ASCII, no spaces."""
    return key.isascii() and key.isprintable() and " " not in key and len(key) <= 4096


class _TooLarge(Exception):
    pass


def _json(data: bytes | str) -> Any:
    """JSON or ValueError; a hostile document nested 100,000 deep is a ValueError too."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None


# ---------------------------------------------------------------- the client


@dataclass(frozen=True)
class Health:
    ok: bool
    status: int | None
    error: str | None = None


def _error_message(body: bytes, reason: str) -> str:
    """The server's message from an error body (JSON ``error.message`` or the text), short."""
    try:
        data = _json(body)
    except ValueError:
        text = body.decode("utf-8", "replace").strip()
        return text[:200] or reason
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)[:300]
        if isinstance(err, str):
            return err[:300]
        if "message" in data:
            return str(data["message"])[:300]
    return str(data)[:300]


class ApiClient:
    """Async client for one server. ``timeout`` bounds connect and each read (stream gaps)."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 5.0,
                 stream_timeout: float = 120.0, transport: httpx.AsyncBaseTransport | None = None,
                 total_timeout: float = DEFAULT_TOTAL_TIMEOUT_S):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        self.timeout = timeout
        self.stream_timeout = stream_timeout  # longest gap between data events of a stream
        self.total_timeout = total_timeout  # longest whole streamed reply
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                       trust_env=False)

    def __repr__(self) -> str:  # never the key
        return f"ApiClient({self.base_url!r}, api_key={'set' if self._api_key else 'none'})"

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def set_api_key(self, key: str | None) -> None:
        self._api_key = key or None

    def _headers(self) -> dict[str, str]:
        if not self._api_key:
            return {}
        if not valid_api_key(self._api_key):
            raise ApiError("unauthorized", "the API key has characters an HTTP header cannot carry "
                           "(printable ASCII only, no spaces)")
        return {"Authorization": f"Bearer {self._api_key}"}

    def _raise_for(self, status: int, body: bytes, reason: str, what: str) -> None:
        if status < 400:
            return
        msg = _error_message(body, reason)
        if status == 401:
            hint = ("the API key was refused (--api-key is wrong)" if self._api_key
                    else "the server requires an API key (--api-key missing)")
            raise ApiError("unauthorized", f"401 Unauthorized from {what}: {hint}", 401)
        if status == 503:
            raise ApiError("unavailable", f"503 from {what}: the engine is dead or not ready ({msg})", 503)
        raise ApiError("http", f"HTTP {status} from {what}: {msg}", status)

    async def _get(self, path: str, limit: int = MAX_BODY_BYTES) -> bytes:
        """The body of ``GET path``, read at most ``limit`` bytes far (ApiError ``too-large`` beyond)."""
        try:
            async with self._http.stream("GET", path, headers=self._headers()) as resp:
                cap = MAX_ERROR_BYTES if resp.status_code >= 400 else limit
                try:
                    body = await _read_capped(resp, cap)
                except _TooLarge:
                    if resp.status_code >= 400:
                        body = b""
                    else:
                        raise ApiError("too-large", f"GET {path}: the response is larger than "
                                       f"{limit // MIB} MB; not read") from None
                self._raise_for(resp.status_code, body, resp.reason_phrase, f"GET {path}")
                return body
        except httpx.TimeoutException:
            raise ApiError("timeout", f"GET {path} timed out after {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise ApiError("connect", f"cannot reach {self.base_url}: {_short(exc)}") from None
        except (httpx.InvalidURL, ValueError, OverflowError) as exc:  # a URL httpx cannot use
            raise ApiError("connect", f"cannot use {self.base_url}: {_short(exc)}") from None

    async def health(self) -> Health:
        """``/health``: 200 healthy, 503 engine dead; never raises."""
        try:
            await self._get("/health", MAX_ERROR_BYTES)
        except ApiError as exc:
            return Health(False, exc.status, str(exc))
        return Health(True, 200)

    async def version(self) -> str | None:
        try:
            data = _json(await self._get("/version"))
        except ValueError:
            return None
        version = data.get("version") if isinstance(data, dict) else None
        return str(version)[:100] if isinstance(version, (str, int, float)) and not isinstance(version, bool) \
            else None

    async def models(self) -> list[dict[str, Any]]:
        """The models the server lists (entries whose ``id`` is a string; the id stays raw)."""
        try:
            data = _json(await self._get("/v1/models"))
        except ValueError:
            raise ApiError("http", f"GET /v1/models: not JSON from {self.base_url}") from None
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return []
        return [m for m in items if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]

    async def metrics_text(self) -> str:
        """``/metrics`` (at most MAX_METRICS_BYTES; ApiError ``too-large`` beyond)."""
        return (await self._get("/metrics", MAX_METRICS_BYTES)).decode("utf-8", "replace")

    async def stream_chat(self, req: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Yield events as chunks arrive; raises ApiError. Closing the iterator closes the stream,
        which makes the server abort the request.

        Bounded: ``stream_timeout`` is the longest gap between two *data* events (SSE comments, the
        keep-alives some proxies send, do not count), ``total_timeout`` the whole reply, and at most
        MAX_STREAM_BYTES are read (counted chunk by chunk, while a line is still arriving too)."""
        # httpx's read timeout resets on any byte (keep-alive comments too); the guard counts data
        # events (see _GuardedStream) and the whole reply's deadline
        timeout = httpx.Timeout(min(self.stream_timeout, self.total_timeout), connect=self.timeout)
        what = "POST /v1/chat/completions"
        loop = asyncio.get_running_loop()
        total_deadline = loop.time() + self.total_timeout
        too_long = f"{what}: the reply took longer than {self.total_timeout:g}s in all"
        quiet = f"{what} timed out (no data for {self.stream_timeout:g}s)"
        try:
            # ASCII JSON: the history may hold a server's lone surrogate, which UTF-8 cannot encode
            body = json.dumps(req.body()).encode()
            async with aconnect_sse(self._http, "POST", "/v1/chat/completions", content=body,
                                    headers={**self._headers(), "Content-Type": "application/json"},
                                    timeout=timeout) as source:
                resp = source.response
                if resp.status_code >= 400:
                    try:
                        body = await _read_capped(resp, MAX_ERROR_BYTES)
                    except _TooLarge:
                        body = b""
                    self._raise_for(resp.status_code, body, resp.reason_phrase, what)
                guard = _GuardedStream(resp.stream, MAX_STREAM_BYTES, self.stream_timeout, total_deadline, loop)
                resp.stream = guard  # type: ignore[assignment]
                events = source.aiter_sse()
                try:
                    async for sse in events:
                        data = sse.data.strip()
                        if data == "[DONE]":
                            return
                        if not data:
                            continue
                        guard.idle_deadline = loop.time() + self.stream_timeout  # a data event
                        try:
                            chunk = _json(sse.data)
                        except ValueError:
                            raise ApiError("stream", f"{what}: a chunk was not JSON: {sse.data[:80]!r}") from None
                        if not isinstance(chunk, dict):
                            continue
                        for ev in events_from_chunk(chunk, time.perf_counter()):
                            yield ev
                except _TooLarge:
                    raise ApiError("too-large", f"{what}: the reply is larger than {MAX_STREAM_BYTES // MIB} MB; "
                                   "stopped reading") from None
                except _Overdue as exc:
                    raise ApiError("timeout", too_long if exc.total else quiet) from None
                finally:
                    await events.aclose()
        except httpx.ConnectTimeout:
            raise ApiError("timeout", f"{what}: connecting to {self.base_url} timed out after {self.timeout:g}s"
                           ) from None
        except httpx.TimeoutException:  # read, write or pool: the stream went quiet
            raise ApiError("timeout", too_long if loop.time() >= total_deadline else quiet) from None
        except SSEError as exc:
            raise ApiError("stream", f"{what}: not an event stream ({exc})") from None
        except httpx.TransportError as exc:
            raise ApiError("connect", f"{what}: connection to {self.base_url} failed: {_short(exc)}") from None
        except (httpx.InvalidURL, OverflowError) as exc:
            raise ApiError("connect", f"{what}: cannot use {self.base_url}: {_short(exc)}") from None

    async def chat(self, req: ChatRequest, on_event: Callable[[ChatEvent], None] | None = None, *,
                   accumulator: ChatAccumulator | None = None) -> ChatResult:
        """Run one streamed chat completion to its end; API errors land in the result.

        A cancel is never swallowed: the stream is closed (so the server stops generating) and
        ``CancelledError`` propagates. A caller that wants the partial reply of a cancelled chat
        passes its own ``accumulator`` and calls ``accumulator.finish(cancelled=True)``."""
        acc = accumulator or ChatAccumulator(req, time.perf_counter())
        stream = self.stream_chat(req)
        try:
            async for ev in stream:
                acc.feed(ev)
                if on_event is not None:
                    on_event(ev)
        except ApiError as exc:
            return acc.finish(error=exc)
        finally:
            await stream.aclose()
        return acc.finish()


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


async def _read_capped(resp: httpx.Response, limit: int) -> bytes:
    """At most ``limit`` bytes of a streamed response (_TooLarge beyond; a Content-Length over the
    limit is refused before reading anything)."""
    length = resp.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise _TooLarge()
    chunks, total = [], 0
    async for chunk in resp.aiter_bytes():
        total += len(chunk)
        if total > limit:
            raise _TooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


class _Overdue(Exception):
    def __init__(self, total: bool):
        self.total = total


class _GuardedStream(httpx.AsyncByteStream):
    """A streamed reply's body, checked chunk by chunk as bytes arrive (a 1 GB line without a
    newline never completes an event, and keep-alive comments are bytes but no event): past
    ``limit`` bytes _TooLarge; past the whole reply's deadline, or ``idle_deadline`` (which the
    reader moves on at each data event), _Overdue. A silent server is httpx's read timeout."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, idle_s: float, total_deadline: float,
                 loop: asyncio.AbstractEventLoop):
        self._inner, self._limit, self.count = inner, limit, 0
        self._loop, self.total_deadline = loop, total_deadline
        self.idle_deadline = loop.time() + idle_s

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self.count += len(chunk)
            if self.count > self._limit:
                raise _TooLarge()
            now = self._loop.time()
            if now > self.total_deadline:
                raise _Overdue(total=True)
            if now > self.idle_deadline:
                raise _Overdue(total=False)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
