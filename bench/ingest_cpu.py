"""CPU per log line on a station's intake, outside the UI: ``LogStream.ingest`` then a flush every
2,500 lines (the secret masking, the catalogue's classification, the monitor's tracker). Process CPU
time, best of 3: less moved by a shared machine's load than wall-clock lags. Another tree: run it with
that tree first on the path (``PYTHONPATH=/path/to/tree python3 bench/ingest_cpu.py``), interleaved.

    python bench/ingest_cpu.py [--lines 50000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from console.config import parse_config
from console.station.monitor import StationService

sys.path.insert(0, str(Path(__file__).resolve().parent))
import log_ingest  # noqa: E402  (the same config and line as the app bench)

STAMP = "2026-12-05T15:00:00.123456789Z "


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=50_000)
    args = ap.parse_args()
    cfg = parse_config(log_ingest.CONFIG, "bench.toml")
    posted: list = []
    svc = StationService(cfg, cfg.stations[0], posted.append)
    for pre in ("", STAMP):
        best = float("inf")
        for _ in range(3):
            lines = [f"{pre}{log_ingest.LINE} #{k}" for k in range(args.lines)]
            t0 = time.process_time()
            for i, line in enumerate(lines):
                svc.logs.ingest(line)
                if i % 2500 == 2499:
                    svc.logs.flush()
            svc.logs.flush()
            best = min(best, time.process_time() - t0)
            posted.clear()
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"{'stamped' if pre else 'plain':8} lines: {best / args.lines * 1e6:.2f} us CPU a line  (load {load})")


if __name__ == "__main__":
    main()
