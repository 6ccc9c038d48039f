"""Per-station monitoring service: owns the station's connection and its long-lived streams.

One asyncio task tree per station. Streams (``nvidia-smi -lms``, a builtin-only meminfo loop,
``docker events``, ``docker logs -f``) replace polling, so watching a station starts a handful
of remote processes in total. Failures become ``ConnectionState`` messages for that station only
and a reconnect with backoff; one dead station never blocks another.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import psutil
from textual.message import Message

from console.config import Config, Station
from console.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuSample,
    HostMemSample,
    LogBatch,
)
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi
from console.probes.engine_log import EngineLogTracker
from console.probes.meminfo import HostMemory, parse_meminfo
from console.remote import commands
from console.remote.transport import HostKeyError, Transport, TransportError, make_transport

LOG_FLUSH_S = 0.05
LOG_BATCH_MAX = 5000
BACKOFF_S = (1, 2, 4, 8, 15, 30)
RECHECK_STOPPED_S = 60.0


class StationService:
    """Streams one station's GPUs, host memory, container state and logs as messages."""

    def __init__(self, config: Config, station: Station, post: Callable[[Message], object],
                 transport: Transport | None = None, gpu_interval_ms: int | None = None):
        self.config = config
        self.station = station
        self.post = post
        self.transport = transport or make_transport(station, config.connect_timeout_s, config.command_timeout_s)
        self.gpu_interval_ms = gpu_interval_ms or config.ui.refresh_ms
        self.unified = config.profile.gpu.unified_memory
        self.tracker = EngineLogTracker(config.profile.engine, head=station.is_head)
        self._task: asyncio.Task | None = None
        self._log_buf: list[str] = []
        self._last_log_ts: str | None = None
        self._container_running = asyncio.Event()
        self._container_state: str | None = None
        self._gpu_count = 1
        self._apps: dict[int, tuple[smi.ComputeApp, float]] = {}
        self._trust = asyncio.Event()
        self.state = "idle"
        self.last_error = ""

    # ------------------------------------------------------------------ control

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=f"station-{self.station.name}")

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None
        await self.transport.close()

    def retry_now(self) -> None:
        """Skip the current backoff wait (after trusting a key, or on the operator's request)."""
        self._trust.set()

    def _set_state(self, state: str, detail: str = "", fingerprint: str | None = None) -> None:
        self.state, self.last_error = state, detail
        self.post(ConnectionState(self.station.name, state, detail, fingerprint))

    # ------------------------------------------------------------------ supervisor

    async def _supervise(self) -> None:
        attempt = 0
        while True:
            self._set_state("connecting", f"{self.station.host}" + (f":{self.station.port}" if self.station.port else ""))
            try:
                await self._initial()
                attempt = 0
                self._set_state("connected")
                await self._run_streams()
                raise TransportError(f"{self.station.name}: streams ended")
            except HostKeyError as exc:
                self._set_state("hostkey", str(exc), exc.fingerprint)
                self._trust.clear()
                await self._trust.wait()
                continue
            except TransportError as exc:
                self._set_state("unreachable", str(exc))
            delay = BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)]
            attempt += 1
            self._trust.clear()
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                await asyncio.wait_for(self._trust.wait(), delay)

    async def _initial(self) -> None:
        """One-shot reads so the first frame has numbers before any stream delivers."""
        res = await self.transport.run(commands.gpu_query())
        if res.ok:
            with contextlib.suppress(ParseError):
                gpus = smi.parse_gpus(res.stdout)
                self._gpu_count = max(1, len(gpus))
                self.post(GpuSample(self.station.name, gpus, time.time()))
        await self._refresh_container()

    async def _refresh_container(self) -> docker_probe.ContainerInfo:
        res = await self.transport.run(commands.docker_inspect(self.station.container))
        try:
            info = docker_probe.parse_inspect(self.station.container, res.stdout, res.exit_status)
        except ParseError as exc:
            info = docker_probe.ContainerInfo(self.station.container, "absent")
            self.last_error = str(exc)
        self._container_state = info.state
        if info.state == "running":
            self._container_running.set()
        else:
            self._container_running.clear()
        self.post(ContainerUpdate(self.station.name, info))
        return info

    async def _run_streams(self) -> None:
        tasks = [
            asyncio.create_task(self._gpu_stream()),
            asyncio.create_task(self._meminfo_stream()),
            asyncio.create_task(self._events_stream()),
            asyncio.create_task(self._log_stream()),
            asyncio.create_task(self._log_flusher()),
            asyncio.create_task(self._apps_stream()),
        ]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t.exception():
                    raise t.exception()  # type: ignore[misc]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------------ streams

    async def _gpu_stream(self) -> None:
        """``nvidia-smi -lms`` prints one line per GPU per interval: a round is complete when every
        GPU seen at connect time has reported, or when an index repeats."""
        batch: dict[int, smi.GpuReading] = {}
        async for line in self.transport.stream(commands.gpu_query(self.gpu_interval_ms)):
            if not line.strip():
                continue
            try:
                (reading,) = smi.parse_gpus(line)
            except (ParseError, ValueError) as exc:
                self.last_error = str(exc)
                continue
            if reading.index in batch:
                self._post_gpus(batch)
                batch = {}
            batch[reading.index] = reading
            if len(batch) >= self._gpu_count:
                self._post_gpus(batch)
                batch = {}
        raise TransportError(f"{self.station.name}: nvidia-smi stream ended")

    def _post_gpus(self, batch: dict[int, smi.GpuReading]) -> None:
        self.post(GpuSample(self.station.name, [batch[i] for i in sorted(batch)], time.time()))
        # the process list (and GB10's memory, which nvidia-smi reads as [N/A]) come from the
        # compute-apps stream; no line at all means no compute process: forget apps not seen lately
        horizon = time.monotonic() - 2.5 * self.gpu_interval_ms / 1000
        stale = [pid for pid, (_, seen) in self._apps.items() if seen < horizon]
        for pid in stale:
            del self._apps[pid]
        self.post(AppsSample(self.station.name, [a for a, _ in self._apps.values()], time.time()))

    async def _apps_stream(self) -> None:
        async for line in self.transport.stream(commands.compute_apps_query(self.gpu_interval_ms)):
            try:
                apps = smi.parse_compute_apps(line)
            except ParseError:
                continue
            for app in apps:
                self._apps[app.pid] = (app, time.monotonic())
        raise TransportError(f"{self.station.name}: compute-apps stream ended")

    async def _meminfo_stream(self) -> None:
        if self.station.local:  # the console runs on this station: psutil, no process at all
            while True:
                vm = psutil.virtual_memory()
                mem = HostMemory(vm.total // 2**20, vm.available // 2**20, getattr(vm, "cached", 0) // 2**20 or None)
                self.post(HostMemSample(self.station.name, mem, time.time()))
                await asyncio.sleep(2.0)
        block: list[str] = []
        async for line in self.transport.stream(commands.meminfo_stream(2.0)):
            if line.strip() == "@@":
                with contextlib.suppress(ParseError):
                    self.post(HostMemSample(self.station.name, parse_meminfo("\n".join(block)), time.time()))
                block = []
            else:
                block.append(line)
        raise TransportError(f"{self.station.name}: meminfo stream ended")

    async def _events_stream(self) -> None:
        async for line in self.transport.stream(commands.docker_events(self.station.container)):
            if docker_probe.parse_event(line):
                await self._refresh_container()
        raise TransportError(f"{self.station.name}: docker events stream ended")

    def _ingest(self, line: str) -> None:
        """Hot path (every log line): strip the docker timestamp and buffer. Parsing for the
        engine phase happens once per batch in ``flush_logs``."""
        ts, text = docker_probe.split_timestamp(line)
        if ts:
            self._last_log_ts = ts
        self._log_buf.append(text)

    async def _log_stream(self) -> None:
        """Follow the container log; when it ends (container stopped) wait for the next start.

        A container that already exited before we connected still shows its last lines: the
        crash that brought the operator here is usually in them.
        """
        while True:
            if not self._container_running.is_set():
                if self._last_log_ts is None and self._container_state not in (None, "absent"):
                    res = await self.transport.run(
                        commands.docker_logs(self.station.container, tail=self.config.ui.log_lines, follow=False))
                    for line in res.stdout.splitlines():
                        self._ingest(line)
                    self.flush_logs()
                    # The container may have started between the first inspect and the moment the
                    # events stream subscribed: look again before waiting for an event.
                    info = await self._refresh_container()
                    if info.state != "running":
                        if self.tracker.progress.phase not in ("failed", "stopped"):
                            self.tracker.progress.phase = "stopped"
                        self.post(EngineUpdate(self.station.name, _copy(self.tracker.progress)))
                while not self._container_running.is_set():
                    try:  # an event normally wakes us; the slow re-check only bounds a missed one
                        await asyncio.wait_for(self._container_running.wait(), RECHECK_STOPPED_S)
                    except TimeoutError:
                        await self._refresh_container()
            cmd = commands.docker_logs(self.station.container, tail=self.config.ui.log_lines,
                                       since=self._last_log_ts)
            async for line in self.transport.stream(cmd):
                self._ingest(line)
            self.flush_logs()
            # Stream ended: the container stopped or exited. Refresh and wait for the next start.
            info = await self._refresh_container()
            if info.state != "running":
                prog = self.tracker.progress
                if prog.phase != "failed":
                    prog.phase = "stopped"
                self.post(EngineUpdate(self.station.name, _copy(prog)))
                self._container_running.clear()

    async def _log_flusher(self) -> None:
        while True:
            await asyncio.sleep(LOG_FLUSH_S)
            self.flush_logs()

    def flush_logs(self) -> None:
        if self._log_buf:
            buf, self._log_buf = self._log_buf, []
            if self.tracker.feed_batch(buf):
                self.post(EngineUpdate(self.station.name, _copy(self.tracker.progress)))
            for i in range(0, len(buf), LOG_BATCH_MAX):
                self.post(LogBatch(self.station.name, buf[i:i + LOG_BATCH_MAX]))


def _copy(p):
    from dataclasses import replace

    return replace(p, notes=list(p.notes))
