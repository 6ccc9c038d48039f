"""Hang evidence capture time on the simulated stations: N stations, ``--fault desync`` (the
flight recorder's environment in the launch), ``evidence.capture`` with the 3-s interval between the
two RAS / counter / GPU reads, three captures per station count.

    python bench/hang_capture.py [--interval 3] [--runs 3] 2 4 8

Prints every capture's seconds and the median, the CPU seconds it cost (this process and the shims it
started), and the verdict. The simulator's commands are forked by its shim server (a small wrapper
process each, ``console/sim/shim_server.py``); a real station answers its tools faster.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import tomli_w

from console.config import parse_config
from console.doctor.evidence import capture
from console.sim.engine import start_container
from console.sim.launch import launch_args
from console.sim.server import SimServer
from console.sim.world import World

FR = ["-e", "TORCH_NCCL_TRACE_BUFFER_SIZE=2000", "-e", "TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/fr_pipe_"]


async def one(n: int, interval: float, runs: int = 3) -> None:
    d = Path(tempfile.mkdtemp())
    w = World.create(d / "w", "glm53-nvfp4-2x-gb300-vllm", n, ["desync"], 0.2)
    srv = SimServer(w)
    await srv.start()
    try:
        p = d / "c.toml"
        p.write_text(tomli_w.dumps(srv.config_dict()))
        cfg = parse_config(p.read_text(), str(p))
        now = time.time() - 95.5  # serving since ~84 s, out of step since ~90 s; the watchdog ~115 s away
        for i, name in enumerate(reversed(w.names[1:])):
            start_container(w, name, at=now + i * 0.1, args=FR + launch_args(w, name))
        start_container(w, w.names[0], at=now + 0.3, args=FR + launch_args(w, w.names[0]))
        took, cpu, own, verdict = [], [], [], ""
        for _ in range(runs):
            c0, o0 = _cpu(), _cpu(children=False)
            ev = await capture(cfg, interval_s=interval)
            await asyncio.sleep(0.5)  # the last shims reaped: their CPU is counted
            cpu.append(_cpu() - c0)
            own.append(_cpu(children=False) - o0)
            took.append(ev.capture_s)
            verdict = ev.verdict
        print(f"{n} stations: {', '.join(f'{x:.1f}' for x in took)} s, median {statistics.median(took):.1f} s "
              f"(interval {interval:g} s); CPU {', '.join(f'{x:.1f}' for x in cpu)} s, median "
              f"{statistics.median(cpu):.1f} s (this process and the shims; this process alone "
              f"{statistics.median(own):.1f} s); verdict: {verdict[:120]}")
    finally:
        await srv.stop()


def _cpu(children: bool = True) -> float:
    """CPU seconds of this process and (``children``) its reaped children, the simulator's shims: the
    capture's cost, which a loaded machine moves far less than its wall time."""
    t = os.times()
    return t.user + t.system + ((t.children_user + t.children_system) if children else 0.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stations", nargs="*", type=int, default=[2, 8])
    ap.add_argument("--interval", type=float, default=3.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average, {os.cpu_count()} CPUs)")
    for n in a.stations:
        asyncio.run(one(n, a.interval, a.runs))


if __name__ == "__main__":
    main()
