"""``dgx-console watch [--json] [--logs] [--seconds N] [--interval S]``: the live view, headless.

Built on the TUI's own per-station services (``StationService`` over the session registry): the
same messages the panes render are folded into one ``StationView`` per station and printed every
interval, so what ``watch`` says is what the screen says. ``--json`` prints NDJSON, one object per
station per interval::

    {"t": 1796047812.5, "station": "B", "state": "live", "sample_age_s": 0.4, "gpus": [...],
     "container": {...}, "engine": {"phase": "ready", ...}, "error": null}

and with ``--logs`` every container log line in order as ``{"t": ..., "station": "B", "log": "..."}``.
``--seconds N`` ends after N s (default: until Ctrl+C); either way the exit status is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from typing import Any, TextIO

from console.commands.args import add_config_args, check_seconds
from console.commands.status import add_replace_host_key
from console.config import Config, load_config
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import GpuReading
from console.remote.host_keys import HostKeyChoice, trust_stations
from console.remote.session import SessionRegistry
from console.sanitize import clean, clip, one_line
from console.station.messages import (
    ConnectionState,
    ConnState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
    LogMarker,
)
from console.station.monitor import StationService
from console.station.status import gpu_dict
from console.vocabulary import NOT_LIVE_STATES, TRANSPORT_TEXT


class StationView:
    """One station as its service's messages describe it now (what a pane shows)."""

    def __init__(self, name: str, container: str):
        self.name, self.container_name = name, container
        self.state: ConnState = "connecting"
        self.detail = ""
        self.gpus: list[GpuReading] = []
        self.gpu_error: str | None = None
        self.gpu_at: float | None = None
        self.host_mem: HostMemory | None = None
        self.container: ContainerInfo | None = None
        self.engine: EngineProgress | None = None

    def apply(self, msg: object) -> None:
        if isinstance(msg, ConnectionState):
            self.state, self.detail = msg.state, msg.detail
        elif isinstance(msg, GpuSample):
            self.gpu_error = msg.error
            if msg.gpus or msg.error is None:
                self.gpus = msg.gpus
            self.gpu_at = msg.at
        elif isinstance(msg, HostMemSample):
            self.host_mem = msg.memory
        elif isinstance(msg, ContainerUpdate):
            self.container = msg.info
        elif isinstance(msg, EngineUpdate):
            self.engine = msg.progress

    def sample_age(self, now: float) -> float | None:
        return None if self.gpu_at is None else max(0.0, now - self.gpu_at)

    def to_json(self, now: float) -> dict[str, Any]:
        age = self.sample_age(now)
        c = self.container
        e = self.engine
        return {
            "t": round(now, 3),
            "station": self.name,
            "state": self.state,
            "sample_age_s": None if age is None else round(age, 3),
            "gpus": [gpu_dict(g) for g in self.gpus],
            "container": {"name": self.container_name, "state": c.state if c else None,
                          "exit_code": c.exit_code if c else None, "started_at": c.started_at if c else None},
            "engine": {"phase": e.phase if e else None, "load_pct": e.load_pct if e else None,
                       "transport": e.transport if e else None, "fatal": e.fatal if e else None},
            "error": self.detail if self.state in NOT_LIVE_STATES else self.gpu_error,
        }

    def line(self, now: float) -> str:
        age = self.sample_age(now)
        parts = [f"{self.name:<4} {self.state:<16}", f"age {age:5.1f} s" if age is not None else "age     -"]
        for g in self.gpus:
            if not g.name:
                parts.append(f"GPU{g.index} NO READING")
                continue
            mem = ("n/a" if g.memory_used_mib is None else f"{g.memory_used_mib / 1024:.1f}") + "/" + (
                "n/a" if g.memory_total_mib is None else f"{g.memory_total_mib / 1024:.1f}")
            util = "?" if g.util_pct is None else f"{g.util_pct}%"
            parts.append(f"GPU{g.index} {mem} GiB {util}" + (" ERR" if g.error else ""))
        if self.container:
            parts.append(f"container {self.container.state}")
        if self.engine:
            parts.append(f"engine {self.engine.label}  NCCL {TRANSPORT_TEXT.get(self.engine.transport, self.engine.transport)}")
        text = "  ".join(parts)
        if self.state in NOT_LIVE_STATES and self.detail:
            text += f"  ({one_line(self.detail, 160)})"
        elif self.gpu_error:
            text += f"  ({one_line(self.gpu_error, 160)})"
        return text


async def watch(config: Config, out: TextIO, *, as_json: bool = False, logs: bool = False,
                seconds: float | None = None, interval: float = 1.0, trust: bool = False,
                replace: str | None = None, stop: asyncio.Event | None = None) -> None:
    """Run the stations' services and print the view every ``interval`` until ``seconds`` or ``stop``."""
    stop = stop or asyncio.Event()
    views = {s.name: StationView(s.name, s.container) for s in config.stations}
    tty = out.isatty() and not as_json and not logs
    drawn = 0

    def emit(text: str) -> None:
        out.write(text + "\n")

    def post(msg: object) -> None:
        name = getattr(msg, "station", None)
        if name not in views:
            return
        views[name].apply(msg)
        if logs and isinstance(msg, LogBatch):
            now = time.time()
            for line in msg.lines:
                if as_json:
                    if not isinstance(line, LogMarker):
                        emit(json.dumps({"t": round(now, 3), "station": name, "log": line}))
                else:
                    emit(f"{name} | {clean(clip(line, 4096))}")
            out.flush()

    sample_ms = max(100, min(config.ui.refresh_ms, int(interval * 1000)))
    async with SessionRegistry(config) as sessions:
        # a refusal is left to the service, which shows the station's state
        await trust_stations(sessions.transports().values(), HostKeyChoice(trust, replace),
                             config.connect_timeout_s + 2)
        services = [StationService(config, st, post, sessions.transport(st.name), sample_ms)
                    for st in config.stations]
        for svc in services:
            svc.start()
        start = time.monotonic()
        try:
            while not stop.is_set():
                wait = interval
                if seconds is not None:
                    wait = min(wait, max(0.0, start + seconds - time.monotonic()))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
                now = time.time()
                if as_json:
                    for v in views.values():
                        emit(json.dumps(v.to_json(now)))
                else:
                    if tty and drawn:
                        out.write(f"\x1b[{drawn}F\x1b[J")  # redraw the block in place
                    lines = [v.line(now) for v in views.values()]
                    for ln in lines:
                        emit(ln)
                    drawn = len(lines)
                out.flush()
                if seconds is not None and time.monotonic() - start >= seconds:
                    break
        finally:
            await asyncio.gather(*(s.stop() for s in services), return_exceptions=True)


def run(args: argparse.Namespace) -> int:
    if args.seconds is not None:
        check_seconds("--seconds", args.seconds, limit=366 * 86400.0)
    check_seconds("--interval", args.interval, limit=3600.0)
    config = load_config(args.config)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await watch(config, sys.stdout, as_json=args.json, logs=args.logs, seconds=args.seconds,
                    interval=args.interval, trust=args.trust_host_key, replace=args.replace_host_key, stop=stop)

    with contextlib.suppress(BrokenPipeError):
        asyncio.run(main())
    return 0


def register(sub) -> None:
    p = sub.add_parser("watch", help="headless live view: per station state, sample age, GPUs, container, "
                                     "engine (same services as the TUI)")
    add_config_args(p)
    add_replace_host_key(p)
    p.add_argument("--json", action="store_true", help="NDJSON: one object per station per interval")
    p.add_argument("--logs", action="store_true", help="also every container log line, in order")
    p.add_argument("--seconds", type=float, default=None, metavar="N", help="end after N s (default: until Ctrl+C)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="print every S s (default 1)")
    p.set_defaults(func=run)
