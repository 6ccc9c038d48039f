"""The channel budget of one SSH connection: who may hold how many channels, and what a wait says.

OpenSSH allows ``MaxSessions`` (default 10) channels per connection, and a channel the client
already closed can still count there for a moment, so the console keeps to ``MAX_CHANNELS`` (8).
Two kinds of long-lived stream share them, each within its own slots, so neither can starve the
other and one-shot commands always find a channel:

- ``watch``: the dashboard's streams (a station service and what it runs: the GPU loop, the station
  loop, the container log, the health channel), at most ``WATCH_STREAMS``;
- ``job``: an on-demand job's stream (a perftest server, ``mpirun``), at most ``JOB_STREAMS``;
- one-shot commands: whatever is left, at least ``MAX_CHANNELS - WATCH_STREAMS - JOB_STREAMS``.

A stream's kind comes from where it is opened (``watching()`` around a station service's tasks);
anything else is a job. A request that has to wait is announced to whoever listens in its context
(``on_wait``: the workbench's and the checks screen's status line say "waiting for an SSH channel"),
and a stream that never gets a slot fails (the transport's ``ChannelShortage``): the console's own
budget, never the station or its network.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal

MAX_CHANNELS = 8
WATCH_STREAMS = 4
JOB_STREAMS = 2
STREAM_SLOT_WAIT_S = 30.0  # a stream waiting this long for a slot fails, named a channel shortage
WAIT_NOTICE_S = 0.5  # a wait longer than this is announced (shorter ones are the normal queue)

ChannelKind = Literal["watch", "job"]
WaitState = Literal["waiting", "granted", "refused"]
STREAM_SLOTS: dict[ChannelKind, int] = {"watch": WATCH_STREAMS, "job": JOB_STREAMS}
KIND_WORDS: dict[ChannelKind, str] = {"watch": "dashboard", "job": "job"}


@dataclass(frozen=True)
class ChannelWait:
    """A channel request that had to wait: ``waiting`` (still), ``granted`` (after ``waited_s``), or
    ``refused`` (no slot within the limit)."""

    station: str
    what: str  # the command, shortened
    state: WaitState
    waited_s: float
    held: str  # what holds the channels, in words

    def text(self) -> str:
        if self.state == "waiting":
            return f"waiting for an SSH channel on {self.station} ({self.held}): {self.what}"
        if self.state == "granted":
            return f"SSH channel on {self.station} after {self.waited_s:.0f} s: {self.what}"
        return f"no SSH channel on {self.station} for {self.waited_s:.0f} s ({self.held}): {self.what}"


class SlotTimeout(Exception):
    """No slot within the limit (the transport turns it into its ``ChannelShortage``)."""

    def __init__(self, wait: ChannelWait) -> None:
        super().__init__(wait.text())
        self.wait = wait


WaitFn = Callable[[ChannelWait], None]
_KIND: ContextVar[ChannelKind] = ContextVar("channel_kind", default="job")
_LISTENERS: ContextVar[tuple[WaitFn, ...]] = ContextVar("channel_wait_listeners", default=())


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Streams opened in this context (and the tasks created in it) are the dashboard's."""
    token = _KIND.set("watch")
    try:
        yield
    finally:
        _KIND.reset(token)


def current_kind() -> ChannelKind:
    return _KIND.get()


@contextlib.contextmanager
def on_wait(fn: WaitFn) -> Iterator[None]:
    """``fn`` hears every channel wait of this context (and of the tasks created in it)."""
    token = _LISTENERS.set((*_LISTENERS.get(), fn))
    try:
        yield
    finally:
        _LISTENERS.reset(token)


def _tell(wait: ChannelWait) -> None:
    for fn in _LISTENERS.get():
        with contextlib.suppress(Exception):  # a display callback never breaks a command
            fn(wait)


def short(command: str, n: int = 60) -> str:
    words = " ".join(command.split())
    return words if len(words) <= n else words[: n - 1] + "…"


class ChannelBudget:
    """One connection's channels: a stream slot per kind, then a channel; what each holds, in words."""

    def __init__(self, station: str, slot_wait_s: float | None = None) -> None:
        self.station = station
        self.slot_wait_s = STREAM_SLOT_WAIT_S if slot_wait_s is None else slot_wait_s
        self._channels = asyncio.Semaphore(MAX_CHANNELS)
        self._slots: dict[ChannelKind, asyncio.Semaphore] = {k: asyncio.Semaphore(n) for k, n in STREAM_SLOTS.items()}
        self.open: dict[ChannelKind, list[str]] = {"watch": [], "job": []}  # the streams holding a slot
        self.commands = 0  # one-shot commands holding a channel
        self.waits = 0  # requests that had to wait past WAIT_NOTICE_S (for tests and the record)

    @property
    def streams_open(self) -> int:
        return sum(len(v) for v in self.open.values())

    def held(self, kind: ChannelKind | None = None) -> str:
        """What holds the channels: "2 job streams open: ib_write_bw …, mpirun …" (or every kind)."""
        kinds: list[ChannelKind] = [kind] if kind else ["watch", "job"]
        parts = []
        for k in kinds:
            names = self.open[k]
            if names or kind:
                listed = f": {', '.join(short(n, 30) for n in names)}" if names and k == "job" else ""
                parts.append(f"{len(names)} {KIND_WORDS[k]} stream{'s' if len(names) != 1 else ''} open{listed}")
        if not kind:
            parts.append(f"{self.commands} command{'s' if self.commands != 1 else ''} running")
        return "; ".join(parts)

    async def _acquire(self, sem: asyncio.Semaphore, command: str, kind: ChannelKind | None,
                       limit: float | None) -> None:
        """Take ``sem``; past WAIT_NOTICE_S the wait is announced, past ``limit`` it is refused."""
        t0 = time.monotonic()
        if await _take(sem, WAIT_NOTICE_S):
            return
        self.waits += 1
        _tell(ChannelWait(self.station, short(command), "waiting", time.monotonic() - t0, self.held(kind)))
        left = None if limit is None else max(0.0, limit - (time.monotonic() - t0))
        if not await _take(sem, left):
            wait = ChannelWait(self.station, short(command), "refused", time.monotonic() - t0, self.held(kind))
            _tell(wait)
            raise SlotTimeout(wait)
        _tell(ChannelWait(self.station, short(command), "granted", time.monotonic() - t0, self.held(kind)))

    @contextlib.asynccontextmanager
    async def command(self, command: str) -> AsyncIterator[None]:
        """A channel for a one-shot command (it waits in the queue; commands always get one)."""
        await self._acquire(self._channels, command, None, None)
        self.commands += 1
        try:
            yield
        finally:
            self.commands -= 1
            self._channels.release()

    @contextlib.asynccontextmanager
    async def stream(self, command: str, kind: ChannelKind | None = None) -> AsyncIterator[None]:
        """A stream slot of ``kind`` (this context's by default), then a channel."""
        kind = kind or current_kind()
        slot = self._slots[kind]
        await self._acquire(slot, command, kind, self.slot_wait_s)
        try:
            await self._acquire(self._channels, command, None, None)
            self.open[kind].append(command)
            try:
                yield
            finally:
                self.open[kind].remove(command)
                self._channels.release()
        finally:
            slot.release()


async def _take(sem: asyncio.Semaphore, timeout: float | None) -> bool:
    """``sem`` within ``timeout`` (None: however long); never holds it after a cancel or a timeout.
    (Not ``asyncio.wait_for``: in Python 3.11 it can swallow a cancel that races the acquire.)"""
    if not sem.locked():
        await sem.acquire()  # (free: taken without suspending)
        return True
    taking = asyncio.ensure_future(sem.acquire())
    try:
        await asyncio.wait({taking}, timeout=timeout)
    except BaseException:
        _abandon(sem, taking)
        raise
    if taking.done():
        return True
    _abandon(sem, taking)
    return False


def _abandon(sem: asyncio.Semaphore, taking: asyncio.Future) -> None:
    """Give back what an abandoned acquire took, now or when it ends."""
    def give_back(f: asyncio.Future) -> None:
        if not f.cancelled() and f.exception() is None:
            sem.release()

    if taking.done():
        give_back(taking)
    else:
        taking.cancel()
        taking.add_done_callback(give_back)
