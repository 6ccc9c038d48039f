"""What every part of one action shares: the config, the stations' transports, the timeouts, the step
log, the followers (and where they read the logs), the cancel, and what the run has done so far
(started, stopped, baseline).

The plan, gates, run and verify modules are functions over one ``ActionContext``; the facade
(``console.service.actions``) makes one per action run and closes it after.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.config import Config, Station, masker
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes.engine_log import TimelineEvent
from console.remote import cmdlines as rc
from console.remote.transport import CommandResult, Transport
from console.service import history as launch_history
from console.service.follow import Followers, LogSource
from console.service.steps import ActionFailed, CancelToken, StepLog
from console.station.log_sources import HeadlessLogs

if TYPE_CHECKING:
    from console.service.fit_inputs import FitReport, MemoryReading


@dataclass(frozen=True)
class ScriptInfo:
    """The operator's launch script on one station, as the preview shows it."""

    path: str
    size: int
    sha256: str
    text: str  # sanitized for display

    def first_lines(self, n: int = 12) -> str:
        lines = self.text.splitlines()
        more = f"\n... ({len(lines) - n} more lines)" if len(lines) > n else ""
        return "\n".join(lines[:n]) + more


@dataclass(frozen=True)
class Timeouts:
    ready_s: float  # the head's ready line and its first token (default: 2.5x the profile's cold load)
    start_s: float = 120.0  # a worker's first engine line; a launch script's container
    health_s: float = 60.0  # /health 200 after the ready line
    stop_s: int = 30  # docker stop -t
    verify_s: float = 30.0  # a station coming back clean after the stop


class ActionContext:
    def __init__(self, cfg: Config, transports: dict[str, Transport], timeouts: Timeouts, log: StepLog,
                 api_key: str | None, history: launch_history.LaunchHistory, log_source: LogSource | None = None):
        self.cfg = cfg
        self.transports = transports
        self.timeouts = timeouts
        self.log = log
        self.cancel: CancelToken = log.cancel
        self.api_key = api_key
        self.history = history
        # The logs come from the stations' one LogStream each: the console's monitors (given), else
        # headless streams of our own over these transports (one per followed station, closed with us).
        self._own_logs: HeadlessLogs | None = None
        if log_source is None:
            log_source = self._own_logs = HeadlessLogs(transports, mask=masker(cfg))
        self.follow = Followers(cfg, log_source, log.emit, self.check_cancel, self.container_state)
        self.cancel.on_request(self.follow.changed.set)  # a cancel wakes every wait at once
        self.scripts: dict[str, ScriptInfo] = {}
        self.fit: FitReport | None = None
        self.baseline: dict[str, dict[str, Any]] = {}  # memory before the launch (a later stop checks it)
        self.last_readings: dict[str, MemoryReading] = {}
        self.ready_deadline = float("inf")
        self.started: list[Station] = []  # containers this run started, in start order
        self.stopped: list[str] = []  # stations this run stopped (in stop / restart)
        self.unreached: dict[str, str] = {}

    # ------------------------------------------------------------ order

    @property
    def order_start(self) -> list[Station]:
        """Workers first, the head last: the head waits for every worker and times out without them."""
        return list(self.cfg.workers) + [self.cfg.head]

    @property
    def order_stop(self) -> list[Station]:
        return [self.cfg.head] + list(self.cfg.workers)

    @property
    def scripted(self) -> list[Station]:
        """Stations whose container the operator's launch script starts."""
        return [s for s in self.cfg.stations if self.cfg.launch_script_for(s)]

    @property
    def history_key(self) -> str:
        return launch_history.config_key(self.cfg)

    # ------------------------------------------------------------ stations

    def check_cancel(self) -> None:
        self.cancel.check()

    async def run(self, s: Station, cmd: str, timeout: float | None = None, input: str | None = None
                  ) -> CommandResult:
        return await self.transports[s.name].run(cmd, timeout=timeout, input=input)

    async def run_cmd(self, s: Station, cmd: str) -> CommandResult:
        """``run`` with the default timeout (the shape the fit inputs call)."""
        return await self.run(s, cmd)

    async def container_state(self, s: Station) -> docker_probe.ContainerInfo:
        r = await self.run(s, rc.docker_inspect(s.container))
        try:
            return docker_probe.parse_inspect(s.container, r.stdout + r.stderr, r.exit_status)
        except ParseError as exc:
            raise ActionFailed(f"{s.name}: {exc}") from None

    async def states(self, tolerate: bool = False) -> dict[str, docker_probe.ContainerInfo]:
        """Every station's container; with ``tolerate`` an unreachable station is left out (its
        step failed) instead of failing the whole action before anything is done."""
        async def one(s: Station) -> docker_probe.ContainerInfo:
            async with self.log.step(s.name, "inspect") as st:
                info = await self.container_state(s)
                st.detail = f"{s.container}: {info.state}"
                return info

        infos = await asyncio.gather(*(one(s) for s in self.cfg.stations), return_exceptions=True)
        out = {}
        for s, x in zip(self.cfg.stations, infos, strict=True):
            if isinstance(x, ActionFailed) and tolerate:
                self.unreached[s.name] = x.detail
            elif isinstance(x, BaseException):
                raise x
            else:
                out[s.name] = x
        return out

    # ------------------------------------------------------------ timeline

    def timeline(self) -> dict[str, list[TimelineEvent]]:
        """Per station, in time order: our own events plus the log's (this run only)."""
        out = {}
        for s in self.cfg.stations:
            evs = list(self.log.events.get(s.name, []))
            tr = self.follow.trackers.get(s.name)
            if tr is not None:
                evs += list(tr.progress.timeline)
            if evs:
                out[s.name] = sorted(evs, key=lambda e: e.at)
        return out

    async def close(self, own_transports: bool) -> None:
        await self.follow.close_all()
        self.follow.by_station.clear()
        if self._own_logs is not None:
            await self._own_logs.close()
        if own_transports:
            for t in self.transports.values():
                with contextlib.suppress(Exception):
                    await t.close()


def gather_all(results: list[Any]) -> None:
    """Re-raise the first exception ``asyncio.gather(..., return_exceptions=True)`` collected."""
    for x in results:
        if isinstance(x, BaseException):
            raise x
