"""Log ingestion through the real app, headless: two stations offering lines at a fixed rate.

Batched path (what the console does): lines go through ``StationService._ingest`` and are posted
as one ``LogBatch`` per ~50 ms per station. Baseline measured in the same run: one message per
line. Reports delivered lines/s (lines that reached the Log widgets) and the p99 lag of a 10 ms
UI timer, median over ``--runs``, after ``--warmup`` seconds of load (the Log filling up to its
max_lines re-lays out the screen on every write; that transient is not the steady state).

    python bench/log_ingest.py [--seconds 4] [--runs 3] [--rates 10000,50000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from console.config import parse_config
from console.messages import LogBatch
from console.monitor import StationService
from console.ui.app import ConsoleApp

CONFIG = """
profile = "glm53-nvfp4-2x-gb300-vllm"
[[stations]]
name = "A"
host = "127.0.0.1"
rank = 0
[[stations]]
name = "B"
host = "127.0.0.1"
rank = 1
"""
LINE = ("(Worker_TP1 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] Engine 000: Avg prompt "
        "throughput: 0.0 tokens/s, Avg generation throughput: 385.9 tokens/s, Running: 16 reqs")


async def one_run(rate: int, seconds: float, mode: str, warmup: float = 1.0) -> tuple[float, float]:
    cfg = parse_config(CONFIG, "bench.toml")
    app = ConsoleApp(cfg, start_services=False, clock=False)
    lags: list[float] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.2)
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            lags.append(max(0.0, now - last[0] - 0.01))
            last[0] = now

        app.set_interval(0.01, tick)
        services = {s.name: StationService(cfg, s, app.post_message) for s in cfg.stations}
        stop = asyncio.Event()

        async def producer(name: str) -> None:
            svc = services[name]
            start = time.perf_counter()
            sent = 0
            while not stop.is_set():
                due = int((time.perf_counter() - start) * rate)
                n = due - sent
                if mode == "batched":
                    for i in range(n):
                        svc._ingest(f"{LINE} #{sent + i}")
                else:
                    for i in range(n):
                        app.post_message(LogBatch(name, [f"{LINE} #{sent + i}"]))
                sent = due
                await asyncio.sleep(0.005)

        async def flusher(name: str) -> None:
            while not stop.is_set():
                await asyncio.sleep(0.05)
                services[name].flush_logs()

        tasks = [asyncio.create_task(producer(n)) for n in services]
        if mode == "batched":
            tasks += [asyncio.create_task(flusher(n)) for n in services]
        # Warm-up (not measured): the first frames' layout and the Log filling up to max_lines, where
        # every write changes its virtual height and Textual re-lays out the screen (40-150 ms each).
        await asyncio.sleep(warmup)
        t0 = time.perf_counter()
        lags.clear()
        delivered0 = sum(p.log_pane.total for p in app.panes.values())
        await asyncio.sleep(seconds)
        delivered = sum(p.log_pane.total for p in app.panes.values()) - delivered0
        elapsed = time.perf_counter() - t0
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        p99 = statistics.quantiles(lags, n=100)[98] if len(lags) > 10 else float("inf")
        app.exit()
    return delivered / elapsed, p99


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring (steady state)")
    ap.add_argument("--rates", default="10000,50000")
    ap.add_argument("--naive-seconds", type=float, default=1.0,
                    help="shorter: the baseline floods the message queue, which must drain before exit")
    ap.add_argument("--naive-runs", type=int, default=1)
    args = ap.parse_args()
    print(f"{'mode':8} {'offered/stn':>11} {'delivered lines/s':>18} {'UI timer p99 lag':>17}  (median of {args.runs}; naive {args.naive_runs})")
    for rate in [int(r) for r in args.rates.split(",")]:
        for mode in ("batched", "naive"):
            secs = args.seconds if mode == "batched" else args.naive_seconds
            runs = args.runs if mode == "batched" else args.naive_runs
            res = [await one_run(rate, secs, mode, args.warmup if mode == "batched" else 0.0) for _ in range(runs)]
            rates = statistics.median(r for r, _ in res)
            lag = statistics.median(p for _, p in res)
            print(f"{mode:8} {rate:>11,} {rates:>18,.0f} {lag * 1000:>14.1f} ms", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
