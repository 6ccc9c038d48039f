"""One source going wrong on a simulated station, through the station service.

- hung tool: B's nvidia-smi hangs (no output, hangup ignored) for ``--hang-s`` with one link blip (a
  reconnect) at its start. Printed: nvidia-smi processes on B at the end (the live streams' only) and
  after the console stopped (target 0), seconds B was unreachable/connecting, host-memory samples in the
  last 20 s (the other streams stay up).
- crash between looks: B's container starts and dies (OOM, exit 1) before the next look. Printed per run:
  seconds until the OOM line (by its docker time) and the failed engine reached the watching pane's messages.

    PYTHONPATH=$PWD python3 bench/source_faults_sim.py [--hang-s 60] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tomli_w  # noqa: E402

from console.config import parse_config  # noqa: E402
from console.probes.docker import parse_time  # noqa: E402
from console.sim.engine import start_container  # noqa: E402
from console.sim.server import SimServer  # noqa: E402
from console.sim.world import World  # noqa: E402
from console.station.messages import EngineUpdate, HostMemSample, LogBatch  # noqa: E402
from console.station.monitor import StationService  # noqa: E402
from tests.sim.station_procs import events_watching, set_hang, station_procs  # noqa: E402


async def _world(faults: list[str]) -> tuple[World, SimServer, object]:
    root = Path(tempfile.mkdtemp(prefix="dgx-bench-"))
    world = World.create(root / "w", "glm53-nvfp4-2x-gb300-vllm", 2, faults, 0.005)
    server = SimServer(world)
    await server.start()
    path = root / "c.toml"
    path.write_text(tomli_w.dumps(server.config_dict()))
    return world, server, parse_config(path.read_text(), str(path))


async def hung_tool(hang_s: float) -> str:
    world, server, cfg = await _world([])
    msgs: list = []
    svc = StationService(cfg, cfg.station("B"), msgs.append, gpu_interval_ms=500)
    svc.start()
    try:
        while not any(isinstance(m, HostMemSample) for m in msgs):
            await asyncio.sleep(0.1)
        set_hang(world, "B", True)
        await asyncio.sleep(1)
        t0 = last = time.monotonic()
        svc._drop()  # a link blip: the service reconnects during the hang
        down = 0.0
        while time.monotonic() - t0 < hang_s:
            await asyncio.sleep(0.25)
            now = time.monotonic()
            if svc.state in ("unreachable", "connecting"):
                down += now - last
            last = now
        left = len(station_procs(world, "B"))
        mem = sum(1 for m in msgs if isinstance(m, HostMemSample) and m.at > time.time() - 20)
        state = svc.state
    finally:
        await svc.stop()
    await asyncio.sleep(3)
    after = len(station_procs(world, "B"))
    set_hang(world, "B", False)
    await server.stop()
    return (f"hung nvidia-smi {hang_s:g} s + a reconnect: state {state}; unreachable/connecting {down:.1f} s; "
            f"host-memory samples in the last 20 s {mem}; nvidia-smi on B {left} (live streams), "
            f"{after} after the console stopped")


async def crash_between_looks(limit_s: float = 30.0) -> str:
    world, server, cfg = await _world(["oom@B"])
    msgs: list = []
    svc = StationService(cfg, cfg.station("B"), msgs.append, gpu_interval_ms=500)
    svc.start()
    try:
        while not events_watching(world, "B"):
            await asyncio.sleep(0.2)
        started = time.time() - 3
        start_container(world, "B", at=started)
        t0 = time.monotonic()

        def shown() -> bool:
            oom = any("OutOfMemoryError" in ln and s and (parse_time(s) or 0) >= started
                      for m in msgs if isinstance(m, LogBatch) for ln, s in zip(m.lines, m.stamps, strict=True))
            eng = [m for m in msgs if isinstance(m, EngineUpdate)]
            return oom and bool(eng) and eng[-1].progress.phase == "failed"

        while not shown() and time.monotonic() - t0 < limit_s:
            await asyncio.sleep(0.1)
        return f"{time.monotonic() - t0:.1f} s" if shown() else f"not shown after {limit_s:g} s"
    finally:
        await svc.stop()
        await server.stop()


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hang-s", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(await hung_tool(args.hang_s), flush=True)
    crashes = [await crash_between_looks() for _ in range(args.runs)]
    print(f"crash between two looks: fatal line + failed engine on the watching pane after {', '.join(crashes)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
