"""HTTP client for the served model's OpenAI-compatible API (vLLM or SGLang): the only one.

Every HTTP request of the console goes through :class:`ApiClient` (the serving panel, the chat pane,
``chat``, ``bench``, ``status``, launch's readiness check). Every failure becomes an
:class:`ApiError` with a ``kind`` the screens can show as a state (``unauthorized``, ``unavailable``,
``timeout``, ``connect``, ``http``, ``stream``, ``cut``, ``too-large``), never a traceback; the API
key is only ever put in the Authorization header.

The server is outside text, so every request is bounded in bytes and in time:

- bytes are counted *decoded*: the client asks for ``Accept-Encoding: identity`` and decodes a
  gzip/deflate body the server sends anyway itself, a slice at a time (a 1 MB gzip bomb never
  becomes 1 GB in memory); any other encoding is refused. Caps: ``/metrics`` 8 MB, other bodies
  4 MB, an error body 64 KB (then cut), a streamed reply 64 MB;
- every request has one overall deadline (connect + headers + body) however slowly the bytes
  drip: a GET's is ``timeout``; a stream's headers must come within ``stream_timeout``, its data
  events at most ``stream_timeout`` apart (SSE keep-alive comments never reset it) and the whole
  reply within ``total_timeout``;
- JSON that is deeply nested, of the wrong type, not UTF-8 or not JSON at all is an error, never
  an exception; a redirect is not followed and is not a success; a stream that ends without
  ``[DONE]`` or a finish reason is a ``cut`` reply, not a short one.

Error messages are sanitized one-liners; reply text stays raw in :class:`ChatResult` (``--json``
keeps it) and is sanitized where shown.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.lazy import lazy_module

if TYPE_CHECKING:
    import httpx
else:
    httpx = lazy_module("httpx")  # loaded on first use, after the first frame

from console.safe_files import KIB, MIB
from console.serving.chat import ChatAccumulator, ChatEvent, ChatRequest, ChatResult, events_from_chunk
from console.serving.errors import ApiError

MAX_METRICS_BYTES = 8 * MIB
MAX_BODY_BYTES = 4 * MIB  # /v1/models, /version, /health
MAX_ERROR_BYTES = 64 * KIB  # what is read of an error body (a message is shown, not a page)
MAX_STREAM_BYTES = 64 * MIB  # one streamed reply (8k tokens of SSE framing is ~2.5 MB)
DEFAULT_TOTAL_TIMEOUT_S = 3600.0  # a whole streamed reply, however often the server sends something
INFLATE_SLICE = 256 * KIB  # a compressed body is decoded this much at a time, counted as it goes
IDENTITY = {"Accept-Encoding": "identity"}  # no compression asked for: bytes on the wire are bytes read


def valid_api_key(key: str) -> bool:
    """What an ``Authorization: Bearer`` header can carry: printable ASCII, no spaces."""
    return key.isascii() and key.isprintable() and " " not in key and len(key) <= 4096


class _TooLarge(Exception):
    pass


class _Overdue(Exception):
    """A deadline passed: ``total`` the whole request's, else the gap between data events."""

    def __init__(self, total: bool):
        self.total = total


def _json(data: bytes | str) -> Any:
    """JSON or ValueError; a hostile document nested 100,000 deep is a ValueError too."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise ValueError("not UTF-8") from None


# ---------------------------------------------------------------- reading a body, bounded


class _Inflate:
    """gzip/deflate decoded a slice at a time (zlib's ``max_length``), so a bomb is counted as it
    grows instead of landing in memory whole."""

    def __init__(self, encoding: str):
        self.encoding = encoding
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else 32 + zlib.MAX_WBITS)

    def decode(self, data: bytes) -> Iterator[bytes]:
        while data and not self._z.eof:
            try:
                out = self._z.decompress(data, INFLATE_SLICE)
            except zlib.error as exc:
                raise ApiError("http", f"the body is not valid {self.encoding} ({exc})") from None
            data = self._z.unconsumed_tail
            if out:
                yield out

    def flush(self) -> Iterator[bytes]:
        while not self._z.eof:
            out = self._z.decompress(self._z.unconsumed_tail, INFLATE_SLICE)
            if not out:
                break
            yield out


def _decoder(resp: httpx.Response, what: str) -> _Inflate | None:
    """How to decode the body: as is (None), gunzip/inflate; anything else is refused (we asked
    for identity: a server that compresses anyway with an encoding we cannot bound is not read)."""
    enc = resp.headers.get("content-encoding", "").strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip", "deflate"):
        return _Inflate(enc)
    raise ApiError("http", f"{what}: the body is compressed as {enc[:40]!r} although the console asked for none; "
                   "not read")


class _Body:
    """A response body as decoded chunks, bounded: past ``limit`` decoded bytes _TooLarge; past
    ``deadline`` (the whole request's) or ``idle_deadline`` (moved on by the reader at each data
    event; None: none) _Overdue. Every wait for the next bytes is itself under the nearer of the
    two deadlines, so bytes dripped one at a time cannot stretch a request."""

    def __init__(self, resp: httpx.Response, limit: int, deadline: float, what: str,
                 idle_deadline: float | None = None):
        self._resp, self.limit, self.deadline, self.idle_deadline = resp, limit, deadline, idle_deadline
        self._inflate = _decoder(resp, what)
        self.count = 0

    def _take(self, piece: bytes) -> bytes:
        self.count += len(piece)
        if self.count > self.limit:
            raise _TooLarge()
        return piece

    async def chunks(self) -> AsyncIterator[bytes]:
        if self._resp.is_stream_consumed:  # an in-memory response (a test's MockTransport): decoded already
            yield self._take(self._resp.content)
            return
        raw = self._resp.aiter_raw()
        try:
            while True:
                due = self.deadline if self.idle_deadline is None else min(self.deadline, self.idle_deadline)
                try:
                    async with asyncio.timeout_at(due):
                        data = await anext(raw)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise _Overdue(total=due >= self.deadline) from None
                if self._inflate is None:
                    yield self._take(data)
                else:
                    for piece in self._inflate.decode(data):
                        yield self._take(piece)
            if self._inflate is not None:
                for piece in self._inflate.flush():
                    yield self._take(piece)
        finally:
            await raw.aclose()

    async def read(self) -> bytes:
        """The whole body (a Content-Length over the limit of an unencoded body is refused unread)."""
        length = self._resp.headers.get("content-length", "")
        if self._inflate is None and length.isdigit() and int(length) > self.limit:
            raise _TooLarge()
        return b"".join([c async for c in self.chunks()])


# ---------------------------------------------------------------- server-sent events


_LINE_END = re.compile(rb"\r\n|\r|\n")


class _SseParser:
    """Server-sent events from decoded chunks: the ``data`` of each event (comments, ``event``,
    ``id`` and ``retry`` lines are read and dropped). A line still arriving is kept (bounded by the
    body's byte cap); a trailing CR waits for the next chunk (it may be a CRLF)."""

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[str]:
        buf = self._buf + chunk if self._buf else chunk
        out: list[str] = []
        pos = 0
        for m in _LINE_END.finditer(buf):
            if m.group() == b"\r" and m.end() == len(buf):
                break  # maybe the first half of CRLF
            self._line(buf[pos:m.start()], out)
            pos = m.end()
        self._buf = buf[pos:]
        return out

    def _line(self, line: bytes, out: list[str]) -> None:
        if not line:
            if self._data:
                out.append(b"\n".join(self._data).decode("utf-8", "replace"))
                self._data = []
            return
        if line.startswith(b":"):
            return  # a comment: a keep-alive
        field, _, value = line.partition(b":")
        if field == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)


# ---------------------------------------------------------------- the client


@dataclass(frozen=True)
class Health:
    ok: bool
    status: int | None
    error: str | None = None
    kind: str | None = None  # the ApiError kind of a miss: connect (refused), timeout, unavailable, http


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
    """Async client for one server. ``timeout``: a GET's whole deadline, and the connect timeout
    of a stream; ``stream_timeout``: the longest wait for a stream's headers and between its data
    events; ``total_timeout``: a whole streamed reply."""

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float = 5.0,
                 stream_timeout: float = 120.0, transport: httpx.AsyncBaseTransport | None = None,
                 total_timeout: float = DEFAULT_TOTAL_TIMEOUT_S):
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
        self.timeout = timeout
        self.stream_timeout = stream_timeout  # longest gap between data events of a stream
        self.total_timeout = total_timeout  # longest whole streamed reply
        self._http = httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport,
                                       trust_env=False, follow_redirects=False)

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
            return dict(IDENTITY)
        if not valid_api_key(self._api_key):
            raise ApiError("unauthorized", "the API key has characters an HTTP header cannot carry "
                           "(printable ASCII only, no spaces)")
        return {**IDENTITY, "Authorization": f"Bearer {self._api_key}"}

    def _raise_for(self, resp: httpx.Response, body: bytes, what: str) -> None:
        """Anything but a 2xx is an error (a redirect too: a login page is not the API)."""
        status = resp.status_code
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            where = resp.headers.get("location", "")
            raise ApiError("http", f"HTTP {status} from {what}: a redirect{f' to {where[:120]}' if where else ''} "
                           "(a login page or a proxy in front of the API?); not followed", status)
        msg = _error_message(body, resp.reason_phrase)
        if status == 401:
            hint = ("the API key was refused (--api-key is wrong)" if self._api_key
                    else "the server requires an API key (--api-key missing)")
            raise ApiError("unauthorized", f"401 Unauthorized from {what}: {hint}", 401)
        if status == 503:
            raise ApiError("unavailable", f"503 from {what}: the engine is dead or not ready ({msg})", 503)
        raise ApiError("http", f"HTTP {status} from {what}: {msg}", status)

    async def _send(self, request: httpx.Request, deadline: float) -> httpx.Response:
        """Connect, send and read the headers before ``deadline`` (_Overdue after)."""
        try:
            async with asyncio.timeout_at(deadline):
                return await self._http.send(request, stream=True)
        except TimeoutError:
            raise _Overdue(total=True) from None

    async def _error_body(self, resp: httpx.Response, deadline: float, what: str) -> bytes:
        """What is read of an error body: 64 KB at most, cut beyond (a message is shown, not a page)."""
        try:
            return await _Body(resp, MAX_ERROR_BYTES, deadline, what).read()
        except (_TooLarge, ApiError):
            return b""

    async def _get_chunks(self, path: str, limit: int, on_chunk: Callable[[bytes], None]) -> int:
        """``GET path``, each decoded chunk handed to ``on_chunk`` as it arrives (nothing kept
        here); the byte count. The whole request (connect, headers, body) within ``timeout``."""
        what = f"GET {path}"
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        resp: httpx.Response | None = None
        try:
            resp = await self._send(self._http.build_request("GET", path, headers=self._headers()), deadline)
            if not 200 <= resp.status_code < 300:
                self._raise_for(resp, await self._error_body(resp, deadline, what), what)
            body = _Body(resp, limit, deadline, what)
            length = resp.headers.get("content-length", "")
            if "content-encoding" not in resp.headers and length.isdigit() and int(length) > limit:
                raise _TooLarge()
            async for chunk in body.chunks():
                on_chunk(chunk)
            return body.count
        except _TooLarge:
            raise ApiError("too-large", f"{what}: the response is larger than {_mb(limit)}; not read") from None
        except (_Overdue, httpx.TimeoutException):
            raise ApiError("timeout", f"{what}: timed out: no complete answer within {self.timeout:g}s "
                           "(connect, headers and body)") from None
        except httpx.TransportError as exc:
            raise ApiError("connect", f"cannot reach {self.base_url}: {_short(exc)}") from None
        except (httpx.InvalidURL, ValueError, OverflowError) as exc:  # a URL httpx cannot use
            raise ApiError("connect", f"cannot use {self.base_url}: {_short(exc)}") from None
        finally:
            if resp is not None:
                await resp.aclose()

    async def _get(self, path: str, limit: int = MAX_BODY_BYTES) -> bytes:
        """The body of ``GET path``, at most ``limit`` decoded bytes (ApiError ``too-large`` beyond)."""
        chunks: list[bytes] = []
        await self._get_chunks(path, limit, chunks.append)
        return b"".join(chunks)

    async def health(self, path: str = "/health") -> Health:
        """``/health`` (or SGLang's ``/health_generate``): a 2xx is healthy; 503 engine dead, a redirect
        or anything else not; never raises."""
        try:
            await self._get(path, MAX_ERROR_BYTES)
        except ApiError as exc:
            return Health(False, exc.status, str(exc), exc.kind)
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
        """The models the server lists (entries whose ``id`` is a string; the id stays raw). A body
        that is not JSON (an HTML login page, bytes that are not UTF-8) is an ApiError; a JSON
        document of another shape (``[]``, ``{"data": [1]}``) lists no model."""
        body = await self._get("/v1/models")
        try:
            data = _json(body)
        except ValueError as exc:
            looks = "an HTML page (a login page or a proxy?)" if body.lstrip()[:15].lower().startswith(
                (b"<!doctype", b"<html")) else str(exc)
            raise ApiError("http", f"GET /v1/models: the answer is not JSON: {looks}") from None
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            return []
        return [m for m in items if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]

    async def metrics_text(self) -> str:
        """``/metrics`` (at most MAX_METRICS_BYTES decoded; ApiError ``too-large`` beyond)."""
        return (await self._get("/metrics", MAX_METRICS_BYTES)).decode("utf-8", "replace")

    async def metrics_feed(self, on_chunk: Callable[[bytes], None]) -> int:
        """``/metrics`` chunk by chunk into ``on_chunk`` (an incremental parser: the body is never
        held whole); the decoded size. Same bounds as :meth:`metrics_text`."""
        return await self._get_chunks("/metrics", MAX_METRICS_BYTES, on_chunk)

    async def stream_chat(self, req: ChatRequest) -> AsyncIterator[ChatEvent]:
        """Yield events as chunks arrive; raises ApiError. Closing the iterator closes the stream,
        which makes the server abort the request.

        Bounded: the headers must come within ``stream_timeout`` (and the connection within
        ``timeout``); ``stream_timeout`` is also the longest gap between two *data* events (SSE
        comments, the keep-alives some proxies send, do not count), ``total_timeout`` the whole
        reply, and at most MAX_STREAM_BYTES decoded bytes are read (counted chunk by chunk, while a
        line is still arriving too). A stream that ends before ``[DONE]`` and before any finish
        reason is ApiError ``cut``: a truncated reply is not a reply."""
        what = "POST /v1/chat/completions"
        loop = asyncio.get_running_loop()
        start = loop.time()
        total_deadline = start + self.total_timeout
        too_long = f"{what}: the reply took longer than {self.total_timeout:g}s in all"
        quiet = f"{what} timed out (no data for {self.stream_timeout:g}s)"
        resp: httpx.Response | None = None
        done = finished = False
        chunks = 0
        try:
            # ASCII JSON: the history may hold a server's lone surrogate, which UTF-8 cannot encode
            content = json.dumps(req.body()).encode()
            request = self._http.build_request(
                "POST", "/v1/chat/completions", content=content,
                headers={**self._headers(), "Content-Type": "application/json", "Accept": "text/event-stream"},
                timeout=httpx.Timeout(min(self.stream_timeout, self.total_timeout), connect=self.timeout))
            headers_by = min(total_deadline, start + self.stream_timeout)
            try:
                resp = await self._send(request, headers_by)
            except _Overdue:
                raise ApiError("timeout", f"{what}: timed out: no complete response headers within "
                               f"{headers_by - start:g}s") from None
            if not 200 <= resp.status_code < 300:
                self._raise_for(resp, await self._error_body(resp, total_deadline, what), what)
            ctype = resp.headers.get("content-type", "")
            if "text/event-stream" not in ctype.lower():
                raise ApiError("stream", f"{what}: not an event stream (Content-Type {ctype[:60]!r})")
            body = _Body(resp, MAX_STREAM_BYTES, total_deadline, what, idle_deadline=start + self.stream_timeout)
            parser = _SseParser()
            async for piece in body.chunks():
                for data in parser.feed(piece):
                    data = data.strip()
                    if data == "[DONE]":
                        done = True
                        break
                    if not data:
                        continue
                    body.idle_deadline = loop.time() + self.stream_timeout  # a data event
                    chunks += 1
                    try:
                        chunk = _json(data)
                    except ValueError:
                        raise ApiError("stream", f"{what}: a chunk was not JSON: {data[:80]!r}") from None
                    if not isinstance(chunk, dict):
                        continue
                    for ev in events_from_chunk(chunk, time.perf_counter()):
                        finished = finished or ev.kind == "finish"
                        yield ev
                if done:
                    break
            if not finished and not (done and chunks):
                raise ApiError("cut", _cut_words(what, done, chunks, body.count))
        except _TooLarge:
            raise ApiError("too-large", f"{what}: the reply is larger than {_mb(MAX_STREAM_BYTES)}; "
                           "stopped reading") from None
        except _Overdue as exc:
            raise ApiError("timeout", too_long if exc.total else quiet) from None
        except httpx.ConnectTimeout:
            raise ApiError("timeout", f"{what}: connecting to {self.base_url} timed out after {self.timeout:g}s"
                           ) from None
        except httpx.TimeoutException:  # read, write or pool: the stream went quiet
            raise ApiError("timeout", too_long if loop.time() >= total_deadline else quiet) from None
        except httpx.TransportError as exc:
            raise ApiError("connect", f"{what}: connection to {self.base_url} failed: {_short(exc)}") from None
        except (httpx.InvalidURL, OverflowError) as exc:
            raise ApiError("connect", f"{what}: cannot use {self.base_url}: {_short(exc)}") from None
        finally:
            if resp is not None:
                await resp.aclose()

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


def _cut_words(what: str, done: bool, chunks: int, nbytes: int) -> str:
    if done:
        return f"{what}: the server sent [DONE] without any reply (no chunk, no finish reason)"
    if not nbytes:
        return f"{what}: the reply was cut: an empty stream (HTTP 200, not one byte, no [DONE])"
    return (f"{what}: the reply was cut: the stream ended after {chunks} chunk(s) without [DONE] or a "
            "finish reason (the server or a proxy closed it)")


def _mb(n: int) -> str:
    return f"{n // MIB} MB" if n >= MIB else f"{n // KIB} KB"


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]
