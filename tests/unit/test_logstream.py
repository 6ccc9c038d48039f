"""The station's one log stream, without I/O: each batch carries its lines' docker times, a subscriber
reads what the owner reads (from a moment in the past when it asks), a subscriber that falls behind
loses its oldest batches and is told how many, and a launch's follower reads only its own run from
the batches (markers, fatal line, timeline at each line's docker time) without scanning them again."""

from __future__ import annotations

import asyncio
import json

import pytest

from console.config import parse_config
from console.probes.docker import ContainerInfo, parse_time
from console.probes.engine_log import EngineLogTracker
from console.remote.transport import CommandResult
from console.secrets import redact_text
from console.service.follow import Follower
from console.station.log_sources import HeadlessLogs
from console.station.logstream import LogEnded, LogSkipped, LogStream
from console.station.messages import LogBatch, LogMarker
from tests.two_stations import stations_toml
from tests.waiting import until

CONFIG = 'profile = "glm53-nvfp4-2x-gb300-vllm"\n' + stations_toml("127.0.0.1", "127.0.0.1", rail=False)
CFG = parse_config(CONFIG, "x.toml")
A = CFG.stations[0]
RUN_AT = "2026-12-01T07:17:10.000000000Z"
RUN = ContainerInfo("glm53", "running", started_at=RUN_AT)


def stamp(second: int, frac: str = "000000000") -> str:
    return f"2026-12-01T07:17:{second:02d}.{frac}Z"


class NoTransport:
    """The pure parts run no command: any call is a bug in the test."""

    station = A

    async def run(self, *a, **kw):  # pragma: no cover - never called
        raise AssertionError("no I/O here")

    def stream(self, *a, **kw):  # pragma: no cover - never called
        raise AssertionError("no I/O here")


class Station:
    """What docker prints on a station whose container ran and exited (``docker inspect`` in the
    format we ask for, ``docker logs --timestamps``); it writes down the commands it was sent."""

    station = A

    def __init__(self, state: str, started_at: str, log: list[str]):
        self.state, self.started_at, self.log = state, started_at, log
        self.sent: list[str] = []

    async def run(self, command: str, timeout=None, input=None) -> CommandResult:
        self.sent.append(command)
        if command.startswith("docker inspect"):
            state = json.dumps({"Status": self.state, "StartedAt": self.started_at, "ExitCode": 1})
            return CommandResult(0, f"{state}|img|sha256:1\n", "")
        if "docker logs" in command:
            return CommandResult(0, "".join(ln + "\n" for ln in self.log), "")
        raise AssertionError(command)

    def stream(self, command: str):  # pragma: no cover - the container does not run
        raise AssertionError(command)


def stream(owner: list | None = None) -> LogStream:
    return LogStream(A, NoTransport(), 100, on_batches=None if owner is None else owner.extend)  # type: ignore[arg-type]


async def drain(sub) -> list:
    return sub.drain()


def test_each_batch_carries_its_lines_docker_times_and_a_marker_has_none():
    owner: list[LogBatch] = []
    s = stream(owner)
    s.ingest(stamp(8) + " before")
    s.interrupted(1796000000.0)
    s.begin_read()
    s.mark_gap()
    s.ingest(stamp(40, "5") + " after")
    s.flush()
    (batch,) = owner
    assert batch.lines[0] == "before" and isinstance(batch.lines[1], LogMarker) and batch.lines[2] == "after"
    assert batch.stamps == [stamp(8), None, "2026-12-01T07:17:40.5Z"]
    assert batch.classified is not None and batch.classified.lines is batch.lines  # classified once, here


async def test_a_subscriber_reads_the_owners_batches_and_from_the_past_when_it_asks():
    owner: list[LogBatch] = []
    s = stream(owner)
    s.ingest(stamp(5) + " an older run")
    s.flush()
    s.ingest(stamp(11) + " this run, before anyone subscribed")
    s.flush()
    late = s.subscribe(since=parse_time(RUN_AT))
    now = s.subscribe()
    s.ingest(stamp(12) + " this run, live")
    s.flush()
    got = [ln for it in await drain(late) for ln in it.lines]
    assert got == ["this run, before anyone subscribed", "this run, live"]
    assert [ln for it in await drain(now) for ln in it.lines] == ["this run, live"]
    assert [ln for b in owner for ln in b.lines] == ["an older run", "this run, before anyone subscribed",
                                                     "this run, live"]
    assert [it.lines for it in await drain(now)] == []  # each batch once
    now.close()
    late.close()
    assert s.subscribers == 0


async def test_a_subscriber_that_falls_behind_loses_its_oldest_batches_and_is_told_how_many():
    owner: list[LogBatch] = []
    s = stream(owner)
    slow = s.subscribe(max_lines=10)
    for k in range(6):  # six batches of 4 lines: 24 lines for a queue of 10
        for i in range(4):
            s.ingest(stamp(20 + k) + f" line {k}.{i}")
        s.flush()
    assert sum(len(b.lines) for b in owner) == 24  # the owner lost nothing, and never waited
    assert slow.pending_lines <= 10
    items = await drain(slow)
    assert isinstance(items[0], LogSkipped) and items[0].lines == 16
    assert [ln for it in items[1:] for ln in it.lines] == [f"line {k}.{i}" for k in (4, 5) for i in range(4)]


async def test_a_subscription_further_back_than_the_history_is_told_it_missed_lines(monkeypatch):
    import console.station.logstream as ls

    monkeypatch.setattr(ls, "HISTORY_LINES", 4)
    s = stream([])
    for k in range(3):
        for i in range(3):
            s.ingest(stamp(20 + k) + f" l{k}.{i}")
        s.flush()
    items = await drain(s.subscribe(since=parse_time(stamp(20))))
    assert isinstance(items[0], LogSkipped) and items[0].lines is None
    assert [ln for it in items[1:] for ln in it.lines] == ["l2.0", "l2.1", "l2.2"]


async def test_closing_the_last_subscription_of_a_headless_stream_stops_it():
    logs = HeadlessLogs({"A": NoTransport()})  # type: ignore[dict-item]
    sub = logs(A, ContainerInfo("glm53", "exited", started_at=RUN_AT), 0.0)
    assert "A" in logs.streams
    sub.close()
    assert "A" not in logs.streams
    await logs.close()


OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB."


async def test_the_follower_reads_only_its_run_from_the_batches_at_each_lines_docker_time():
    s = stream([])
    changed = asyncio.Event()
    events = []
    tracker = EngineLogTracker(CFG.profile.engine, head=True)
    since = parse_time(RUN_AT) - 0.001
    f = Follower(A, s.subscribe(since=since), since, "Application startup complete.", "vLLM API server version",
                 changed, events.append, tracker)
    s.ingest(stamp(5) + " (APIServer pid=1) INFO older run: vLLM API server version 0.30.0")  # not this run
    s.ingest(stamp(5) + " INFO:     Application startup complete.")
    s.ingest(stamp(11) + " (APIServer pid=1) INFO 12-01 07:17:11 [api_server.py:1896] vLLM API server version 0.30.0")
    s.ingest(stamp(12) + " some line")
    s.ingest(stamp(13) + " " + OOM)
    s.flush()
    await asyncio.wait_for(changed.wait(), 5)
    # the follower's task reads the queue on the next turns of the loop: wait for the last line it gets
    await until(lambda: f.fatal is not None, what="the OOM line read by the follower", timeout=5)
    assert f.started and not f.ready  # the older run's ready line is not this run's
    assert len(f.lines) == 3 and not any("older" in ln for ln in f.lines)
    assert f.fatal is not None and f.fatal[0] == "cuda-oom" and f.fatal_context[-1] == OOM
    (up,) = [e for e in tracker.progress.timeline if e.event == "engine-up"]
    assert up.at == pytest.approx(parse_time(stamp(11)))  # the line's own docker time, not "now"
    assert [e.text for e in events if e.kind == "timeline"] and not f.ended
    await f.close()


async def test_a_run_that_exited_before_anyone_looked_is_read_and_its_end_told():
    """A container that dies at once: the stream reads its log (although it is not running) from the
    run's start, then says the run ended; a follower of that run sees both."""
    station = Station("exited", RUN_AT, [stamp(11) + " (APIServer pid=1) INFO vLLM API server version 0.30.0",
                                         stamp(12) + " " + OOM])
    logs = HeadlessLogs({"A": station})  # type: ignore[dict-item]
    since = parse_time(RUN_AT) - 0.001
    sub = logs(A, ContainerInfo("glm53", "exited", started_at=RUN_AT), since)
    items = []
    async for item in sub:
        items.append(item)
        if isinstance(item, LogEnded):
            break
    assert [ln for it in items if isinstance(it, LogBatch) for ln in it.lines][-1] == OOM
    assert items[-1].info.state == "exited" and items[-1].info.started_at == RUN_AT
    reads = [c for c in station.sent if "docker logs" in c]
    assert len(reads) == 1 and " -f " not in reads[0] and f"--since {since:.6f}" in reads[0]
    await logs.close()


class ShortFollow(Station):
    """A running container whose ``docker logs -f`` ends after its first line (the daemon restarted, the
    process was killed) just before the container exits with its crash printed."""

    def __init__(self, log: list[str]):
        super().__init__("running", RUN_AT, log)

    def stream(self, command: str):
        self.sent.append(command)
        self.state = "exited"  # by the time the console looks again

        async def first_line():
            yield self.log[0]
        return first_line()

    async def run(self, command: str, timeout=None, input=None) -> CommandResult:
        if "docker logs" in command:
            self.sent.append(command)
            since = parse_time(command.split("--since ")[1].split()[0].strip("'"))
            return CommandResult(0, "".join(ln + "\n" for ln in self.log if parse_time(ln.split()[0]) >= since), "")
        return await super().run(command, timeout, input)


async def test_a_follow_that_ends_before_the_crash_is_read_again_from_its_last_line():
    """The follow ended early and the container is found exited: the lines since the last one read are
    read once more (the line at that time not twice), so the crash is in the log and the run ends failed."""
    station = ShortFollow([stamp(11) + " (APIServer pid=1) INFO vLLM API server version 0.30.0",
                           stamp(11) + " (APIServer pid=1) INFO non-default args: {}", stamp(12) + " " + OOM])
    owner: list[LogBatch] = []
    ended: list[ContainerInfo] = []
    s = LogStream(A, station, 100, on_batches=owner.extend, on_stopped=ended.append)  # type: ignore[arg-type]
    s.container(RUN)
    task = asyncio.create_task(s.follow())
    try:
        await until(lambda: ended, what="the run ended", detail=lambda: station.sent)
    finally:
        task.cancel()
    lines = [ln for b in owner for ln in b.lines]
    assert lines == [ln.split(" ", 1)[1] for ln in station.log]
    assert ended[-1].state == "exited"
    reads = [c for c in station.sent if "docker logs" in c]
    assert len(reads) == 2 and " -f " in reads[0] and " -f " not in reads[1] and "--since" in reads[1]


def test_a_backlog_is_handed_on_in_slices_in_order_with_the_loop_free_between():
    """What piled up while the loop was held up goes out LOG_SLICE lines at a time (never one block of
    masking and classifying a flood), in order, the console's marker lines kept as markers."""
    from console.station import logstream as ls

    got: list[LogBatch] = []
    stream = LogStream(A, NoTransport(), 100, on_batches=got.extend)  # type: ignore[arg-type]
    n = ls.LOG_SLICE * 2 + 7
    for k in range(n // 2):
        stream.ingest(f"{stamp(11)} line {k}")
    stream.interrupted(1.0)
    stream.mark_gap()
    for k in range(n // 2, n):
        stream.ingest(f"{stamp(12)} line {k} token=hunter2secret")
    stream.flush(10)
    assert [len(b.lines) for b in got] == [10]

    async def run() -> list[int]:
        turns: list[int] = []  # batches handed on each time another task got the loop
        added = [0]

        async def other() -> None:  # a reader still adding lines: they wait for the next round
            while True:
                turns.append(len(got))
                if len(got) > 1 and added[0] < EXTRA:  # once the backlog's flush began
                    added[0] += 1
                    stream.ingest(f"{stamp(13)} extra {added[0]}")
                await asyncio.sleep(0)

        task = asyncio.create_task(other())
        flusher = asyncio.create_task(stream.flush_every())
        await until(lambda: sum(len(b.lines) for b in got) == n + 1 + EXTRA, what="every line handed on", timeout=10)
        flusher.cancel()
        task.cancel()
        return turns

    EXTRA = 10
    turns = asyncio.run(run())
    assert max(len(b.lines) for b in got) <= ls.LOG_SLICE
    # the backlog's slices and one more round for the late lines, never a batch per turn of the loop
    assert len(got) <= 1 + -(-(n + 1 - 10) // ls.LOG_SLICE) + 2
    assert len(set(turns)) >= 3  # the other task ran between the slices
    lines = [x for b in got for x in b.lines if not x.startswith("extra ")]
    markers = [x for x in lines if type(x) is LogMarker]
    assert len(markers) == 1 and "stream interrupted" in markers[0]
    raw = [f"line {k}" if k < n // 2 else f"line {k} token=hunter2secret" for k in range(n)]
    assert [x for x in lines if type(x) is not LogMarker] == [redact_text(x) for x in raw]
    assert all("hunter2secret" not in x for x in lines)


async def test_a_long_run_keeps_a_bounded_tail_and_its_transport_from_every_line():
    """A launch that logs a flood keeps its last lines only, and the transport still reads the whole
    run: a channel line early on (GDRDMA) and a socket channel after thousands of lines make it socket."""
    from console.service.follow import TAIL_LINES

    s = stream([])
    changed = asyncio.Event()
    tracker = EngineLogTracker(CFG.profile.engine, head=True)
    since = parse_time(RUN_AT) - 0.001
    f = Follower(A, s.subscribe(since=since), since, "Application startup complete.", "vLLM API server version",
                 changed, lambda e: None, tracker)
    s.ingest(stamp(11) + " a:1:2 [0] NCCL INFO Using network IB")
    s.ingest(stamp(11) + " a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA")
    for i in range(5000):
        s.ingest(stamp(12) + f" filler {i}")
    s.ingest(stamp(13) + " a:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Socket/0")
    s.ingest(stamp(13) + " the last line")
    s.flush()
    await until(lambda: f.lines and f.lines[-1] == "the last line", what="the last line read", timeout=5)
    assert len(f.lines) == TAIL_LINES and f.tail(2)[0].endswith("via NET/Socket/0")
    assert f.transport.best == "socket" and f.transport.channel_seen
    await f.close()
