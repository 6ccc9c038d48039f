r"""The two ``LogSource``\s a launch's follower (``console.service.follow``) subscribes through: the
console's own station monitors' streams (``StreamSource``: nothing new is opened), or, in a process
that runs no monitor, streams of its own (``HeadlessLogs``). Both hand out ``LogStream`` subscriptions
(console/station/logstream.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

from console.config import Station
from console.probes.docker import ContainerInfo
from console.remote.transport import Transport
from console.secrets import redact_text
from console.station.logstream import LogStream, LogSubscription
from console.supervisor import Backoff
from console.tasks import cancel_and_wait

HEADLESS_HEALTHY_S = 30.0  # a headless stream that ran this long before it failed is opened again at once ...
HEADLESS_CAP_S = 10.0  # ... else after the back-off table's wait, at most this (a launch is waiting on it)


class StreamSource:
    """A ``LogSource`` (``console.service.follow``) over streams that already run: the console's
    station monitors' (``StationService.logs``). A launch subscribes; nothing new is opened."""

    def __init__(self, streams: Mapping[str, LogStream]) -> None:
        self.streams = streams

    def __call__(self, station: Station, run: ContainerInfo, since: float) -> LogSubscription:
        return self.streams[station.name].follow_run(run, since)


class HeadlessLogs:
    """The log streams of a process that runs no station monitor (the CLI's launch and restart, the
    workbench's relaunch, a test): one ``LogStream`` per followed station over the action's own
    session, started when its first run is followed (from that run's start: no older lines) and
    stopped when its last subscriber lets go, or on ``close``. A stream whose connection failed is
    opened again (it resumes with ``--since``); its subscribers read a ``LogInterrupted`` first.

    It is a ``LogSource`` (``console.service.follow``): ``source(station, run, since)``."""

    def __init__(self, transports: Mapping[str, Transport], tail: int = 1000,
                 mask: Callable[[str], str] = redact_text) -> None:
        self.transports = transports
        self.tail = tail
        self.mask = mask
        self.streams: dict[str, LogStream] = {}
        self._tasks: dict[str, asyncio.Task] = {}
        self._ending: list[asyncio.Task] = []

    def __call__(self, station: Station, run: ContainerInfo, since: float) -> LogSubscription:
        stream = self.streams.get(station.name)
        if stream is None:
            stream = LogStream(station, self.transports[station.name], self.tail, since=f"{since:.6f}",
                               mask=self.mask)
            stream.container(run)
            stream.on_idle = lambda: self._release(station.name)
            self.streams[station.name] = stream
            self._tasks[station.name] = asyncio.create_task(self._keep(stream), name=f"logs-{station.name}")
        return stream.follow_run(run, since)

    def _release(self, name: str) -> None:
        """The last subscriber let go: stop the stream (nobody else reads it)."""
        self.streams.pop(name, None)
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            self._ending.append(task)  # (awaited in close)

    @staticmethod
    async def _keep(stream: LogStream) -> None:
        """Run ``stream`` until released; a read that failed anywhere (a follow, a catch-up read, an
        inspect) is an interruption its subscribers read, then the stream is opened again."""
        backoff = Backoff(healthy_after_s=HEADLESS_HEALTHY_S, cap_s=HEADLESS_CAP_S)
        while True:
            t0 = time.monotonic()
            try:
                await stream.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # told (once, if the follow told it already), then opened again
                stream.cut(exc)
            await asyncio.sleep(backoff.failed(time.monotonic() - t0))

    async def close(self) -> None:
        """End every subscription and stream."""
        tasks = list(self._tasks.values()) + self._ending
        self._tasks.clear()
        self._ending = []
        for stream in list(self.streams.values()):
            stream.on_idle = None
            stream.close_subscriptions()
        self.streams.clear()
        await cancel_and_wait(tasks)
