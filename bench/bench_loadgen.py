"""How many streamed tok/s one load-generator process sustains while its figures stay true.

A fast local SSE server (its own process, 127.0.0.1, raw asyncio HTTP/1.1) streams one token a
chunk at a fixed per-stream pace and records, per request, when it arrived and when it sent its
first and last token. The benchmark's own runner (``BenchRunner`` over ``ApiClient``, the code
``dgx-console bench`` runs) sweeps concurrency; per level we compare what the client measured with
what the server did:

- tokens: the client's usage sum vs the server's generation-token counter delta (must be equal);
- total tok/s: client (tokens / last response - first request) vs server (same span, its clock);
- per-user tok/s: client mean 1/ITL vs server mean 1/ITL (its own send times).

``time.perf_counter`` is CLOCK_MONOTONIC on Linux, one clock for both processes. The figure is
the highest server tok/s at which both rates stay within 2% and the tokens match (target >= 5,000,
so the tool is never the bottleneck of a ~600 tok/s pair). Medians over ``--repeat`` runs.

Run: ``python bench/bench_loadgen.py [--quick] [--rate 250] [--levels 4,8,16,32,64,128]``.
Bounded: a few requests per level, ``--max-s`` seconds at most in all. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import resource
import socket
import statistics
import sys
import time

import httpx

from console.serving.bench import BenchRunner
from console.serving.bench_model import BenchSettings
from console.serving.client import ApiClient

# ---------------------------------------------------------------- the fast server (own process)

ROLE = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'  # noqa: E501
TOKEN = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}\n\n'  # noqa: E501
LAST = b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":"length"}]}\n\n'  # noqa: E501
DONE = b"data: [DONE]\n\n"


def _chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class FastServer:
    """Streams ``max_tokens`` tokens per request at ``rate`` tok/s per stream; counts like vLLM."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate
        self.generated = 0
        # arrival, first token sent, last token sent, tokens, last response (usage + [DONE]) sent
        self.records: list[tuple[float, float, float, int, float]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                arrival = time.perf_counter()
                method, path, _ = line.decode("latin-1").split(" ", 2)
                length = 0
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                body = await reader.readexactly(length) if length else b""
                if path.startswith("/v1/chat/completions"):
                    await self.stream(writer, json.loads(body), arrival)
                else:
                    await self.plain(writer, path)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def plain(self, writer: asyncio.StreamWriter, path: str) -> None:
        if path.startswith("/metrics"):
            body = ("# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
                    "# TYPE vllm:generation_tokens_total counter\n"
                    f'vllm:generation_tokens_total{{engine="0",model_name="fast"}} {float(self.generated)}\n').encode()
            ctype = b"text/plain; version=0.0.4"
        elif path.startswith("/stats"):
            body, ctype = json.dumps(self.records).encode(), b"application/json"
        elif path.startswith("/v1/models"):
            body, ctype = b'{"object":"list","data":[{"id":"fast"}]}', b"application/json"
        else:
            body, ctype = b"{}", b"application/json"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (ctype, len(body), body))
        await writer.drain()

    async def stream(self, writer: asyncio.StreamWriter, req: dict, arrival: float) -> None:
        n = max(1, int(req.get("max_tokens") or 16))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + _chunked(ROLE))
        first = last = 0.0
        next_at = time.perf_counter()
        for i in range(n):
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(_chunked(LAST if i == n - 1 else TOKEN))
            self.generated += 1
            last = time.perf_counter()
            if i == 0:
                first = last
            await writer.drain()
            next_at += self.interval
        usage = {"id": "c", "object": "chat.completion.chunk", "choices": [],
                 "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n}}
        writer.write(_chunked(b"data: " + json.dumps(usage).encode() + b"\n\n") + _chunked(DONE) + b"0\r\n\r\n")
        await writer.drain()
        self.records.append((arrival, first, last, n, time.perf_counter()))


def _serve(sock: socket.socket, rate: float) -> None:
    async def main() -> None:
        server = FastServer(rate)
        srv = await asyncio.start_server(server.handle, sock=sock, backlog=1024)
        async with srv:
            await srv.serve_forever()

    asyncio.run(main())


# ---------------------------------------------------------------- the measurement


async def _level(url: str, c: int, requests: int, max_tokens: int) -> dict:
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=c + 4, max_keepalive_connections=c + 4))
    async with ApiClient(url, timeout=10, stream_timeout=60, transport=transport) as client:
        settings = BenchSettings((c,), requests_per_level=requests, warmup=c, max_tokens=max_tokens, settle_s=1.0)
        runner = BenchRunner(client, "fast", settings)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        report = await runner.run()
        wall = time.perf_counter() - t0
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    async with httpx.AsyncClient(base_url=url, trust_env=False) as http:
        stats = (await http.get("/stats")).json()  # the server's own record (a bench-only route)
    lv = report.levels[0]
    records = report.records[c]
    t_first = min(r.start for r in records)
    srv = [s for s in stats if s[0] >= t_first]  # warm-up requests all ended before the first measured one
    srv_tokens = sum(s[3] for s in srv)
    srv_span = max(s[4] for s in srv) - min(s[0] for s in srv)  # last response - first request, as AIPerf
    srv_user = statistics.fmean((s[3] - 1) / (s[2] - s[1]) for s in srv if s[3] > 1 and s[2] > s[1])
    cpu = (cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime) / wall
    return {
        "c": c, "tokens_ok": lv.server_tokens == lv.output_tokens == srv_tokens, "errors": lv.errors,
        "server_total": srv_tokens / srv_span, "client_total": lv.total_tok_s,
        "server_user": srv_user, "client_user": lv.per_user_tok_s, "cpu": cpu,
        # CPU seconds this process spent per streamed token (warm-up included: c + requests replies)
        "cpu_us_per_tok": (cpu * wall) / ((c + requests) * max_tokens) * 1e6,
    }


def _dev(a: float, b: float) -> float:
    return abs(a - b) / b * 100.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=250.0, help="tok/s per stream the server paces (ITL 4 ms)")
    ap.add_argument("--levels", default="4,8,16,32,64,128")
    ap.add_argument("--max-tokens", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-s", type=float, default=300.0, help="stop starting levels after this many seconds")
    ap.add_argument("--quick", action="store_true", help="one run, fewer tokens")
    args = ap.parse_args()
    if args.quick:
        args.repeat, args.max_tokens = 1, 200
    levels = [int(x) for x in args.levels.split(",")]

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    proc = mp.get_context("fork").Process(target=_serve, args=(sock, args.rate), daemon=True)
    proc.start()
    print(f"server pid {proc.pid} at {url}, {args.rate:g} tok/s per stream, {args.max_tokens} tokens a request, "
          f"{os.cpu_count()} CPUs; medians of {args.repeat}", file=sys.stderr)
    print(f"{'conc':>5} {'server tok/s':>13} {'client tok/s':>13} {'dev %':>6} {'server/user':>12} "
          f"{'client/user':>12} {'dev %':>6} {'tokens':>7} {'client CPU':>10} {'us CPU/tok':>10}")
    best = 0.0
    cpu_per_tok: list[float] = []
    t_start = time.monotonic()
    try:
        for c in levels:
            if time.monotonic() - t_start > args.max_s:
                print(f"(stopped: over {args.max_s:g} s)", file=sys.stderr)
                break
            runs = [asyncio.run(_level(url, c, 2 * c, args.max_tokens)) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("server_total", "client_total", "server_user", "client_user", "cpu", "cpu_us_per_tok")}
            ok = all(r["tokens_ok"] and not r["errors"] for r in runs)
            d_total = _dev(med["client_total"], med["server_total"])
            d_user = _dev(med["client_user"], med["server_user"])
            print(f"{c:>5} {med['server_total']:>13,.0f} {med['client_total']:>13,.0f} {d_total:>6.2f} "
                  f"{med['server_user']:>12,.1f} {med['client_user']:>12,.1f} {d_user:>6.2f} "
                  f"{'equal' if ok else 'DIFFER':>7} {med['cpu'] * 100:>9.0f}% {med['cpu_us_per_tok']:>10.1f}", flush=True)
            cpu_per_tok.append(med["cpu_us_per_tok"])
            if ok and d_total <= 2.0 and d_user <= 2.0:
                best = max(best, med["server_total"])
    finally:
        proc.terminate()
        proc.join(5)
    print(f"highest streamed tok/s with client figures within 2% of the server's: {best:,.0f} "
          f"(target >= 5,000)")
    if cpu_per_tok:
        us = statistics.median(cpu_per_tok)
        print(f"client CPU per streamed token: {us:.1f} us (median over levels) -> one core's ceiling "
              f"~{1e6 / us:,.0f} tok/s; load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
              f"(a busy machine starves the client and lowers the first figure)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
