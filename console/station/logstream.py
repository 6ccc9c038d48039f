"""One station's container log, followed once and shared by every reader: ``LogStream``.

The station monitor (``StationService``) owns one per station; a process that runs no monitor (the
CLI's launch and restart, the workbench's relaunch, the tests) runs one per followed station over the
action's session (``HeadlessLogs``, console/station/log_sources.py). Each reader reads the same batches, so there is one
``docker logs -f`` per station and one classification per batch:

- the owner gets every batch at once and in full (``on_batches``: the monitor's tracker, then the
  ``LogBatch`` messages the log view and the diagnosis read);
- any other reader (a launch's follower) ``subscribe``s: an async iterator of ``LogBatch``,
  ``LogEnded`` (the followed run ended), ``LogInterrupted`` (the stream was cut; it resumes by itself)
  and ``LogSkipped`` items.

Continuity: after an interruption or a container restart the log resumes with ``--since`` the last
timestamp (inclusive in docker: moby's readers skip only entries before it); the boundary lines that
come again are dropped by timestamp and content; an interruption leaves a marker line; a run that
started and ended between two looks (a container that dies at once) is still read; a new run (a
restart, a launch) starts on a marker line. Every batch carries
each line's docker timestamp (``LogBatch.stamps``).

Subscribers never slow the stream: each has its own queue, bounded in lines and characters. Publishing
never waits; a subscriber that falls that far behind loses its oldest queued batches and reads a
``LogSkipped`` (how many lines) before the rest. A subscription may start a little in the past
(``since``, Unix seconds): the stream keeps its last ``HISTORY_LINES`` lines for that, since a launch
subscribes a moment after its container started (a ``LogSkipped`` says when the history no longer
reaches back that far).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from console.catalogue.classify import classify
from console.config import Station
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes.docker import ContainerInfo, parse_time, split_timestamp, time_key
from console.remote import cmdlines
from console.remote.transport import Transport
from console.sanitize import clip, one_line
from console.secrets import redact_lines, redact_text
from console.station.messages import LogBatch, LogMarker
from console.tasks import cancel_and_wait
from console.vocabulary import ContainerState

LOG_FLUSH_S = 0.05
LOG_BATCH_MAX = 5000
LOG_SLICE = 1250  # lines the periodic flush hands on at once (~2.5 ms of masking and classifying, ~1.5 of taking in)
LOG_LINE_CAP = 16 * 1024  # a log line is kept whole up to this (diagnosis, watch); beyond, clipped with a marker
# (16 KiB: vLLM's argument list fits; the worst catalogue pattern costs ~13 ms on a hostile line this long)
RECHECK_STOPPED_S = 60.0  # a stopped container is looked at again this often (an event normally wakes us)
HISTORY_LINES = LOG_BATCH_MAX  # kept for a subscriber that starts in the past ...
HISTORY_CHARS = 8 * 2**20  # ... and at most this much text
SUBSCRIBER_MAX_LINES = 10 * LOG_BATCH_MAX  # what one subscriber may fall behind by, in lines ...
SUBSCRIBER_MAX_CHARS = 32 * 2**20  # ... and in characters, before its oldest batches are dropped

_NOTHING = object()  # no run read yet


@dataclass(frozen=True)
class LogEnded:
    """The followed run ended: its log stream ended and the container is not running (``info``)."""

    station: str
    info: ContainerInfo


@dataclass(frozen=True)
class LogInterrupted:
    """The stream was cut (connection lost, service restarted); it resumes by itself with ``--since``."""

    station: str
    reason: str


@dataclass(frozen=True)
class LogSkipped:
    """Lines this subscriber will never read (it fell behind, or subscribed further back than the
    history reaches); ``lines`` None: an unknown number."""

    station: str
    lines: int | None


LogItem = LogBatch | LogEnded | LogInterrupted | LogSkipped


def _size(batch: LogBatch) -> int:
    return sum(map(len, batch.lines))


class LogSubscription:
    """One reader's view of a ``LogStream``: ``async for item in sub``; ``close()`` when done (the
    iteration then ends). Its queue is bounded (see the module's docstring)."""

    def __init__(self, stream: LogStream, max_lines: int, max_chars: int) -> None:
        self.station = stream.station.name
        self._stream = stream
        self.max_lines, self.max_chars = max_lines, max_chars
        self._items: deque[tuple[LogItem, int]] = deque()  # (item, its characters)
        self._lines = self._chars = 0
        self._skipped = 0
        self._skipped_unknown = False
        self._ready = asyncio.Event()
        self.closed = False

    def put(self, item: LogItem, size: int = 0) -> None:
        """Queue an item (the stream's side; never waits): over the bound, the oldest batches go."""
        if self.closed:
            return
        n = len(item.lines) if isinstance(item, LogBatch) else 0
        while self._items and (self._lines + n > self.max_lines or self._chars + size > self.max_chars):
            at = next((i for i, (it, _) in enumerate(self._items) if isinstance(it, LogBatch)), None)
            if at is None:
                break
            old, old_size = self._items[at]
            del self._items[at]
            self._lines -= len(old.lines)  # type: ignore[union-attr]
            self._chars -= old_size
            self._skipped += len(old.lines)  # type: ignore[union-attr]
        self._items.append((item, size))
        self._lines += n
        self._chars += size
        self._ready.set()

    def skip_unknown(self) -> None:
        self._skipped_unknown = True
        self._ready.set()

    @property
    def pending_lines(self) -> int:
        return self._lines

    def drain(self) -> list[LogItem]:
        """Everything queued now, without waiting (a ``LogSkipped`` first where lines were lost)."""
        out: list[LogItem] = []
        while self._items or self._skipped or self._skipped_unknown:
            out.append(self._next())
        return out

    def __aiter__(self) -> LogSubscription:
        return self

    async def __anext__(self) -> LogItem:
        while not self._items and not self._skipped and not self._skipped_unknown:
            if self.closed:
                raise StopAsyncIteration
            self._ready.clear()
            await self._ready.wait()
        return self._next()

    def _next(self) -> LogItem:
        if self._skipped or self._skipped_unknown:
            n = None if self._skipped_unknown else self._skipped
            self._skipped, self._skipped_unknown = 0, False
            return LogSkipped(self.station, n)
        item, size = self._items.popleft()
        if isinstance(item, LogBatch):
            self._lines -= len(item.lines)
        self._chars -= size
        return item

    def close(self) -> None:
        """Stop reading: the stream forgets this subscriber; a pending ``async for`` ends."""
        if not self.closed:
            self.closed = True
            self._items.clear()
            self._stream.unsubscribe(self)
            self._ready.set()


class LogStream:
    """One station's container log, followed with ``docker logs -f`` over ``transport``.

    ``refresh()`` reads the container now and tells this stream (``container``); ``on_batches`` gets
    every classified batch of a flush (the owner's path: never dropped); ``on_stopped`` is told when
    the followed container stopped; ``last_heard`` is when the station was last heard from (where an
    interruption begins). ``since``: where the first read starts (RFC3339 or Unix seconds; default:
    the last ``tail`` lines). ``mask``: every line passes it before anything reads it (the config's secret
values and the secret-name rule: SGLang prints its server args with the API key). The owner runs
``follow()`` and ``flush_every()`` (or ``run()``, both)."""

    def __init__(self, station: Station, transport: Transport, tail: int, *,
                 refresh: Callable[[], Awaitable[ContainerInfo]] | None = None,
                 on_batches: Callable[[list[LogBatch]], None] | None = None,
                 on_stopped: Callable[[ContainerInfo], None] | None = None,
                 last_heard: Callable[[], float | None] | None = None, since: str | None = None,
                 mask: Callable[[str], str] = redact_text) -> None:
        self.station = station
        self._mask = mask  # secrets out of every line, here where log text enters (config.masker) ...
        # ... once a batch, at the flush (its quick tests over the whole batch: see secrets.redact_lines)
        self._mask_lines: Callable[[list[str]], list[str]] = getattr(mask, "lines", None) or (
            redact_lines if mask is redact_text else (lambda lines: list(map(mask, lines))))
        self.transport = transport
        self.tail = tail
        self._refresh = refresh or self._inspect
        self._on_batches = on_batches
        self._on_stopped = on_stopped
        self._last_heard = last_heard or (lambda: None)
        self._info: ContainerInfo | None = None
        self._running = asyncio.Event()
        self._wake = asyncio.Event()
        self._read_run: object = _NOTHING  # StartedAt of the last run whose log was read (or followed)
        self._buf: list[str] = []
        self._marks = 0  # marker lines in _buf
        self._stamps: list[str | None] = []
        self._subscribers: list[LogSubscription] = []
        self._history: deque[tuple[LogItem, int, int]] = deque()  # (item, lines, characters)
        self._history_lines = self._history_chars = 0
        self._evicted_last: str | None = None  # the last stamp of the newest batch gone from the history
        # continuity across reconnects and stream restarts
        self.last_ts: str | None = since
        self._last_key: tuple[str, str] | None = None
        self._boundary: list[int] = []  # hashes of the lines carrying the last timestamp
        self._replay: Counter[int] | None = None
        self._gap_from: float | None = None
        self._cut_by: BaseException | None = None  # what cut the stream last (its subscribers were told)
        self._new_run: tuple[float | None, LogMarker] | None = None  # a new run's marker, laid before its first line
        self.on_idle: Callable[[], None] | None = None  # told when the last subscriber let go

    # ------------------------------------------------------------------ the container

    def container(self, info: ContainerInfo) -> None:
        """The container as its owner read it (inspect, events): running -> follow it; a run not read
        yet -> read it."""
        self._info = info
        if info.state == ContainerState.RUNNING:
            self._running.set()
        else:
            self._running.clear()
        self._wake.set()

    def follow_run(self, run: ContainerInfo, since: float) -> LogSubscription:
        """Subscribe to a run that was just started (``run``: its inspect) from ``since`` on. A newer
        run than the stream knows of wakes it at once; for a run it knows, its own reading stands."""
        known = parse_time(self._info.started_at or "") if self._info else None
        new = parse_time(run.started_at or "")
        if new is not None and (known is None or new > known):
            self.container(run)
        return self.subscribe(since)

    async def _inspect(self) -> ContainerInfo:
        res = await self.transport.run(cmdlines.docker_inspect(self.station.container))
        try:
            info = docker_probe.parse_inspect(self.station.container, res.stdout, res.exit_status)
        except ParseError:
            info = ContainerInfo(self.station.container, ContainerState.ABSENT)
        self.container(info)
        return info

    # ------------------------------------------------------------------ subscribers

    def subscribe(self, since: float | None = None, max_lines: int = SUBSCRIBER_MAX_LINES,
                  max_chars: int = SUBSCRIBER_MAX_CHARS) -> LogSubscription:
        """A new reader of the batches from now on, or from ``since`` (Unix seconds, a docker time:
        replayed from the history first)."""
        sub = LogSubscription(self, max_lines, max_chars)
        if since is not None:
            if self._evicted_last is not None and (parse_time(self._evicted_last) or 0.0) >= since:
                sub.skip_unknown()
            replaying = False
            for item, _n, size in self._history:
                replaying = replaying or self._reaches(item, since)
                if replaying:
                    sub.put(item, size)
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: LogSubscription) -> None:
        with contextlib.suppress(ValueError):
            self._subscribers.remove(sub)
            if not self._subscribers and self.on_idle is not None:
                self.on_idle()

    def close_subscriptions(self) -> None:
        """End every subscription (their ``async for`` ends): the stream is going away."""
        for sub in list(self._subscribers):
            sub.close()

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    @staticmethod
    def _reaches(item: LogItem, since: float) -> bool:
        """Whether a history item holds something from ``since`` on."""
        if isinstance(item, LogBatch):
            last = next((s for s in reversed(item.stamps) if s), None)
            t = parse_time(last) if last else None
        elif isinstance(item, LogEnded):
            t = parse_time(item.info.started_at or "")
        else:
            t = None
        return t is not None and t >= since

    def _publish(self, item: LogItem, size: int = 0) -> None:
        for sub in list(self._subscribers):
            sub.put(item, size)
        if isinstance(item, LogInterrupted):
            return  # (a later subscriber needs no old interruption)
        n = len(item.lines) if isinstance(item, LogBatch) else 0
        self._history.append((item, n, size))
        self._history_lines += n
        self._history_chars += size
        while len(self._history) > 1 and (self._history_lines > HISTORY_LINES or self._history_chars > HISTORY_CHARS):
            old, old_n, old_size = self._history.popleft()
            self._history_lines -= old_n
            self._history_chars -= old_size
            if isinstance(old, LogBatch):
                self._evicted_last = next((s for s in reversed(old.stamps) if s), self._evicted_last)

    # ------------------------------------------------------------------ lines (no I/O)

    def ingest(self, line: str) -> None:
        """Hot path (every log line): split the docker timestamp, drop what a ``--since`` resume
        replays (inclusive: the boundary lines come again), clip a giant line, buffer. The batch is
        classified once, in ``flush``."""
        ts, text = split_timestamp(line)
        if ts:
            key = time_key(ts)
            if self._replay is not None and self._last_key is not None:
                if key < self._last_key:
                    return
                if key == self._last_key:
                    h = hash(text)
                    if self._replay[h] > 0:
                        self._replay[h] -= 1
                        return
                else:
                    self._replay = None
            if key != self._last_key:
                self._last_key, self._boundary = key, []
            self._boundary.append(hash(text))
            self.last_ts = ts
        if self._new_run is not None:
            self._lay_run_marker(ts or None)
        if len(text) > LOG_LINE_CAP:
            text = clip(text, LOG_LINE_CAP)
        self._buf.append(text)  # (masked at the flush, a batch at once)
        self._stamps.append(ts)

    def interrupted(self, at: float | None = None) -> None:
        """The stream was cut at ``at`` (default: when the station was last heard from, else now): the
        next read lays a marker there."""
        if self._gap_from is None:
            self._gap_from = at or self._last_heard() or time.time()

    def cut(self, exc: BaseException) -> None:
        """``exc`` ended a read (connection lost, service restarted): the next read marks the gap, and
        every subscriber reads a ``LogInterrupted`` once, however many loops see ``exc`` go by."""
        if exc is self._cut_by:
            return
        self._cut_by = exc
        self.interrupted()
        reason = "stopped" if isinstance(exc, asyncio.CancelledError) else f"{type(exc).__name__}: {exc}"
        self._publish(LogInterrupted(self.station.name, one_line(reason, 300)))

    def begin_read(self) -> None:
        """A ``--since`` read begins: the lines at the last timestamp will come again."""
        self._cut_by = None
        self._replay = Counter(self._boundary) if self.last_ts else None

    def mark_gap(self) -> None:
        """Where the stream was interrupted, a line of our own (the lines printed meanwhile follow)."""
        if self._gap_from is None:
            return
        start, end = time.strftime("%H:%M:%S", time.localtime(self._gap_from)), time.strftime("%H:%M:%S")
        self._buf.append(LogMarker(f"— {self.station.name}: stream interrupted {start}–{end} —"))
        self._marks += 1
        self._stamps.append(None)
        self._gap_from = None

    def mark_run(self, info: ContainerInfo | None) -> None:
        """A read of ``info``'s run begins: when it is a new run after one already read (a restart,
        a launch), a line of our own goes before its first line (the old run's last lines, read in
        the same ``--since`` read, stay above it), so the view shows where the new container starts."""
        run = info.started_at if info else None
        if self._read_run is not _NOTHING and run and run != self._read_run and info is not None:
            at = parse_time(run)
            when = time.strftime("%H:%M:%S", time.localtime(at)) if at is not None else one_line(run, 40)
            marker = LogMarker(f"— {self.station.name}: container {info.name} started {when} (a new run) —")
            self._new_run = (at, marker)
        self._read_run = run

    def _lay_run_marker(self, ts: str | None) -> None:
        """Lay the pending new-run marker before a line of the new run (``ts``: the line's stamp;
        None: lay it now)."""
        assert self._new_run is not None
        at, marker = self._new_run
        if ts is not None and at is not None and (t := parse_time(ts)) is not None and t < at:
            return  # still the old run's lines
        self._buf.append(marker)
        self._marks += 1
        self._stamps.append(None)
        self._new_run = None

    def flush(self, most: int | None = None) -> None:
        """Classify the buffered lines once (one scan per batch), hand the batches to the owner, then
        to the subscribers. ``most``: only the oldest ``most`` lines (the rest stay buffered, in order)."""
        if not self._buf:
            return
        if most is not None and len(self._buf) > most:
            buf, stamps = self._buf[:most], self._stamps[:most]
            del self._buf[:most], self._stamps[:most]
        else:
            buf, stamps = self._buf, self._stamps
            self._buf, self._stamps = [], []
        buf = self._masked(buf)
        batches = []
        for i in range(0, len(buf), LOG_BATCH_MAX):
            chunk = buf[i:i + LOG_BATCH_MAX]
            batches.append(LogBatch(self.station.name, chunk, classify(chunk), stamps=stamps[i:i + LOG_BATCH_MAX]))
        if self._on_batches is not None:
            self._on_batches(batches)
        for batch in batches:
            self._publish(batch, _size(batch))

    def _masked(self, buf: list[str]) -> list[str]:
        """The buffered lines masked, the console's own marker lines among them left as they are."""
        marks = [(i, line) for i, line in enumerate(buf) if type(line) is LogMarker] if self._marks else ()
        self._marks -= len(marks)
        out = self._mask_lines(buf)
        for i, line in marks:
            out[i] = line
        return out

    async def flush_every(self) -> None:
        """Every ``LOG_FLUSH_S`` what was read, ``LOG_SLICE`` lines at a time with the loop free between
        two slices: a flood (or a backlog after the loop was held up) is never one long block of masking,
        classifying and drawing, which the UI's own timers would wait behind."""
        while True:
            await asyncio.sleep(LOG_FLUSH_S)
            left = len(self._buf)  # this round's lines: those read meanwhile wait for the next round
            while left > 0:
                self.flush(min(left, LOG_SLICE))
                left -= LOG_SLICE
                if left > 0:
                    await asyncio.sleep(0)

    # ------------------------------------------------------------------ the stream (I/O)

    def _unread(self) -> bool:
        """A read is due although the container is not running: after an interruption, or a run whose
        log was never read (one that started and stopped between two looks, or the last one before
        we connected: the crash that brought the operator here is usually in it)."""
        info = self._info
        if info is None or info.state == ContainerState.ABSENT:
            return False
        return (self._gap_from is not None and self.last_ts is not None) or info.started_at != self._read_run

    def _ended(self, info: ContainerInfo) -> None:
        self._running.clear()
        if self._on_stopped is not None:
            self._on_stopped(info)
        self._publish(LogEnded(self.station.name, info))

    async def _until_due(self) -> None:
        """Until the container runs or a run is to be read; an event normally wakes us (``container``),
        the slow re-check only bounds a missed one."""
        while True:
            self._wake.clear()
            if self._running.is_set() or self._unread():
                return
            waiter = asyncio.ensure_future(self._wake.wait())
            try:  # asyncio.wait, not wait_for: on 3.11 wait_for can swallow a cancel racing its timeout
                done, _ = await asyncio.wait({waiter}, timeout=RECHECK_STOPPED_S)
            finally:
                waiter.cancel()
            if not done:
                await self._refresh()

    async def _catch_up(self) -> None:
        """Read the log of a container that is not running (from where we stopped), then look again:
        it may have started meanwhile."""
        self.mark_run(self._info)
        self.begin_read()
        res = await self.transport.run(cmdlines.docker_logs(self.station.container, tail=self.tail, follow=False,
                                                            since=self.last_ts))
        self.mark_gap()
        for line in res.stdout.splitlines():
            self.ingest(line)
        self.flush()
        info = await self._refresh()
        if info.state != ContainerState.RUNNING:
            self._ended(info)

    async def _follow_running(self) -> None:
        self.mark_run(self._info)
        cmd = cmdlines.docker_logs(self.station.container, tail=self.tail, since=self.last_ts)
        self.begin_read()
        self.mark_gap()
        try:
            async for line in self.transport.stream(cmd):
                self.ingest(line)
        except BaseException as exc:  # connection lost, service restarted: the next read marks the gap
            self.cut(exc)
            raise
        self.flush()
        # The stream ended: the container stopped or exited (or the channel was dropped): look again.
        info = await self._refresh()
        if info.state != ContainerState.RUNNING:
            # A follow can end before the run's last lines (the daemon restarted, the channel or the
            # `docker logs` process went away just before the exit): the lines since the last one read
            # are read once more, so the crash that stopped it is never missing from its log.
            await self._catch_up()

    async def follow(self) -> None:
        """Follow the container's log for as long as this runs: while it runs with ``-f``; when it
        stops, wait for the next start (reading what a run printed before it stopped)."""
        while True:
            if self._running.is_set():
                await self._follow_running()
            elif self._unread():
                await self._catch_up()
            else:
                await self._until_due()

    async def run(self) -> None:
        """``follow`` and ``flush_every`` together (an owner that runs no jobs of its own)."""
        tasks = [asyncio.create_task(self.follow()), asyncio.create_task(self.flush_every())]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if (exc := t.exception()) is not None:
                    raise exc
        finally:
            await asyncio.shield(cancel_and_wait(tasks))
            self.flush()
