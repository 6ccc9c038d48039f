"""Start-up and memory of the dashboard.

1. Seconds from starting the demo (simulator process + app) to the first frame on which both
   stations show GPU numbers, median over ``--runs`` (imports included: measured in a fresh
   interpreter per run).
2. RSS of the app process after 1,000,000 log lines went through the log panes (500,000 per
   station, batched as the station services batch them), against the RSS before.

    python bench/startup_rss.py [--runs 3] [--lines 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

STARTUP = r"""
import time
t0 = time.perf_counter()
import argparse, asyncio, tempfile
from pathlib import Path
from console.commands.demo import import_tui, start_sim_process, stop_sim_process
from console.config import load_config

async def main():
    ns = argparse.Namespace(stations=2, profile="glm53-nvfp4-2x-gb300-vllm", time_scale=0.1, fault=[], api_key=None)
    proc, cfg = start_sim_process(ns, Path(tempfile.mkdtemp()), while_starting=import_tui)  # as the demo does
    from console.ui.app import ConsoleApp
    try:
        app = ConsoleApp(load_config(str(cfg)))
        async with app.run_test(size=(200, 50)) as pilot:
            while not all(p.meters and p.meters[-1].used_mib is not None for p in app.panes.values()):
                await pilot.pause(0.02)
            print(time.perf_counter() - t0)
    finally:
        stop_sim_process(proc)
asyncio.run(main())
"""

RSS = r"""
import asyncio, sys, psutil
from console.config import parse_config
from console.station.messages import LogBatch
from console.ui.app import ConsoleApp
N = int(sys.argv[1])
cfg = parse_config('[[stations]]\nname="A"\nhost="a"\nrank=0\n[[stations]]\nname="B"\nhost="b"\nrank=1\n', "x.toml")
LINE = "(Worker_TP1 pid=412) INFO 11-30 14:05:31 [gpu_model_runner.py:2602] Engine 000: Avg generation throughput: 385.9 tokens/s #"

async def main():
    app = ConsoleApp(cfg, start_services=False, clock=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause(0.3)
        before = psutil.Process().memory_info().rss
        sent = 0
        while sent < N:
            for name in ("A", "B"):
                app.post_message(LogBatch(name, [f"{LINE}{sent + i}" for i in range(2500)]))
            sent += 5000
            await pilot.pause(0.01)
        await pilot.pause(0.5)
        after = psutil.Process().memory_info().rss
        kept = sum(len(p.log_pane.lines) for p in app.panes.values())
        total = sum(p.log_pane.total for p in app.panes.values())
        print(before / 2**20, after / 2**20, kept, total)
asyncio.run(main())
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--lines", type=int, default=1_000_000)
    args = ap.parse_args()
    times = [float(subprocess.run([sys.executable, "-c", STARTUP], capture_output=True, text=True, check=True)
                   .stdout.strip().splitlines()[-1]) for _ in range(args.runs)]
    print(f"start-up to first frame with both stations' GPU numbers: median {statistics.median(times):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in times)})")
    out = subprocess.run([sys.executable, "-c", RSS, str(args.lines)], capture_output=True, text=True, check=True)
    before, after, kept, total = out.stdout.split()
    print(f"RSS before logs {float(before):.0f} MiB, after {int(total):,} lines {float(after):.0f} MiB "
          f"({int(kept):,} lines kept in the panes, bounded by ui.log_lines)")


if __name__ == "__main__":
    main()
