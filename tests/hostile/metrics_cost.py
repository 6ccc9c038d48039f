"""What a large ``/metrics`` costs the console: the serving monitor polls a
hostile server whose ``/metrics`` is ``--mb`` MB (every line one of the series the console reads:
the worst case) for ``--seconds``, as the dashboard does (every 2 s); prints the CPU it took (% of
one core), the RSS it added at its peak, and how often ``/metrics`` was actually read.

    PYTHONPATH=$PWD python3 tests/hostile/metrics_cost.py [--mb 7.8] [--seconds 30]

Not a test: a measurement the report quotes. The server runs in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def measure(url: str, seconds: float) -> dict:
    from console.serving.client import ApiClient
    from console.serving.metrics import ServingMonitor

    snaps = []
    async with ApiClient(url, timeout=5.0) as client:
        mon = ServingMonitor(client, snaps.append, interval_s=2.0)
        await mon.poll_once()  # warm: imports, first connection
        rss0, cpu0, t0 = rss_mb(), time.process_time(), time.monotonic()
        peak = rss0
        task = asyncio.create_task(mon.run())
        while time.monotonic() - t0 < seconds:
            await asyncio.sleep(0.25)
            peak = max(peak, rss_mb())
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    reads = len({s.updated_at for s in snaps if s.updated_at is not None})
    last = snaps[-1] if snaps else None
    return {"cpu_pct": round(100 * cpu / wall, 1), "rss_start_mb": round(rss0), "rss_added_peak_mb": round(peak - rss0),
            "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "polls": len(snaps),
            "metrics_reads": reads, "error": last.error if last else None,
            "every_s": getattr(last, "metrics_every_s", None)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=7.8)
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    srv = subprocess.Popen([sys.executable, str(HERE / "attack_figures.py"), "serve",
                            json.dumps({"metrics_mb": args.mb})], stdout=subprocess.PIPE, text=True)
    try:
        url = json.loads(srv.stdout.readline())["url"]  # type: ignore[union-attr]
        print(json.dumps({"mb": args.mb, "seconds": args.seconds, **asyncio.run(measure(url, args.seconds))}))
    finally:
        srv.kill()
        srv.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
