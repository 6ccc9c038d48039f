"""Following the containers an action started: their log lines, the markers seen, fatal lines, the
start-up timeline, and the waits that end on them (never a fixed sleep).

Each station's lines come from a ``LogSource``: today ``docker logs -f`` over the station's own
session (``docker_log_source``); the station monitor's log batches can feed the same ``Follower``
by supplying another source (one place to swap). A fatal line on any station, or a container that
exits, ends a wait at once with that line as evidence.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol

from console.config import Config, Station
from console.diagnosis import catalogue
from console.diagnosis.classify import ClassifiedBatch, classify
from console.probes import docker as docker_probe
from console.probes.engine_log import EngineLogTracker
from console.probes.nccl_transport import transport_of_lines, worse
from console.remote import cmdlines as rc
from console.remote.transport import Transport, TransportError
from console.service import engines
from console.service.steps import ActionEvent, ActionFailed, last_line, timeline_text
from console.vocabulary import NcclTransport

# The finding ids that only say "the engine died, root cause above" (the cause is another line, often on
# another station: a worker that died on B makes A print it; it is reported only when no cause shows up
# within CONSEQUENCE_GRACE_S). They come from the diagnosis catalogue, as the fatal lines do.
CONSEQUENCE_IDS = catalogue.CONSEQUENCE_IDS
CONSEQUENCE_GRACE_S = 3.0
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) (.*)$")


class LogSource(Protocol):
    """One station's container log from ``since`` (Unix seconds) on, as raw lines
    (``RFC3339-timestamp text``, docker's ``--timestamps`` form). The iterator ends when the stream
    does and raises ``TransportError`` when it is lost; it is opened again after a dropped stream."""

    def __call__(self, station: Station, since: float) -> AsyncIterator[str]: ...


def docker_log_source(transports: Mapping[str, Transport]) -> LogSource:
    """``docker logs -f --since`` over each station's transport."""
    def open_log(station: Station, since: float) -> AsyncIterator[str]:
        return transports[station.name].stream(rc.docker_logs_since(station.container, f"{since:.6f}"))

    return open_log


def parse_docker_time(value: str) -> float | None:
    """RFC3339 with up to nanoseconds (docker's StartedAt) -> Unix seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", value.strip())
    if not m or m.group(1).startswith("0001"):
        return None
    tz = m.group(3) or "Z"
    base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if tz == "Z" else tz)).timestamp()
    return base + (float("0." + m.group(2)) if m.group(2) else 0.0)


def split_stamp(line: str) -> tuple[str | None, str]:
    m = _STAMP.match(line)
    return (m.group(1), m.group(2)) if m else (None, line)


def most_telling(finding_ids: list[str]) -> int:
    """Index of the fatal finding to report: the first cause, else the first consequence."""
    for i, fid in enumerate(finding_ids):
        if fid not in CONSEQUENCE_IDS:
            return i
    return 0


class Follower:
    """One station's container log: lines, the markers seen, fatal lines, and the start-up timeline
    (the tracker survives a restarted stream). Each line is read through the one classifier
    (``console.diagnosis.classify``): markers, timeline, fatal finding, progress lines."""

    def __init__(self, station: Station, open_lines: Callable[[], AsyncIterator[str]], ready: str, started: str,
                 changed: asyncio.Event, emit: Callable[[ActionEvent], None], tracker: EngineLogTracker):
        self.station, self.open_lines = station, open_lines
        self.ready_marker, self.started_marker = ready, started
        self.lines: list[str] = []
        self.ready = self.started = self.ended = False
        self.fatal: tuple[str, str] | None = None  # (finding id, line)
        self.fatal_fix: str | None = None
        self.fatal_context: list[str] = []
        self.error: str | None = None
        self.restarts = 0
        self.tracker = tracker
        self._changed, self._emit = changed, emit
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for raw in self.open_lines():
                ts, text = split_stamp(raw)
                self.lines.append(text)
                batch = classify([text])
                line = batch.line(0)
                self._timeline(batch, parse_docker_time(ts) if ts else None)
                if line.holds(self.started_marker):
                    self.started = True
                    self._changed.set()
                if self.station.is_head and line.holds(self.ready_marker):
                    self.ready = True
                    self._changed.set()
                if self.fatal is None or self.fatal[0] in CONSEQUENCE_IDS:
                    try:
                        hit = line.fatal
                    except Exception:  # a bug in the catalogue must not break a launch
                        hit = None
                    if hit and (self.fatal is None or hit[0] not in CONSEQUENCE_IDS):
                        self.fatal, self.fatal_fix = (hit[0], text), hit[1]
                        self.fatal_context = self.lines[-5:]
                        self._changed.set()
                if line.progress:
                    self._emit(ActionEvent("log", self.station.name, text))
        except TransportError as exc:
            self.error = str(exc)
        finally:
            self.ended = True
            self._changed.set()

    def _timeline(self, batch: ClassifiedBatch, at: float | None) -> None:
        before = {e.event: e for e in self.tracker.progress.timeline}
        if not self.tracker.feed_classified(batch, at):
            return
        for ev in self.tracker.progress.timeline:
            if before.get(ev.event) != ev:
                self._emit(ActionEvent("timeline", self.station.name, timeline_text(ev), timeline=ev))

    async def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


ContainerState = Callable[[Station], Awaitable[docker_probe.ContainerInfo]]


class Followers:
    """The followers of one run, and the waits on them: ``wait`` returns when its condition holds and
    fails at once on a fatal line (the most telling one across stations) or an exited container."""

    def __init__(self, cfg: Config, source: LogSource, emit: Callable[[ActionEvent], None],
                 check_cancel: Callable[[], None], container_state: ContainerState):
        self.cfg, self.source, self._emit = cfg, source, emit
        self._check_cancel, self._container_state = check_cancel, container_state
        self.by_station: dict[str, Follower] = {}
        self.trackers: dict[str, EngineLogTracker] = {}
        self.changed = asyncio.Event()
        self._consequence_at: float | None = None

    def get(self, name: str) -> Follower | None:
        return self.by_station.get(name)

    def __getitem__(self, name: str) -> Follower:
        return self.by_station[name]

    def reset(self) -> None:
        """A new action: a consequence seen by the last one no longer counts."""
        self._consequence_at = None

    async def start(self, s: Station, started_at: float) -> Follower:
        """Follow the run that started at ``started_at`` (a fresh tracker: this run's timeline only)."""
        old = self.by_station.pop(s.name, None)
        if old:
            await old.close()
        self.trackers[s.name] = tracker = EngineLogTracker(self.cfg.profile.engine, head=s.is_head)
        since = started_at - 0.001
        f = Follower(s, lambda: self.source(s, since), engines.ready_marker(self.cfg),
                     engines.started_marker(self.cfg, s), self.changed, self._emit, tracker)
        self.by_station[s.name] = f
        return f

    def _restart(self, s: Station) -> None:
        """The log stream ended but the container runs (a dropped channel): follow again, a few times."""
        old = self.by_station[s.name]
        if old.restarts >= 3:
            raise ActionFailed(f"the log stream of {s.name} keeps ending: {last_line(chr(10).join(old.lines))}")
        f = Follower(s, old.open_lines, old.ready_marker, old.started_marker,
                     self.changed, lambda ev: None, old.tracker)  # lines already shown are not re-emitted
        f.started, f.ready, f.restarts = old.started, old.ready, old.restarts + 1
        self.by_station[s.name] = f

    async def close_all(self) -> None:
        for f in list(self.by_station.values()):
            await f.close()

    def transport(self) -> NcclTransport:
        """Best effort, from what every station logged so far: the worse transport NCCL chose."""
        seen = [transport_of_lines(f.lines) for f in self.by_station.values()]
        known = [t for t in seen if t != NcclTransport.UNKNOWN]
        return NcclTransport(functools.reduce(worse, known)) if known else NcclTransport.UNKNOWN

    async def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``done()``; a fatal line or an ended log stream on any station fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            self.raise_if_fatal()
            if done():
                return
            for name, f in self.by_station.items():
                if f.ended:
                    await asyncio.sleep(0)
                    if f.fatal:
                        break
                    st = self.cfg.station(name)
                    info = await self._container_state(st)
                    if f.error:
                        raise ActionFailed(f"lost the log stream of {name}: {f.error}")
                    if info.state != "running":
                        raise ActionFailed(f"{name}: the container exited (code {info.exit_code}) while waiting for "
                                           f"{what}", [(name, ln) for ln in f.lines[-5:]])
                    self._restart(st)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ActionFailed(f"timed out after {timeout:g} s waiting for {what}")
                self.changed.clear()
                # asyncio.wait, not wait_for: on 3.11 wait_for can swallow a cancel that races its timeout
                waiter = asyncio.ensure_future(self.changed.wait())
                try:
                    await asyncio.wait({waiter}, timeout=max(0.05, min(left, 5.0, self.grace_left())))
                finally:
                    waiter.cancel()

    def raise_if_fatal(self) -> None:
        """Fail on the most telling fatal line: a cause on any station beats a consequence."""
        self._check_cancel()
        found = [(name, f) for name, f in self.by_station.items() if f.fatal]
        if not found:
            return
        i = most_telling([f.fatal[0] for _, f in found])  # type: ignore[index]
        name, f = found[i]
        if f.fatal[0] in CONSEQUENCE_IDS:  # type: ignore[index]
            if self._consequence_at is None:
                self._consequence_at = time.monotonic()
            if self.grace_left() > 0:
                return
        fid, line = f.fatal  # type: ignore[misc]
        fix = f" (fix: {f.fatal_fix})" if f.fatal_fix else ""
        raise ActionFailed(f"{name}: {fid}: {line.strip()[:300]}{fix}", [(name, ln) for ln in f.fatal_context])

    def grace_left(self) -> float:
        """Seconds a consequence-only failure still waits for its cause (inf when none is pending)."""
        if self._consequence_at is None:
            return float("inf")
        return CONSEQUENCE_GRACE_S - (time.monotonic() - self._consequence_at)
