"""Bench overhead per request against the simulated API: the wall time of one request through
``BenchRunner`` (ApiClient streaming, the accumulator, the record; SLO goodput and the order-statistic
intervals computed per level) against a bare httpx streaming loop to the same server, interleaved
rounds, C1, short replies at a very high simulated rate (so the server's own time is small).
Prints ms per request for both and the difference. ``python bench/bench_request_overhead.py [N]``."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from dataclasses import dataclass

import httpx
from aiohttp import web

from console.serving.bench import BenchRunner
from console.serving.bench_model import BenchSettings
from console.serving.bench_stats import parse_slo
from console.serving.client import ApiClient
from console.sim.api import FixedBackend, create_app

MAX_TOKENS = 8


@dataclass
class Backend(FixedBackend):
    tokens_per_s: float = 100_000.0


async def bare(url: str, n: int) -> float:
    body = {"model": "glm-5.3", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "max_tokens": MAX_TOKENS, "ignore_eos": True, "stream_options": {"include_usage": True}}
    async with httpx.AsyncClient(timeout=30) as c:
        t0 = time.perf_counter()
        for _ in range(n):
            async with c.stream("POST", url + "/v1/chat/completions", json=body) as r:
                async for _line in r.aiter_lines():
                    pass
        return (time.perf_counter() - t0) / n


async def runner(url: str, n: int) -> float:
    s = BenchSettings((1,), requests_per_level=n, warmup=0, max_tokens=MAX_TOKENS, ignore_eos=True,
                      slo=parse_slo(["ttft:500", "e2el:2000"]), settle_s=0.0)
    async with ApiClient(url, timeout=10, stream_timeout=30) as c:
        r = BenchRunner(c, "glm-5.3", s, prompts=(({"role": "user", "content": "hi"},),))
        t0 = time.perf_counter()
        await r.run()
        return (time.perf_counter() - t0) / n  # includes the level's /metrics reads and summary


async def main(n: int) -> None:
    app = web.AppRunner(create_app(Backend()))
    await app.setup()
    site = web.TCPSite(app, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{app.addresses[0][1]}"
    await bare(url, 20)
    b, r = [], []
    for _ in range(5):
        b.append(await bare(url, n))
        r.append(await runner(url, n))
    await app.cleanup()
    mb, mr = statistics.median(b) * 1000, statistics.median(r) * 1000
    print(f"per request (C1, {MAX_TOKENS} tokens, median of 5 rounds of {n}): bare httpx {mb:.2f} ms, "
          f"BenchRunner {mr:.2f} ms, overhead {mr - mb:+.2f} ms")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
