"""The one back-off table of the long-lived loops (console/supervisor.py): it grows and stops at its
cap, a long run starts it over, a refused login waits longer, and each loop waits by it."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from console.config import parse_config
from console.incidents import sinks
from console.probes.docker import ContainerInfo
from console.remote.transport import AuthRefused, CommandResult, Unreachable
from console.station import log_sources, monitor
from console.station.log_sources import HeadlessLogs
from console.station.logstream import LogEnded, LogInterrupted, LogStream
from console.station.messages import ConnectionState
from console.station.monitor import StationService
from console.supervisor import (
    AUTH_SLOWER,
    HEALTHY_AFTER_S,
    RESTART_DELAYS_S,
    Backoff,
    JobFailure,
    Supervisor,
    restart_delay,
)
from console.vocabulary import ContainerState


def test_the_table_grows_then_stays_at_its_cap():
    waits = [restart_delay(n) for n in range(1, 10)]
    assert waits[:6] == [1.0, 2.0, 5.0, 10.0, 20.0, 30.0]
    assert waits == sorted(waits) and set(waits[5:]) == {RESTART_DELAYS_S[-1]}
    assert restart_delay(0) == restart_delay(-3) == 1.0  # no failure yet counts as the first


def test_scale_and_a_lower_cap():
    assert [restart_delay(n, 0.01) for n in (1, 2, 3)] == pytest.approx([0.01, 0.02, 0.05])
    assert [restart_delay(n, cap_s=10) for n in (3, 4, 5, 9)] == [5.0, 10.0, 10.0, 10.0]
    assert restart_delay(9, 2.0, cap_s=10) == 20.0  # the cap is the table's, before the scale


def test_a_refused_login_waits_longer():
    assert AUTH_SLOWER == 2.0
    for n in range(1, 8):
        assert restart_delay(n, auth=True) == AUTH_SLOWER * restart_delay(n) > restart_delay(n)
    auth, plain = Backoff(auth=True), Backoff()
    assert [auth.failed(0) for _ in range(3)] == [2.0, 4.0, 10.0]
    assert [plain.failed(0) for _ in range(3)] == [1.0, 2.0, 5.0]


def test_backoff_counts_failures_in_a_row_and_a_long_run_starts_it_over():
    b = Backoff()
    assert [b.failed(1.0) for _ in range(7)] == [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 30.0]
    assert b.failed(HEALTHY_AFTER_S) == 1.0  # that run was a healthy one: its failure is a first
    assert b.failed(HEALTHY_AFTER_S - 1) == 2.0
    b.reset()
    assert b.failures == 0 and b.failed(0) == 1.0


def test_backoff_with_its_own_healthy_run_and_cap():
    b = Backoff(healthy_after_s=5, cap_s=10)
    assert [b.failed(0.1) for _ in range(5)] == [1.0, 2.0, 5.0, 10.0, 10.0]
    assert b.failed(5.0) == 1.0


# ------------------------------------------------------------------ each loop waits by the table

class Stop(Exception):
    """Ends a loop under test once it has waited enough times."""


def recorder(waits: list[float], most: int):
    """An async sleep that writes down each wait and ends the loop after ``most`` of them."""
    async def sleep(delay: float, *_a, **_kw) -> bool:
        waits.append(delay)
        if len(waits) >= most:
            raise Stop
        return False
    return sleep


async def test_the_supervisor_restarts_a_job_by_the_table():
    sup = Supervisor(scale=0.01)
    failures: list[JobFailure] = []
    four = asyncio.Event()

    async def work() -> None:
        if len(failures) >= 4:
            four.set()
            await asyncio.Event().wait()
        raise RuntimeError("x")

    async with sup:
        sup.start("j", work, on_failure=failures.append)
        await asyncio.wait_for(four.wait(), 5)
    assert [f.retry_in_s for f in failures] == [restart_delay(n, 0.01) for n in (1, 2, 3, 4)]


def station_service(transport) -> tuple[StationService, list]:
    posted: list = []
    cfg = parse_config('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n', "x.toml")
    return StationService(cfg, cfg.stations[0], posted.append, transport=transport), posted


class Refusing:
    """A station whose every command fails with ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def run(self, *a, **kw):
        raise self.exc

    def stream(self, *a, **kw):  # pragma: no cover - the connection never gets that far
        raise self.exc

    async def close(self) -> None:
        pass


async def test_a_station_refusing_the_login_waits_by_the_table_doubled_until_it_is_live():
    svc, posted = station_service(Refusing(AuthRefused("A: permission denied (publickey)")))
    waits: list[float] = []
    sleep = recorder(waits, 4)

    async def pause(delay: float) -> bool:
        if len(waits) == 2:  # it came back during the third wait: a live station starts the count over
            svc._gpu_answered, svc._beat = True, time.monotonic()
            svc._gpu_beat = svc._beat
            svc._judge()
            assert svc.state == "live"
        return await sleep(delay)

    svc._sleep = pause  # type: ignore[method-assign]
    with pytest.raises(Stop):
        await svc.run()
    assert waits == [2.0, 4.0, 10.0, 2.0]
    states = [m for m in posted if isinstance(m, ConnectionState) and m.next_try_at is not None]
    assert states and all(m.state == "unreachable" and "permission denied" in m.detail for m in states)


async def test_an_unexpected_error_in_a_station_is_an_error_state_retried_by_the_table():
    svc, posted = station_service(Refusing(RuntimeError("nobody expected this")))
    waits: list[float] = []
    svc._sleep = recorder(waits, 4)  # type: ignore[method-assign]
    with pytest.raises(Stop):
        await svc.run()
    assert waits == [1.0, 2.0, 5.0, 10.0] and svc.restarts == 4
    assert svc.state == "error" and "RuntimeError: nobody expected this" in svc.detail


async def test_a_stream_that_keeps_ending_is_restarted_by_the_table_or_each_second_while_fast(monkeypatch):
    svc, _ = station_service(Refusing(RuntimeError("unused")))
    ends = 0

    async def ends_at_once() -> None:
        nonlocal ends
        ends += 1

    waits: list[float] = []
    monkeypatch.setattr(monitor.asyncio, "sleep", recorder(waits, 7))
    with pytest.raises(Stop):
        await svc.forever(ends_at_once)
    assert waits == [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 30.0] and ends == 7
    waits.clear()
    with pytest.raises(Stop):
        await svc._forever(ends_at_once, fast=lambda: True)
    assert waits == [1.0] * 7  # a tool answering only with an error: asked again each GPU_PROBE_S


RUN = ContainerInfo("glm53", ContainerState.EXITED, started_at="2026-12-01T07:17:10.000000000Z")


class Flaky:
    """A station whose commands fail until ``fails`` of them have; then docker says the run exited."""

    def __init__(self, station, fails: int) -> None:
        self.station, self.fails = station, fails
        self.calls = 0

    async def run(self, command: str, timeout=None, input=None) -> CommandResult:
        self.calls += 1
        if self.calls <= self.fails:
            raise Unreachable("A: connection lost")
        if command.startswith("docker inspect"):
            state = json.dumps({"Status": "exited", "StartedAt": RUN.started_at, "ExitCode": 1})
            return CommandResult(0, f"{state}|img|sha256:1\n", "")
        return CommandResult(0, "", "")

    def stream(self, command: str):  # pragma: no cover - the container does not run
        raise AssertionError(command)


async def test_a_headless_stream_whose_read_failed_says_so_then_reads_again_by_the_table(monkeypatch):
    """A failed catch-up read was swallowed without a word: now every subscriber reads a
    ``LogInterrupted`` with the reason (once per failure), and the stream is opened again after the
    table's wait, capped low (a launch is waiting on it)."""
    spies: list[Backoff] = []
    waits: list[float] = []

    class Spy(Backoff):
        def __init__(self, *a, **kw) -> None:
            super().__init__(*a, **kw)
            self.scale = 0.01  # (fast)
            spies.append(self)

        def failed(self, ran_s: float) -> float:
            waits.append(delay := super().failed(ran_s))
            return delay

    monkeypatch.setattr(log_sources, "Backoff", Spy)
    station = parse_config('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n', "x.toml").stations[0]
    flaky = Flaky(station, fails=3)
    logs = HeadlessLogs({"A": flaky})  # type: ignore[dict-item]
    sub = logs(station, RUN, 0.0)
    items: list = []
    try:
        async def read() -> None:
            async for item in sub:
                items.append(item)
                if isinstance(item, LogEnded):
                    return
        await asyncio.wait_for(read(), 10)
    finally:
        await logs.close()
    cuts = [i for i in items if isinstance(i, LogInterrupted)]
    assert [c.reason for c in cuts] == ["Unreachable: A: connection lost"] * 3
    assert isinstance(items[-1], LogEnded)  # read again, to the run's end
    (spy,) = spies
    assert spy.healthy_after_s == log_sources.HEADLESS_HEALTHY_S and spy.cap_s == log_sources.HEADLESS_CAP_S
    assert waits == pytest.approx([0.01, 0.02, 0.05])


async def test_a_cut_follow_is_told_once_not_again_by_the_loop_that_reopens_it():
    station = parse_config('[[stations]]\nname = "A"\nhost = "127.0.0.1"\nrank = 0\n', "x.toml").stations[0]
    s = LogStream(station, Refusing(RuntimeError("unused")), 100)  # type: ignore[arg-type]
    sub = s.subscribe()
    exc = Unreachable("A: connection lost")
    s.begin_read()
    s.cut(exc)  # the follow saw it ...
    s.cut(exc)  # ... and the loop that opens it again
    s.begin_read()
    s.cut(Unreachable("A: lost again"))  # a later read, a new cut
    assert [i.reason for i in sub.drain() if isinstance(i, LogInterrupted)] == [
        "Unreachable: A: connection lost", "Unreachable: A: lost again"]


async def test_an_alert_delivery_retries_by_the_table_at_its_scale(monkeypatch):
    asked: list[tuple[int, float]] = []

    def spy(failures: int, scale: float = 1.0, **kw) -> float:
        asked.append((failures, scale))
        return restart_delay(failures, scale, **kw)

    monkeypatch.setattr(sinks, "restart_delay", spy)
    out = await sinks.post("webhook", "http://127.0.0.1:9/", b"{}", {}, timeout_s=2, retries=3, backoff_s=0.001,
                           mask=lambda s: s)
    assert out.status == "failed" and out.attempts == 4
    assert asked == [(1, 0.001), (2, 0.001), (3, 0.001)]
