"""Screenshots of the NCCL workbench for the README: the demo's ``--fault nccl-timeout`` rehearsal,
the ladder after a run, the debug relaunch dialog with its diff, and the try side by side.

    python docs/make_doctor_screenshots.py        # writes docs/doctor-*.png (needs rsvg-convert)

Runs the simulated stations in-process (as the sim tests do) and the real screen under Pilot.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tomli_w

HERE = Path(__file__).parent


def to_png(app, name: str) -> None:
    svg = HERE / f"{name}.svg"
    app.save_screenshot(str(svg))
    text = svg.read_text()
    if 'xml:space="preserve"' not in text:  # else rsvg-convert collapses the runs of spaces
        text = re.sub(r"<svg ", '<svg xml:space="preserve" ', text, count=1)
        svg.write_text(text)
    subprocess.run(["rsvg-convert", "-o", str(HERE / f"{name}.png"), str(svg)], check=True)
    svg.unlink()
    print("wrote", HERE / f"{name}.png")


async def until(pilot, cond, limit=120.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        await pilot.pause()
        if cond():
            return
        await asyncio.sleep(0.1)
    raise SystemExit("timed out")


async def main() -> None:
    from textual.app import App

    from console.config import parse_config
    from console.doctor import DoctorOptions
    from console.sim.server import SimServer, start_service
    from console.sim.world import World
    from console.ui.screens.doctor import DebugRelaunchScreen, DoctorScreen

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        world = World.create(Path(tmp) / "world", "glm53-nvfp4-2x-gb300-vllm", 2, ["nccl-timeout"], 0.02)
        server = SimServer(world)
        await server.start()
        path = Path(tmp) / "demo.toml"
        path.write_text(tomli_w.dumps(server.config_dict()))
        config = parse_config(path.read_text(), str(path))
        start_service(world, gap_s=0.3)
        screen = DoctorScreen(config, reason="nccl-timeout on A",
                              options=DoctorOptions(counter_interval_s=2.0, nccl_timeout_s=30))

        class Host(App):
            def on_mount(self) -> None:
                self.push_screen(screen)

        app = Host()
        async with app.run_test(size=(150, 44)) as pilot:
            await until(pilot, lambda: screen._job is not None and screen._job.done())
            key = next(k for k in screen._row_keys if k.startswith("res:env:"))
            screen.query_one("#doc-table").move_cursor(row=screen._row_keys.index(key))
            await pilot.pause()
            to_png(app, "doctor-ladder")
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, DebugRelaunchScreen))
            dialog = app.screen
            await pilot.click("#dr-preview")
            await until(pilot, lambda: not dialog.query_one("#dr-go").disabled)
            to_png(app, "doctor-relaunch-diff")
            await pilot.click("#dr-go")
            await until(pilot, lambda: screen.tries and screen._job.done(), limit=240)
            key = next(k for k in screen._row_keys if k.startswith("res:relaunch:"))
            screen.query_one("#doc-table").move_cursor(row=screen._row_keys.index(key))
            await pilot.pause()
            to_png(app, "doctor-tries")
        await server.stop()


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))
    asyncio.run(main())
