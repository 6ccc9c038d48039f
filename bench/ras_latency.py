"""How long after the ranks go out of step (``desync``) or hang in one collective
(``collective-hang``) the console says so with no request in flight, on the simulated stations at
the demo's default time scale (0.1): ``watch --json``'s first ``out-of-step`` / ``stuck`` and the
dashboard's banner (headless pilot), against the sim's hang time and A's watchdog.

    python bench/ras_latency.py [--runs 2] [--scale 0.1]

The floor is the RAS watch's cadence (one read every RAS_WATCH_EVERY_S: a spread frozen over two
reads is out of step; every rank frozen with busy GPUs needs two intervals), the rest is the read
itself (an ``ssh`` + ``docker exec``), the judge's tick and watch's print interval. The containers
are started back-dated so the engine is ready a few seconds after the console connects.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import tempfile
import time

import tomli_w

from console.commands.watch import watch
from console.config import parse_config
from console.sim.engine import container_status, start_container
from console.sim.server import SimServer
from console.sim.world import World

WANT = {"desync": "out-of-step", "collective-hang": "stuck"}


async def _world(fault: str, scale: float):
    world = World.create(tempfile.mkdtemp(prefix="dgx-ras-"), "glm53-nvfp4-2x-gb300-vllm", 2, [fault], scale)
    server = SimServer(world)
    await server.start()
    return world, server, parse_config(tomli_w.dumps(server.config_dict()))


def _start(world, scale: float) -> None:
    """Workers first, then the head, back-dated so the engine is ready ~8 s from now."""
    back = max(0.0, 420 * scale - 8.0)  # the profile's cold start is ~420 engine seconds
    now = time.time() - back
    for i, name in enumerate(reversed(world.names[1:])):
        start_container(world, name, at=now + i * 0.1)
    start_container(world, world.names[0], at=now + 0.3)


def _times(world) -> tuple[float, float]:
    st = container_status(world, "A", world.state("A"), "glm53")
    t0, tl = float(st["started_at"]), st["timeline"]
    return t0 + next(t for t, n in tl.phases if n == "hung in all-reduce"), t0 + (tl.exit_at or 1e9)


async def watch_once(fault: str, scale: float) -> tuple[float, float]:
    world, server, cfg = await _world(fault, scale)
    out, stop = io.StringIO(), asyncio.Event()
    seen: list[float] = []

    async def check() -> None:
        started = False
        while not stop.is_set():
            await asyncio.sleep(0.05)
            objs = [json.loads(x) for x in out.getvalue().splitlines()]
            if not started and any(o["station"] == "A" and o["state"] == "live" for o in objs):
                _start(world, scale)
                started = True
            hit = [o["t"] for o in objs if o.get("progress") == WANT[fault]]
            if hit:
                seen.append(hit[0])
                stop.set()

    task = asyncio.create_task(check())
    try:
        await watch(cfg, out, as_json=True, seconds=150, interval=0.5, stop=stop)
    finally:
        task.cancel()
        await server.stop()
    hang, dog = _times(world)
    assert seen, f"no {WANT[fault]} verdict"
    return seen[0] - hang, dog - hang


async def banner_once(fault: str, scale: float) -> tuple[float, float]:
    from console.ui.app import ConsoleApp
    from console.ui.widgets.progress_banner import ProgressBanner

    world, server, cfg = await _world(fault, scale)
    app = ConsoleApp(cfg, gpu_interval_ms=1000)
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            while not app.stations["A"].gpus:
                await pilot.pause(0.1)
            _start(world, scale)
            banner = app.dashboard.query_one(ProgressBanner)
            deadline = time.monotonic() + 150
            while not banner.has_class("-alarm") and time.monotonic() < deadline:
                await pilot.pause(0.05)
            shown = time.time()
            assert banner.has_class("-alarm"), "no banner"
            assert banner.verdict is not None and banner.verdict.state == WANT[fault], banner.verdict
    finally:
        await server.stop()
    hang, dog = _times(world)
    return shown - hang, dog - hang


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--scale", type=float, default=0.1)
    args = ap.parse_args()
    # The consoles it runs record and capture the incidents it makes: in a ledger of their own, not the
    # operator's (XDG_STATE_HOME in a temporary directory, as the simulated world is).
    os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="dgx-bench-state-")
    for fault in WANT:
        for name, fn in (("watch --json", watch_once), ("dashboard banner", banner_once)):
            got = [asyncio.run(fn(fault, args.scale)) for _ in range(args.runs)]
            took = [t for t, _dog in got]
            print(f"{fault}: {name} {WANT[fault]}: " + ", ".join(f"{t:.1f}" for t in took) + " s after the hang; "
                  f"median {statistics.median(took):.1f} s (the watchdog fires {got[0][1]:.0f} s after it)")


if __name__ == "__main__":
    main()
