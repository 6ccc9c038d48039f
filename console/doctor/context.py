"""What a doctor run shares between its rungs: the config, one transport per station, one command
runner (``checks.CheckRun``: a timeout per command, each command line run once per pass, an
unreachable station reported once), the facts several rungs read (a station's container, its rails,
its GID table), the options, and a progress callback for the screen."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Config, Station
from console.durations import span
from console.remote.transport import CommandResult, Transport
from console.station.checks import StationDown, ToolMissing
from console.station.checks.context import CheckRun
from console.tasks import cancel_and_wait
from console.vocabulary import CheckStatus

ProgressFn = Callable[[str, str], None]  # (rung id, text)

__all__ = ["DoctorContext", "DoctorOptions", "RelaunchPlan", "StationDown", "ToolMissing"]


class Countdown:
    """A long rung's progress words: "3 of 16: ... (about 2 min left)", the time left from the mean of the
    steps done so far (8 stations are minutes of perftest: the operator sees how far along it is)."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.done, self._clock = total, 0, clock
        self._t0 = clock()

    def step(self, text: str) -> str:
        """The words for the next step (call as it starts)."""
        self.done += 1
        left = ""
        if self.done > 1:
            per = (self._clock() - self._t0) / (self.done - 1)
            left = f" (about {span(per * (self.total - self.done + 1))} left)"
        return f"{self.done} of {self.total}: {text}{left}"

    def skip(self, n: int) -> None:
        """Steps that will not run (no address, no GID): they leave the count, not the estimate."""
        self.total = max(self.done, self.total - n)


@dataclass
class RelaunchPlan:
    """The debug relaunch to try: per station ``{VAR: value}``; None as a value unsets the variable."""

    overrides: dict[str, dict[str, str | None]] = field(default_factory=dict)
    restore: bool = True  # relaunch the normal command afterwards
    prepared: Any = None  # a DebugRelaunch already planned (its diff shown and confirmed)
    number: int = 1  # the try's number in this session


@dataclass
class DoctorOptions:
    nccl_timeout_s: float = 90.0  # nccl-tests with no result by then is a hang (itself a finding)
    counter_interval_s: float = 3.0  # the hang rung reads counters twice, this far apart
    rdma_gpu: bool | None = None  # GPU memory perftest runs (None: where the profile expects GPUDirect)
    rdma_latency: bool = True
    relaunch: RelaunchPlan | None = None  # None: the relaunch rung only says what it would try
    ready_timeout_s: float | None = None  # the debug try's wait for ready (default: the launch's)
    cmd_timeout_s: float | None = None


class DoctorContext:
    def __init__(self, config: Config, transports: dict[str, Transport], options: DoctorOptions | None = None,
                 progress: ProgressFn | None = None, previous: list | None = None):
        self.config = config
        self.profile = config.profile
        self.transports = transports
        self.options = options or DoctorOptions()
        self.cmd = CheckRun(config, transports, self.options.cmd_timeout_s or config.command_timeout_s)
        self._progress = progress
        self._facts: dict[tuple, asyncio.Task] = {}
        self.previous = previous if previous is not None else []  # results of the rungs before this one

    @property
    def stations(self) -> list[Station]:
        return sorted(self.config.stations, key=lambda s: s.rank)

    def pairs(self) -> list[tuple[Station, Station]]:
        """Every unordered station pair, head first."""
        st = self.stations
        return [(a, b) for i, a in enumerate(st) for b in st[i + 1:]]

    def progress(self, rung: str, text: str) -> None:
        if self._progress is not None:
            try:
                self._progress(rung, text)
            except Exception:  # noqa: BLE001 - a display callback never breaks a rung
                pass

    async def run(self, station: str, cmd: str, timeout: float | None = None, tag: str = "") -> CommandResult:
        """``cmd`` on ``station`` (StationDown / ToolMissing as checks raise them)."""
        return await self.cmd.run(station, cmd, timeout=timeout, tag=tag)

    async def per_station(self, rung: str, fn: Callable[[Station], Awaitable[Any]]) -> tuple[dict[str, Any], list]:
        """``fn`` on every station at once: {name: value} of those that answered, and a skip result
        (with the reason) for each station that could not be reached or lacks a tool."""
        from console.doctor.model import RungResult

        got = await asyncio.gather(*(fn(s) for s in self.stations), return_exceptions=True)
        values: dict[str, Any] = {}
        skips = []
        for s, g in zip(self.stations, got, strict=True):
            if isinstance(g, (StationDown, ToolMissing)):
                skips.append(RungResult(rung, s.name, CheckStatus.SKIP, f"{s.name}: {g}"))
            elif isinstance(g, BaseException):
                raise g
            else:
                values[s.name] = g
        return values, skips

    async def fact(self, key: tuple, make: Callable[[], Awaitable[Any]]) -> Any:
        """A fact read once per doctor run (several rungs ask for the same container or GID table)."""
        if key not in self._facts:
            self._facts[key] = asyncio.ensure_future(make())
        return await asyncio.shield(self._facts[key])

    async def close(self) -> None:
        """Cancel and wait for the facts and commands still being read (a fact outlives the rung
        that asked for it: the run owns it)."""
        await cancel_and_wait(list(self._facts.values()))
        await self.cmd.close()
