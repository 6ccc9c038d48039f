"""Seconds from an incident's opening to its bundle on disk (the auto-capture) on the simulated pair
with the wedge fault, through headless ``watch`` (W = 5 s). ``python3 bench/incident_capture.py [RUNS]``"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import tomli_w

from console.commands.watch import watch
from console.config import parse_config
from console.sim.server import SimServer, start_service
from console.sim.world import World


async def once(root: Path) -> tuple[float, int]:
    os.environ["XDG_STATE_HOME"] = str(root / "state")
    world = World.create(root / "world", "glm53-nvfp4-2x-gb300-vllm", 2, ["wedge"], 0.005)
    server = SimServer(world)
    await server.start()
    try:
        path = root / "sim.toml"
        path.write_text(tomli_w.dumps(server.config_dict()))
        cfg = parse_config(path.read_text(), str(path))
        cfg = dataclasses.replace(cfg, ui=dataclasses.replace(cfg.ui, progress_window_s=5.0))
        out, stop = io.StringIO(), asyncio.Event()

        async def check():
            started = False
            while True:
                await asyncio.sleep(0.25)
                objs = [json.loads(x) for x in out.getvalue().splitlines()]
                if not started and any(o.get("gpus") for o in objs):
                    start_service(world, gap_s=0.2)
                    started = True
                for o in objs:
                    for n in o.get("incidents", ()):
                        if n["event"] == "captured":
                            stop.set()
                            return n["seconds"], os.path.getsize(n["bundle"])

        task = asyncio.create_task(check())
        await watch(cfg, out, as_json=True, seconds=180, interval=0.5, stop=stop)
        return await asyncio.wait_for(task, 1)
    finally:
        await server.stop()


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    got = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            got.append(asyncio.run(once(Path(d))))
    secs = sorted(s for s, _ in got)
    print(f"auto-capture of the simulated pair: median {statistics.median(secs):.1f} s ({secs[0]:.1f}..{secs[-1]:.1f}), "
          f"bundle {statistics.median(b for _, b in got) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
