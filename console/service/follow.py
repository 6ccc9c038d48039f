"""Following the containers an action started: their log lines, the markers seen, fatal lines, the
start-up timeline, and the waits that end on them (never a fixed sleep).

Each station's log comes from a ``LogSource``: a subscription to the station's one ``LogStream``
(console/station/logstream.py) — the monitor's in the console, a headless one over the action's
session otherwise — so a launch never opens a second ``docker logs -f``. The follower reads the
stream's batches as they were classified once (markers, timeline, fatal finding, progress lines),
keeps only this run's lines (stamped from the container's start on), and takes each timeline event
at its line's docker time. A fatal line on any station, or a container that exits, ends a wait at
once with that line as evidence; a stream that was cut resumes by itself (``--since``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol

from console import catalogue
from console.catalogue.classify import ClassifiedBatch, LineMarks
from console.config import Config, Station
from console.probes import docker as docker_probe
from console.probes.docker import ContainerInfo, parse_time
from console.probes.engine_log import EngineLogTracker
from console.probes.nccl_transport import TransportTally, worse
from console.service import engines
from console.service.steps import ActionEvent, ActionFailed, timeline_text
from console.station.logstream import LogEnded, LogInterrupted, LogSkipped, LogSubscription
from console.station.messages import LogBatch, LogMarker
from console.vocabulary import NcclTransport

# The finding ids that only say "the engine died, root cause above" (the cause is another line, often on
# another station: a worker that died on B makes A print it; it is reported only when no cause shows up
# within CONSEQUENCE_GRACE_S). They come from the diagnosis catalogue, as the fatal lines do.
CONSEQUENCE_IDS = catalogue.CONSEQUENCE_IDS
CONSEQUENCE_GRACE_S = 3.0
START_SLACK_S = 0.001  # a line stamped this close before StartedAt still belongs to the run
TAIL_LINES = 50  # a follower keeps the run's last lines only (the context of a failure), however long it logs
CONTEXT_LINES = 5


class LogSource(Protocol):
    """One station's container log for the run ``run`` (its inspect, just after the start), from
    ``since`` (Unix seconds) on: a subscription to the station's one ``LogStream``."""

    def __call__(self, station: Station, run: ContainerInfo, since: float) -> LogSubscription: ...


def most_telling(finding_ids: list[str]) -> int:
    """Index of the fatal finding to report: the first cause, else the first consequence."""
    for i, fid in enumerate(finding_ids):
        if fid not in CONSEQUENCE_IDS:
            return i
    return 0


def _stamp_at(stamps: list[str | None], idx: int) -> float | None:
    """The docker time of line ``idx``, where the batch has a readable stamp for it."""
    return parse_time(stamps[idx]) if idx < len(stamps) and stamps[idx] else None


def _fatal_of(marks: LineMarks) -> tuple[str, str] | None:
    """The line's fatal finding (id, fix), or None; a bug in the catalogue must not break a launch."""
    try:
        return marks.fatal
    except Exception:
        return None


class Follower:
    """One station's run: its lines, the markers seen, fatal lines, and the start-up timeline, read
    from the stream's batches (classified once, by the stream): markers, timeline, fatal finding,
    progress lines. Lines stamped before ``since`` (an older run's) are not this run's."""

    def __init__(self, station: Station, log: LogSubscription, since: float, ready: str, started: str,
                 changed: asyncio.Event, emit: Callable[[ActionEvent], None], tracker: EngineLogTracker):
        self.station, self.log, self.since = station, log, since
        self.ready_marker, self.started_marker = ready, started
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)  # the run's last lines
        self.transport = TransportTally()  # what NCCL chose, from the run's transport lines
        self.ready = self.started = self.ended = False
        self.fatal: tuple[str, str] | None = None  # (finding id, line)
        self.fatal_fix: str | None = None
        self.fatal_context: list[str] = []
        self.error: str | None = None  # the stream was cut (it resumes) or closed
        self.skipped = 0  # lines this follower fell behind by (never in practice: see LogSubscription)
        self.tracker = tracker
        self._in_run = False
        self._changed, self._emit = changed, emit
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for item in self.log:
                if isinstance(item, LogBatch):
                    self._take(item)
                elif isinstance(item, LogEnded):
                    started = parse_time(item.info.started_at or "")
                    if started is not None and started >= self.since:  # this run ended (not an older one)
                        self.ended = True
                        self._changed.set()
                elif isinstance(item, LogInterrupted):
                    self.error = item.reason
                    self._changed.set()
                elif isinstance(item, LogSkipped):
                    self.skipped += item.lines or 0
                    self._emit(ActionEvent("note", self.station.name, "fell behind the log: "
                                           + (f"{item.lines} lines" if item.lines else "some lines") + " not read"))
            self.error = self.error or "the log stream closed"
        finally:
            self.ended = True
            self._changed.set()

    def _first_of_run(self, batch: LogBatch) -> int | None:
        """Index of the batch's first line of this run (None: none yet)."""
        for i, ts in enumerate(batch.stamps):
            t = parse_time(ts) if ts else None
            if t is not None and t >= self.since:
                return i
        return None

    def _take(self, batch: LogBatch) -> None:
        """One classified batch, from its first line of this run on: the markers, then each marked
        line in order (the lines and timeline up to it first, so a fatal line's context is the
        run's lines before it), then the rest."""
        cb = batch.classified
        if cb is None:
            return
        start = 0 if self._in_run else self._first_of_run(batch)
        if start is None:
            return
        self._in_run = True
        lines, stamps = batch.lines, batch.stamps
        n = len(lines)
        self._see_markers(cb, start, n)
        done = start
        for idx, marks in cb.marks.items():
            if idx < start:
                continue
            self._keep(lines, done, idx + 1)
            self._timeline(cb, done, idx + 1, _stamp_at(stamps, idx))
            done = idx + 1
            self._take_marked(lines[idx], marks)
        self._keep(lines, done, n)
        self._timeline(cb, done, n, None)

    def _see_markers(self, cb: ClassifiedBatch, start: int, n: int) -> None:
        """The started marker on any station, the ready one on the head only; each is seen once."""
        if not self.started and cb.holds_any((self.started_marker,), start, n):
            self.started = True
            self._changed.set()
        if self.station.is_head and not self.ready and cb.holds_any((self.ready_marker,), start, n):
            self.ready = True
            self._changed.set()

    def _take_marked(self, text: str, marks: LineMarks) -> None:
        """A marked line: a fatal finding (until a cause is held), NCCL's transport, a progress line."""
        if self.fatal is None or self.fatal[0] in CONSEQUENCE_IDS:
            self._take_fatal(text, marks)
        if marks.transport is not None:
            self.transport.add(marks.transport, marks.channel)
        if marks.progress:
            self._emit(ActionEvent("log", self.station.name, text))

    def _take_fatal(self, text: str, marks: LineMarks) -> None:
        """The first fatal line is held; a cause replaces a consequence, never the other way."""
        hit = _fatal_of(marks)
        if hit and (self.fatal is None or hit[0] not in CONSEQUENCE_IDS):
            self.fatal, self.fatal_fix = (hit[0], text), hit[1]
            self.fatal_context = self.tail()
            self._changed.set()

    def _keep(self, lines: list[str], start: int, stop: int) -> None:
        self.lines.extend([ln for ln in lines[start:stop] if not isinstance(ln, LogMarker)][-TAIL_LINES:])

    def tail(self, n: int = CONTEXT_LINES) -> list[str]:
        """The run's last ``n`` lines (a failure's context)."""
        return list(self.lines)[-n:]

    def _timeline(self, batch, start: int, stop: int, at: float | None) -> None:
        if start >= stop:
            return
        before = {e.event: e for e in self.tracker.progress.timeline}
        if not self.tracker.feed_classified(batch, at, start, stop):
            return
        for ev in self.tracker.progress.timeline:
            if before.get(ev.event) != ev:
                self._emit(ActionEvent("timeline", self.station.name, timeline_text(ev), timeline=ev))

    async def close(self) -> None:
        self.log.close()
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

    async def start(self, s: Station, run: ContainerInfo, started_at: float) -> Follower:
        """Follow the run ``run`` that started at ``started_at`` (its StartedAt; a fresh tracker: this
        run's timeline only)."""
        old = self.by_station.pop(s.name, None)
        if old:
            await old.close()
        self.trackers[s.name] = tracker = EngineLogTracker(self.cfg.profile.engine, head=s.is_head)
        since = started_at - START_SLACK_S
        f = Follower(s, self.source(s, run, since), since, engines.ready_marker(self.cfg),
                     engines.started_marker(self.cfg, s), self.changed, self._emit, tracker)
        self.by_station[s.name] = f
        return f

    async def close_all(self) -> None:
        for f in list(self.by_station.values()):
            await f.close()

    def transport(self) -> NcclTransport:
        """Best effort, from what every station logged so far: the worse transport NCCL chose."""
        seen = [f.transport.best for f in self.by_station.values()]
        known = [t for t in seen if t != NcclTransport.UNKNOWN]
        return NcclTransport(functools.reduce(worse, known)) if known else NcclTransport.UNKNOWN

    async def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``done()``; a fatal line or an exited container on any station fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            self.raise_if_fatal()
            if done():
                return
            for name, f in self.by_station.items():
                if f.ended or f.error:  # the run ended, or its stream was cut: what does docker say?
                    await asyncio.sleep(0)
                    if f.fatal:
                        break
                    info = await self._container_state(self.cfg.station(name))  # (a dead station fails here)
                    if info.state != ContainerState.RUNNING:
                        raise ActionFailed(f"{name}: the container exited (code {info.exit_code}) while waiting for "
                                           f"{what}", [(name, ln) for ln in f.tail()])
                    if f.task.done():
                        raise ActionFailed(f"lost the log stream of {name}: {f.error}")
                    f.ended, f.error = False, None  # it runs: the stream resumes by itself (--since)
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
