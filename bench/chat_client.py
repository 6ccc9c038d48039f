"""Chat client and chat pane figures (medians over a few runs; not a pass/fail test).

1. Client overhead per streamed token: CPU time of this process per token while ``ApiClient``
   reads a stream from a server in another process, next to a bare httpx-sse + json.loads loop.
2. Chat pane render cost (CPU) for a 1,000- and a 10,000-token reply below an earlier reply
   that fills the screen (headless Textual, 20 tokens a frame): should grow about linearly. A naive ``Static.update(all_text)`` shows the quadratic cost
   StreamText avoids. And the UI's CPU while a reply streams at 115 tok/s.
3. Tokens/s the client takes from a local stream that sends as fast as it can.

Run: ``python bench/chat_client.py [--quick]``. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import socket
import statistics
import time

import httpx
from httpx_sse import aconnect_sse

from console.serving.chat import ChatRequest
from console.serving.client import ApiClient

# ---------------------------------------------------------------- a fast SSE server (own process)


def _chunk_bytes(n: int) -> bytes:
    out = [b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant",'
           b'"content":""},"finish_reason":null}]}\n\n']
    for i in range(n):
        kind = "reasoning" if i < n // 3 else "content"
        d = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {kind: f" tok{i % 97}"}, "logprobs": None, "finish_reason": None}]}
        out.append(b"data: " + json.dumps(d).encode() + b"\n\n")
    out.append(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
               b'"finish_reason":"stop"}]}\n\n')
    u = {"prompt_tokens": 5, "completion_tokens": n, "total_tokens": n + 5}
    out.append(b'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":' + json.dumps(u).encode()
               + b"}\n\n")
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _serve(port: int, ready: mp.Event) -> None:
    from aiohttp import web

    cache: dict[int, bytes] = {}

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        n = int(body.get("max_tokens") or 1000)
        data = cache.setdefault(n, _chunk_bytes(n))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(0, len(data), 1 << 16):
            await resp.write(data[i:i + (1 << 16)])
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)

    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client_run(url: str, n: int) -> tuple[float, float, int]:
    """(cpu seconds, wall seconds, tokens) for one ApiClient.chat of n tokens."""
    async with ApiClient(url, timeout=10) as c:
        req = ChatRequest(({"role": "user", "content": "x"},), "m", max_tokens=n)
        cpu0, t0 = time.process_time(), time.perf_counter()
        r = await c.chat(req, on_event=lambda ev: None)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    assert r.error is None and r.output_tokens == n, r.error
    return cpu, wall, n


async def _bare_run(url: str, n: int) -> tuple[float, float, int]:
    async with httpx.AsyncClient(base_url=url, timeout=10) as c:
        cpu0, t0 = time.process_time(), time.perf_counter()
        count = 0
        async with aconnect_sse(c, "POST", "/v1/chat/completions", json={"max_tokens": n}) as es:
            async for sse in es.aiter_sse():
                if sse.data != "[DONE]":
                    json.loads(sse.data)
                    count += 1
        return time.process_time() - cpu0, time.perf_counter() - t0, n


def client_figures(runs: int, n: int) -> None:
    port = _free_port()
    ready = mp.Event()
    proc = mp.Process(target=_serve, args=(port, ready), daemon=True)
    proc.start()
    try:
        ready.wait(20)
        url = f"http://127.0.0.1:{port}"
        for label, fn in (("ApiClient.chat", _client_run), ("bare httpx-sse + json.loads", _bare_run)):
            asyncio.run(fn(url, 200))  # warm-up
            res = [asyncio.run(fn(url, n)) for _ in range(runs)]
            cpu_us = statistics.median(c / k * 1e6 for c, _, k in res)
            tok_s = statistics.median(k / w for _, w, k in res)
            print(f"{label:32s} CPU per streamed token: {cpu_us:6.1f} us   "
                  f"takes {tok_s:,.0f} tok/s from a local stream ({n:,} tokens, median of {runs})")
    finally:
        proc.terminate()
        proc.join(5)


# ---------------------------------------------------------------- chat pane rendering


def _pane_app():
    from textual.app import App, ComposeResult
    from textual.containers import VerticalScroll

    class Pane(App):
        def compose(self) -> ComposeResult:
            yield VerticalScroll(id="c")

    return Pane()


def _word(i: int) -> str:
    return f" word{i % 50}" + ("\n\n" if i % 120 == 119 else "")


async def _render(n: int, naive: bool) -> tuple[float, list[float]]:
    """CPU seconds to stream n tokens into the pane at 20 tokens a frame, 30 frames/s; and the
    CPU of each successive 2,000 tokens (flat means linear)."""
    from textual.containers import VerticalScroll
    from textual.widgets import Static

    from console.serving.chat import ChatEvent
    from console.ui.screens.chat import ReplyView

    app = _pane_app()
    async with app.run_test(size=(120, 40)) as pilot:
        conv = app.query_one("#c", VerticalScroll)
        conv.anchor()
        earlier = ReplyView()  # an earlier reply fills the screen, as in a conversation
        await conv.mount(earlier)
        for i in range(2000):
            earlier.add_event(ChatEvent("content", 0.0, _word(i)))
        view = Static("") if naive else ReplyView()
        await conv.mount(view)
        await pilot.pause()
        t0 = mark = time.process_time()
        marks: list[float] = []
        acc: list[str] = []
        for i in range(n):
            if naive:
                acc.append(_word(i))
                if i % 20 == 19:
                    view.update("".join(acc))
            else:
                view.add_event(ChatEvent("content", 0.0, _word(i)))
            if i % 20 == 19:
                await asyncio.sleep(1 / 30)  # the app lays out and paints between network reads
            if i % 2000 == 1999:
                now = time.process_time()
                marks.append(now - mark)
                mark = now
        if naive:
            view.update("".join(acc))
        elif hasattr(view, "finish"):  # the reply ends: its last paint counts too
            from console.serving.chat import ChatResult

            view.finish(ChatResult(finish_reason="stop"))
        await asyncio.sleep(1 / 30)  # the last frame
        return time.process_time() - t0, marks


async def _load(rate: float, seconds: float) -> tuple[float, int]:
    """UI CPU (fraction of a core) while tokens arrive one per chunk at ``rate``, screen full."""
    from textual.containers import VerticalScroll

    from console.serving.chat import ChatEvent
    from console.ui.screens.chat import ReplyView

    app = _pane_app()
    async with app.run_test(size=(120, 40)) as pilot:
        conv = app.query_one("#c", VerticalScroll)
        conv.anchor()
        view = ReplyView()
        await conv.mount(view)
        for i in range(3000):
            view.add_event(ChatEvent("content", 0.0, _word(i)))
        await pilot.pause()
        cpu0, w0, i = time.process_time(), time.perf_counter(), 0
        while time.perf_counter() - w0 < seconds:
            view.add_event(ChatEvent("content", 0.0, _word(i)))
            i += 1
            await asyncio.sleep(max(0.0, w0 + i / rate - time.perf_counter()))
        return (time.process_time() - cpu0) / (time.perf_counter() - w0), i


def render_figures(runs: int) -> None:
    res = {}
    for label, naive, sizes in (("chat pane (StreamText)", False, (1_000, 10_000)),
                                ("naive Static.update", True, (1_000, 4_000))):
        for n in sizes:
            outs = [asyncio.run(_render(n, naive)) for _ in range(runs)]
            res[(label, n)] = statistics.median(c for c, _ in outs)
            marks = outs[0][1]
            extra = f"; CPU per 2,000 tokens along the way: {', '.join(f'{m:.2f}' for m in marks)} s" if marks else ""
            print(f"{label:24s} {n:6,} tokens: {res[(label, n)]:6.2f} s CPU ({res[(label, n)] / n * 1e3:.2f} ms/token)"
                  + extra)
        a, b = sizes
        print(f"  -> x{res[(label, b)] / res[(label, a)]:.1f} CPU for x{b // a} tokens")
    frac, n = asyncio.run(_load(115.0, 5.0))
    print(f"chat pane UI CPU while streaming 115 tok/s (one token a chunk, screen full): {frac * 100:.0f} % "
          f"of a core ({n} tokens in 5 s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs")
    args = ap.parse_args()
    runs = 3 if args.quick else 5
    client_figures(runs, 20_000)
    render_figures(1 if args.quick else 3)


if __name__ == "__main__":
    main()
