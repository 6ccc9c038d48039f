"""Log ingestion through the real app, headless: two stations offering lines at a fixed rate.

Batched path (what the console does): lines go through the station's ``LogStream.ingest`` and are posted
as one ``LogBatch`` per ~50 ms per station. Baseline measured in the same run: one message per
line. Reports delivered lines/s (lines that reached the Log widgets) and the p99 lag of a 10 ms
UI timer, median over ``--runs``, after ``--warmup`` seconds of load (the Log filling up to its
max_lines re-lays out the screen on every write; that transient is not the steady state).

Long-line case (``--long-rate``, default 10000 lines/s/station): the same stream with long lines
mixed in every second per station (10 x 1 KB, 2 x 100 KB, 1 x 1 MB: vLLM's argument lists, request
logs with whole prompts), against the same rate without them, measured in the same run: p99 and
max UI timer lag. And the cost of highlighting one line, the old quadratic error pattern vs the
current one (what a render pays per visible line).

    python bench/log_ingest.py [--seconds 4] [--runs 3] [--rates 10000,50000] [--long-rate 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from console.config import parse_config
from console.station.messages import LogBatch
from console.station.monitor import StationService
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


LONG_MIX = ((1_000, 10), (100_000, 2), (1_000_000, 1))  # (length, lines per second per station)


def long_line(length: int, n: int) -> str:
    """A long line that looks like one: an error word, then one long run of word characters."""
    head = f"(APIServer pid=1) INFO 12-01 07:17:09 [logger.py:39] Received request #{n}: prompt: 'RuntimeError"
    return head + "x" * max(0, length - len(head))


async def one_run(rate: int, seconds: float, mode: str, warmup: float = 1.0, long: bool = False
                  ) -> tuple[float, float, float]:
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
                        k = sent + i
                        if long:
                            for length, per_s in LONG_MIX:
                                if k % max(1, rate // per_s) == 0:
                                    svc.logs.ingest(long_line(length, k))
                        svc.logs.ingest(f"{LINE} #{k}")
                else:
                    for i in range(n):
                        app.post_message(LogBatch(name, [f"{LINE} #{sent + i}"]))
                sent = due
                await asyncio.sleep(0.005)

        async def flusher(name: str) -> None:
            while not stop.is_set():
                await asyncio.sleep(0.05)
                services[name].logs.flush()

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
        # Fewer than 11 ticks of a 10 ms timer in the whole window: the producers starved the event loop
        # (the offered rate is past what one core ingests); no percentile means anything then.
        p99 = statistics.quantiles(lags, n=100)[98] if len(lags) > 10 else None
        worst = max(lags, default=None)
        app.exit()
    return delivered / elapsed, p99, worst


def _ms(values) -> str:
    """The median lag in ms, or 'starved' when a run's UI timer hardly ticked (see one_run)."""
    vals = list(values)
    if any(v is None for v in vals):
        return "starved"
    return f"{statistics.median(vals) * 1000:.1f} ms"


def highlight_cost() -> None:
    """One line through the highlighter: the old ``\\w+(Error|Exception)`` vs the current pattern."""
    import re

    from rich.text import Text

    from console.station.log_buffer import DISPLAY_MAX_CHARS, display_line
    from console.ui.widgets.log_view import EngineLogHighlighter

    old = re.compile(r"\w+(Error|Exception)\b:?")
    hl = EngineLogHighlighter()
    print(f"\n{'line length':>12} {'old pattern':>12} {'current (whole line)':>21} {'shown (clipped)':>16}")
    for length in (2_000, 10_000, 20_000, 100_000, 1_000_000):
        line = long_line(length, 0)
        t0 = time.perf_counter()
        if length <= 20_000:  # the old pattern is quadratic: bounded to what finishes in seconds
            list(old.finditer(line))
        t_old = time.perf_counter() - t0 if length <= 20_000 else None
        t0 = time.perf_counter()
        hl.highlight(Text(line))
        t_new = time.perf_counter() - t0
        t0 = time.perf_counter()
        hl.highlight(Text(display_line(line)))
        t_shown = time.perf_counter() - t0
        old_s = f"{t_old * 1000:9.1f} ms" if t_old is not None else "   (minutes)"
        print(f"{length:>12,} {old_s:>12} {t_new * 1000:18.2f} ms {t_shown * 1000:13.2f} ms")
    print(f"(lines are shown clipped to {DISPLAY_MAX_CHARS} characters with a marker before highlighting)")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of load before measuring (steady state)")
    ap.add_argument("--rates", default="10000,50000")
    ap.add_argument("--naive-seconds", type=float, default=1.0,
                    help="shorter: the baseline floods the message queue, which must drain before exit")
    ap.add_argument("--naive-runs", type=int, default=1)
    ap.add_argument("--long-rate", type=int, default=10000, help="lines/s/station for the long-line case (0: skip)")
    args = ap.parse_args()
    print(f"{'mode':8} {'offered/stn':>11} {'delivered lines/s':>18} {'UI timer p99 lag':>17}  (median of {args.runs}; naive {args.naive_runs})")
    for rate in [int(r) for r in args.rates.split(",")]:
        for mode in ("batched", "naive"):
            secs = args.seconds if mode == "batched" else args.naive_seconds
            runs = args.runs if mode == "batched" else args.naive_runs
            if not runs:
                continue
            res = [await one_run(rate, secs, mode, args.warmup if mode == "batched" else 0.0) for _ in range(runs)]
            rates = statistics.median(r for r, _, _ in res)
            print(f"{mode:8} {rate:>11,} {rates:>18,.0f} {_ms(p for _, p, _ in res):>17}", flush=True)
    if args.long_rate:
        mix = ", ".join(f"{n} x {length:,} B" for length, n in LONG_MIX)
        print(f"\nlong lines mixed in per second per station: {mix} (median of {args.runs})")
        print(f"{'case':12} {'offered/stn':>11} {'delivered lines/s':>18} {'p99 lag':>10} {'max lag':>10}")
        for label, long in (("short only", False), ("long mixed", True)):
            res = [await one_run(args.long_rate, args.seconds, "batched", args.warmup, long) for _ in range(args.runs)]
            rates = statistics.median(r for r, _, _ in res)
            print(f"{label:12} {args.long_rate:>11,} {rates:>18,.0f} {_ms(p for _, p, _ in res):>10} "
                  f"{_ms(w for _, _, w in res):>10}", flush=True)
    highlight_cost()


if __name__ == "__main__":
    asyncio.run(main())
