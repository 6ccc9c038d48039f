"""Screenshots of the README's tour, taken from the real app against the simulated stations (the
demo's own world, in-process as the sim tests run it):

- ``dashboard.png``: two GB300 stations once the head is ready, 200x50, GPU processes shown (``p``)
- ``diagnosis.png``: ``--fault oom`` with the diagnosis panel open (``d``), 160x45
- ``fleet.png``: six stations, the fleet view they open on, 160x30
- ``small.png``: the same dashboard at 80x24
- ``wedge.png``: ``--fault wedge`` (W = 5 s here): the banner over the panes, 160x45
- ``hang-evidence.png``: then ``h``: every rank side by side under the verdict, 160x45

    python docs/make_tour_screenshots.py          # writes docs/*.png (needs rsvg-convert: librsvg2-bin)

Textual's SVG keeps runs of spaces only with ``xml:space="preserve"``; it is added before
rsvg-convert draws the PNG.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
import tempfile
import time
from pathlib import Path

import tomli_w
from make_doctor_screenshots import to_png  # same folder: SVG -> xml:space -> PNG

HERE = Path(__file__).parent


async def until(pilot, cond, what: str, limit: float = 180.0) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await pilot.pause(0.1)


async def scenario(tmp: Path, name: str, stations: int, faults: list[str], shots, window_s: float | None = None) -> None:
    from console.config import parse_config
    from console.sim.server import SimServer, start_service
    from console.sim.world import World
    from console.ui.app import ConsoleApp

    world = World.create(tmp / name / "world", "glm53-nvfp4-2x-gb300-vllm", stations, faults, 0.02)
    server = SimServer(world)
    await server.start()
    try:
        path = tmp / name / "demo.toml"
        path.write_text(tomli_w.dumps(server.config_dict()))
        config = parse_config(path.read_text(), str(path))
        if window_s is not None:  # a short progress window: the wedge shows without a 30-s wait
            config = dataclasses.replace(config, ui=dataclasses.replace(config.ui, progress_window_s=window_s))
        start_service(world, gap_s=0.3)
        for size, shot in shots:
            app = ConsoleApp(config, gpu_interval_ms=500)
            async with app.run_test(size=size) as pilot:
                await shot(app, pilot)
    finally:
        await server.stop()


def _ready(app) -> bool:
    panes = app.panes.values()
    return all(p.progress is not None and p.progress.phase == "ready" for p in panes) and all(
        p.state.apps_seen for p in panes)


async def dashboard(app, pilot) -> None:
    from console.ui.widgets.serving_panel import ServingPanel

    panel = app.dashboard.query_one(ServingPanel)
    await until(pilot, lambda: _ready(app) and panel.snapshot is not None and panel.snapshot.status == "ok",
                "the service ready")
    await until(pilot, lambda: all(t.times and len(t.times) >= 20 for p in app.panes.values()
                                   for t in list(p.state.traces.values())[-1:]), "some history")
    app.panes["A"].log_pane.log_widget.focus()
    await pilot.press("p")
    await pilot.pause(1.0)
    app.clear_notifications()
    to_png(app, "dashboard")


async def small(app, pilot) -> None:
    await until(pilot, lambda: _ready(app), "the service ready")
    await pilot.pause(1.0)
    app.clear_notifications()
    to_png(app, "small")


async def diagnosis(app, pilot) -> None:
    await until(pilot, lambda: any(f.id == "cuda-oom" for f in app.diagnoser.ranked()), "the oom finding")
    await pilot.pause(2.0)
    await pilot.press("d")
    await pilot.pause(1.0)
    app.clear_notifications()
    to_png(app, "diagnosis")


async def wedge(app, pilot) -> None:
    from console.ui.widgets.progress_banner import ProgressBanner

    banner = app.dashboard.query_one(ProgressBanner)
    await until(pilot, lambda: banner.has_class("-alarm"), "the wedge banner")
    await pilot.pause(3.0)
    app.clear_notifications()
    to_png(app, "wedge")
    await pilot.press("h")
    await until(pilot, lambda: getattr(app.screen, "evidence", None) is not None, "the hang evidence")
    await pilot.pause(1.0)
    app.clear_notifications()
    to_png(app, "hang-evidence")


async def fleet(app, pilot) -> None:
    await until(pilot, lambda: all(p.state.gpus for p in app.panes.values()) and app.dashboard.view == "fleet", "samples")
    await pilot.pause(1.0)
    to_png(app, "fleet")


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        await scenario(Path(tmp), "pair", 2, [], [((200, 50), dashboard), ((80, 24), small)])
        await scenario(Path(tmp), "oom", 2, ["oom"], [((160, 45), diagnosis)])
        await scenario(Path(tmp), "fleet", 6, [], [((160, 30), fleet)])
        await scenario(Path(tmp), "wedge", 2, ["wedge"], [((160, 45), wedge)], window_s=5.0)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    asyncio.run(main())
