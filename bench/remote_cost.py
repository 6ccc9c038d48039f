"""Remote cost of monitoring one simulated station: processes started on the station and their
CPU seconds, the console's streams against a naive ``ssh + nvidia-smi`` every second, measured in
the same run against the same simulated station (real SSH, real /bin/sh, shim processes).

    python bench/remote_cost.py [--seconds 300]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time

import tomli_w

from console.config import parse_config
from console.remote import cmdlines
from console.remote.transport import SSHTransport
from console.sim.server import SimServer, start_service
from console.sim.world import World
from console.station.monitor import StationService


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


async def measure(seconds: float, mode: str) -> tuple[int, float, int]:
    root = tempfile.mkdtemp(prefix="dgx-cost-")
    world = World.create(root, "glm53-nvfp4-2x-gb300-vllm", 2, [], time_scale=0.05)
    server = SimServer(world)
    await server.start()
    start_service(world, gap_s=0.2)
    cfg = parse_config(tomli_w.dumps(server.config_dict()), None)
    station = cfg.station("A")
    cpu0, sessions0 = children_cpu(), server.sessions
    samples = 0
    if mode == "console":
        def post(msg) -> None:
            nonlocal samples
            samples += type(msg).__name__ == "GpuSample"

        svc = StationService(cfg, station, post, gpu_interval_ms=1000)
        svc.start()
        await asyncio.sleep(seconds)
        await svc.stop()
    else:
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            t = SSHTransport(station, connect_timeout=5, command_timeout=10)  # a new ssh each time
            res = await t.run(cmdlines.gpu_query())
            samples += res.ok
            await t.close()
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    await asyncio.sleep(1.0)
    await server.stop()
    await asyncio.sleep(0.5)
    return server.sessions - sessions0, children_cpu() - cpu0, samples


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300.0)
    args = ap.parse_args()
    print(f"monitoring station A for {args.seconds:g} s each (GPU sample every 1 s)")
    print(f"{'mode':28} {'remote commands':>15} {'station CPU s':>14} {'GPU samples':>12}")
    for mode, label in (("console", "console (streams)"), ("naive", "naive ssh+nvidia-smi / 1 s")):
        n, cpu, samples = await measure(args.seconds, mode)
        print(f"{label:28} {n:>15} {cpu:>14.2f} {samples:>12}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
