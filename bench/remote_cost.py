"""Remote cost of monitoring one simulated station: SSH commands opened, processes started on the
station, bytes it sends, and the station CPU seconds, for the console's streams (and, with
``--naive``, against a naive ``ssh + nvidia-smi`` every second), measured against the same simulated
station (real SSH, real /bin/sh and bash, shim processes).

Processes are counted by sampling the simulated station's processes (the sim server's descendants)
every 20 ms and counting distinct ones: a process that lives under 20 ms can be missed (the bash
loops start none per round; every shim is a Python process that lives far longer). Bytes are what
the station's commands delivered to the console (stdout and stderr, as read). The first 10 s (the
connection and the first one-shot reads) are left out of the per-minute figures. ``held``: the
station processes alive at the end (the long-lived streams' shells and tools); ``station CPU s``:
the CPU time the station's processes used in the window (those still running included).

    python bench/remote_cost.py [--seconds 120] [--naive]

Before/after a change: run this file with ``PYTHONPATH`` at each checkout (the bench only uses the
public ``StationService`` and ``Transport``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import tempfile
import time

import psutil
import tomli_w

from console.config import parse_config
from console.remote import cmdlines
from console.remote.transport import SSHTransport
from console.sim.server import SimServer, start_service
from console.sim.world import World
from console.station.monitor import StationService

WARMUP_S = 10.0


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class Counting:
    """A transport that counts the bytes its commands deliver (the station's output)."""

    def __init__(self, inner) -> None:
        self.inner, self.station, self.bytes = inner, inner.station, 0

    async def run(self, command, timeout=None, input=None):
        res = await self.inner.run(command, timeout=timeout, input=input)
        self.bytes += len((res.stdout or "").encode()) + len((res.stderr or "").encode())
        return res

    async def stream(self, command, *args, **kwargs):
        async for line in self.inner.stream(command, *args, **kwargs):
            self.bytes += len(line.encode()) + 1
            yield line

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _cpu_of(procs) -> dict[tuple[int, float], float]:
    """CPU seconds of live processes (the long-lived ones are never reaped within the window)."""
    out = {}
    for p in procs:
        try:
            t = p.cpu_times()
            out[(p.pid, p.create_time())] = t.user + t.system
        except psutil.Error:
            continue
    return out


class ProcessCounter:
    """Distinct processes under this process (the sim server's stations), sampled every 20 ms."""

    def __init__(self) -> None:
        self.seen: set[tuple[int, float]] = set()
        self.counting = False
        self._me = psutil.Process(os.getpid())

    async def run(self) -> None:
        while True:
            for p in self._me.children(recursive=True):
                try:
                    key = (p.pid, p.create_time())
                except psutil.Error:
                    continue
                if self.counting:
                    self.seen.add(key)
            await asyncio.sleep(0.02)


async def measure(seconds: float, mode: str) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="dgx-cost-")
    world = World.create(root, "glm53-nvfp4-2x-gb300-vllm", 2, [], time_scale=0.05)
    server = SimServer(world)
    await server.start()
    start_service(world, gap_s=0.2)
    cfg = parse_config(tomli_w.dumps(server.config_dict()), None)
    station = cfg.station("A")
    counter = ProcessCounter()
    sampler = asyncio.create_task(counter.run())
    samples = 0
    transport = Counting(SSHTransport(station, connect_timeout=5, command_timeout=10))
    if mode == "console":
        def post(msg) -> None:
            nonlocal samples
            samples += type(msg).__name__ == "GpuSample"

        svc = StationService(cfg, station, post, transport=transport, gpu_interval_ms=1000)
        svc.start()
        await asyncio.sleep(WARMUP_S)
        before = {p for p in counter._me.children(recursive=True)}
        counter.seen = {(p.pid, p.create_time()) for p in before}  # the long-lived ones: not new
        known = set(counter.seen)
        sessions0, bytes0, cpu0, live0 = server.sessions, transport.bytes, children_cpu(), _cpu_of(before)
        counter.counting = True
        await asyncio.sleep(seconds)
        counter.counting = False
        after = {p for p in counter._me.children(recursive=True)}
        live1 = _cpu_of(after)
        held = sum(live1[k] - live0.get(k, 0.0) for k in live1)
        got = {"commands": server.sessions - sessions0, "processes": len(counter.seen - known),
               "bytes": transport.bytes - bytes0, "cpu": children_cpu() - cpu0 + held, "held": len(after)}
        await svc.stop()
    else:
        sessions0, cpu0 = server.sessions, children_cpu()
        counter.counting = True
        nbytes = 0
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            t = SSHTransport(station, connect_timeout=5, command_timeout=10)  # a new ssh each time
            res = await t.run(cmdlines.gpu_query())
            nbytes += len(res.stdout.encode())
            samples += res.ok
            await t.close()
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
        counter.counting = False
        got = {"commands": server.sessions - sessions0, "processes": len(counter.seen), "bytes": nbytes,
               "cpu": children_cpu() - cpu0, "held": 0}
    sampler.cancel()
    await asyncio.sleep(1.0)
    await server.stop()
    await asyncio.sleep(0.5)
    return got | {"samples": samples}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--naive", action="store_true", help="also measure ssh + nvidia-smi every second")
    args = ap.parse_args()
    minutes = args.seconds / 60
    print(f"monitoring station A for {args.seconds:g} s after {WARMUP_S:g} s of start-up (GPU sample every 1 s)")
    print(f"{'mode':28} {'commands/min':>12} {'processes/min':>13} {'held':>5} {'bytes/s':>9} {'station CPU s':>14}")
    modes = [("console", "console (streams)")] + ([("naive", "naive ssh+nvidia-smi / 1 s")] if args.naive else [])
    for mode, label in modes:
        g = await measure(args.seconds, mode)
        print(f"{label:28} {g['commands'] / minutes:>12.1f} {g['processes'] / minutes:>13.1f} {g['held']:>5} "
              f"{g['bytes'] / args.seconds:>9.0f} {g['cpu']:>14.2f}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
