"""A log backlog through the real app, headless: what the UI's timer waits when the loop was held up.

Under a flood, anything that holds the event loop for a moment (a busy shared machine, a long frame)
leaves the lines read meanwhile in the stations' buffers; the next periodic flush then masks,
classifies and draws all of them. Here ``--lines`` lines per station are buffered at once (a second of
a 100k lines/s/station flood by default), then the stations' own ``flush_every`` runs while a 10 ms UI
timer measures its lag until every line reached the log panes. Interleaved in one process: the flush
as it is (``LOG_SLICE`` lines at a time, the loop free between slices) and the whole buffer at once
(``LOG_SLICE`` set past the backlog: what the flush did before). Process CPU per line alongside.

    python bench/log_backlog.py [--lines 100000] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from console.config import parse_config
from console.station import logstream
from console.station.monitor import StationService
from console.ui.app import ConsoleApp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import log_ingest  # noqa: E402  (the same config and line as the ingest bench)


async def one(lines: int, slice_lines: int) -> tuple[float, float, float]:
    """(max lag, p99 lag, CPU us a line) of one backlog of ``lines`` per station."""
    logstream.LOG_SLICE = slice_lines
    cfg = parse_config(log_ingest.CONFIG, "bench.toml")
    app = ConsoleApp(cfg, start_services=False, clock=False)
    lags: list[float] = []
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.3)
        services = [StationService(cfg, s, app.post_message) for s in cfg.stations]
        for svc in services:  # the pane's buffer full first: the steady state, not its filling up
            for k in range(cfg.ui.log_lines):
                svc.logs.ingest(f"{log_ingest.LINE} #{k}")
            svc.logs.flush()
        await pilot.pause(0.5)
        base = sum(p.log_pane.total for p in app.panes.values())
        for svc in services:
            for k in range(lines):
                svc.logs.ingest(f"{log_ingest.LINE} #{k}")
        last = [time.perf_counter()]

        def tick() -> None:
            now = time.perf_counter()
            lags.append(max(0.0, now - last[0] - 0.01))
            last[0] = now

        app.set_interval(0.01, tick)
        c0 = time.process_time()
        flushers = [asyncio.create_task(svc.logs.flush_every()) for svc in services]
        while sum(p.log_pane.total for p in app.panes.values()) - base < lines * len(services):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        cpu = time.process_time() - c0
        for f in flushers:
            f.cancel()
        app.exit()
    p99 = statistics.quantiles(lags, n=100)[98] if len(lags) > 10 else max(lags, default=0.0)
    return max(lags, default=0.0), p99, cpu / (lines * len(services)) * 1e6


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=100_000, help="lines buffered per station")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sliced = logstream.LOG_SLICE
    cases = {f"slices of {sliced:,}": sliced, "whole buffer": 10 * args.lines}
    res: dict[str, list] = {k: [] for k in cases}
    with open("/proc/loadavg") as f:
        print(f"load {' '.join(f.read().split()[:3])}; {args.lines:,} lines buffered per station (2 stations)")
    for i in range(args.runs):
        for name in (list(cases) if i % 2 == 0 else list(reversed(cases))):
            res[name].append(await one(args.lines, cases[name]))
            worst, p99, cpu = res[name][-1]
            print(f"  {name:>18} #{i + 1}: UI timer max lag {worst * 1000:7.1f} ms, p99 {p99 * 1000:6.1f} ms, "
                  f"{cpu:.2f} us CPU/line", flush=True)
    for name, rs in res.items():
        print(f"  {name:>18}: median max lag {statistics.median(r[0] for r in rs) * 1000:.1f} ms, "
              f"p99 {statistics.median(r[1] for r in rs) * 1000:.1f} ms, {statistics.median(r[2] for r in rs):.2f} us CPU/line")
    with open("/proc/loadavg") as f:
        print(f"load {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    asyncio.run(main())
