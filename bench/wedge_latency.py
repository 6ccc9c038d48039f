"""How long after the wedge fault freezes the tokens the console says so, on the simulated
stations: ``watch --json``'s first alarm for A and the dashboard's banner (headless pilot).

    python bench/wedge_latency.py [--runs 3] [--window 30] [--judge first|tokens]

Two judges can name the freeze: the token counter (``wedged``, never before W of frozen tokens) and
the RAS watch (``stuck``: every rank at the same collective count over two reads, busy GPUs; seconds,
whatever W). ``--judge first`` (default) times the first alarm either raises, as the operator sees it;
``--judge tokens`` turns the RAS watch off in this process to time the token judge alone, whose
floor is W and whose rest is the console's own lag: the serving poll (1 s while requests run), the
GPU/judge ticks (1 s) and watch's print interval. Prints each run (with the word shown) and the
median, in seconds from the freeze (the sim's ``wedge_at``). Engine time is scaled by 0.005 (the
freeze comes ~4 s after the start), so a run takes about W + 10 s per measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import json
import os
import statistics
import tempfile
import time

import tomli_w

from console.commands.watch import watch
from console.config import parse_config
from console.sim.engine import container_status
from console.sim.server import SimServer, start_service
from console.sim.world import World

ALARMS = ("wedged", "stuck")  # the two judges' words for the freeze (see the docstring)


async def _world(window: float):
    world = World.create(tempfile.mkdtemp(prefix="dgx-wedge-"), "glm53-nvfp4-2x-gb300-vllm", 2, ["wedge"], 0.005)
    server = SimServer(world)
    await server.start()
    cfg = parse_config(tomli_w.dumps(server.config_dict()))
    cfg = dataclasses.replace(cfg, ui=dataclasses.replace(cfg.ui, progress_window_s=window))
    return world, server, cfg


def _frozen_at(world) -> float | None:
    st = container_status(world, "A", world.state("A"), "glm53")
    return float(st["started_at"]) + st["timeline"].wedge_at if st["state"] == "running" else None


async def watch_once(window: float) -> float:
    world, server, cfg = await _world(window)
    out, stop = io.StringIO(), asyncio.Event()
    seen: list[float] = []

    async def check() -> None:
        started = False
        while not stop.is_set():
            await asyncio.sleep(0.05)
            objs = [json.loads(x) for x in out.getvalue().splitlines()]
            if not started and any(o["station"] == "A" and o["state"] == "live" for o in objs):
                start_service(world, gap_s=0.2)
                started = True
            hit = [(o["t"], o["progress"]) for o in objs if o["station"] == "A" and o.get("progress") in ALARMS]
            if hit:
                seen.append(hit[0])
                stop.set()

    task = asyncio.create_task(check())
    try:
        await watch(cfg, out, as_json=True, seconds=window + 60, interval=0.5, stop=stop)
    finally:
        task.cancel()
        await server.stop()
    frozen = _frozen_at(world)
    assert seen and frozen is not None, "no alarm for the freeze"
    return seen[0][0] - frozen, seen[0][1]


async def banner_once(window: float) -> float:
    from console.ui.app import ConsoleApp
    from console.ui.widgets.progress_banner import ProgressBanner

    world, server, cfg = await _world(window)
    app = ConsoleApp(cfg, gpu_interval_ms=1000)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            while not app.stations["A"].gpus:
                await pilot.pause(0.1)
            start_service(world, gap_s=0.2)
            banner = app.dashboard.query_one(ProgressBanner)
            deadline = time.monotonic() + window + 60
            while not banner.has_class("-alarm") and time.monotonic() < deadline:
                await pilot.pause(0.05)
            shown = time.time()
            assert banner.has_class("-alarm"), "no banner"
            word = banner.content.plain.split()[1].lower()  # "⚠ WEDGED since ..."
    finally:
        await server.stop()
    frozen = _frozen_at(world)
    assert frozen is not None
    return shown - frozen, word


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=float, default=30.0)
    ap.add_argument("--judge", choices=("first", "tokens"), default="first")
    args = ap.parse_args()
    # The consoles it runs record and capture the incidents it makes: in a ledger of their own, not the
    # operator's (XDG_STATE_HOME in a temporary directory, as the simulated world is).
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="dgx-bench-state-")
    if args.judge == "tokens":
        import console.commands.watch as watch_cmd
        import console.ui.app as app_mod

        for mod in (watch_cmd, app_mod):  # no RAS reads: the token counter alone names the freeze
            mod.start_ras_watch = lambda *a, **k: None
    print(f"judge: {args.judge}; W = {args.window:g} s; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, fn in (("watch --json progress", watch_once), ("dashboard banner", banner_once)):
        runs = [asyncio.run(fn(args.window)) for _ in range(args.runs)]
        took = [t for t, _w in runs]
        med = statistics.median(took)
        print(f"{name}: " + ", ".join(f"{t:.1f} ({w})" for t, w in runs) + f" s after the freeze; median "
              f"{med:.1f} s (W + {med - args.window:.1f} s)")


if __name__ == "__main__":
    main()
