"""The one owner of a process's long-lived jobs: the TUI's and ``watch``'s services.

A job is a named asyncio task that runs until it is stopped. It never dies silently: when it raises
an unexpected exception the supervisor records the failure, tells the job's ``on_failure`` (its
owner turns that into what the operator sees: a station's ``error`` state, a notice), waits (1, 2,
5, ... 30 s; from 1 s again once the job had run a while) and runs it again.

That wait is the one back-off table of every long-lived loop (``restart_delay``, ``Backoff``): the
supervisor's jobs, a station's connection and streams (console/station/monitor.py), a headless log
stream (console/station/logstream.py) and an alert's delivery (console/incidents/sinks.py). A fixed
re-ask interval (a tool that ended, a probe while a station is down) is no back-off and stays its own. ``CancelledError``
always propagates (console/tasks.py): ``stop()`` cancels every job, waits for its clean-up, then
runs each job's ``close`` (a station service closes its connection). The app and ``watch`` start
and stop the station services through it the same way (console/station/services.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from console.sanitize import one_line
from console.tasks import cancel_and_wait

RESTART_DELAYS_S = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0)  # the wait after the 1st, 2nd, ... failure in a row
HEALTHY_AFTER_S = 60.0  # a job that ran this long before it failed starts its backoff over
AUTH_SLOWER = 2.0  # a refused login waits this much longer: quick retries only add refusals (and lockouts)

JobState = Literal["running", "restarting", "done", "stopped"]
Work = Callable[[], Awaitable[None]]


def restart_delay(failures: int, scale: float = 1.0, *, auth: bool = False,
                  cap_s: float = RESTART_DELAYS_S[-1]) -> float:
    """Seconds to wait after ``failures`` failures in a row (1: the first; less counts as 1): the
    table's step, at most ``cap_s`` (a loop someone waits on may cap it lower), times ``scale`` (a
    sink's configured base, a fast test), times ``AUTH_SLOWER`` after a refused login."""
    step = RESTART_DELAYS_S[min(max(failures, 1), len(RESTART_DELAYS_S)) - 1]
    return min(step, cap_s) * scale * (AUTH_SLOWER if auth else 1.0)


class Backoff:
    """One loop's failures in a row and the wait each earns (``restart_delay``). A run that lasted
    ``healthy_after_s`` was a healthy one: the failure that ended it counts as the first again, so
    a loop that fails once a day never waits the cap."""

    def __init__(self, scale: float = 1.0, *, auth: bool = False, healthy_after_s: float = HEALTHY_AFTER_S,
                 cap_s: float = RESTART_DELAYS_S[-1]) -> None:
        self.scale, self.auth, self.healthy_after_s, self.cap_s = scale, auth, healthy_after_s, cap_s
        self.failures = 0

    def failed(self, ran_s: float) -> float:
        """A run that lasted ``ran_s`` failed: the seconds to wait before the next."""
        if ran_s >= self.healthy_after_s:
            self.failures = 0
        self.failures += 1
        return restart_delay(self.failures, self.scale, auth=self.auth, cap_s=self.cap_s)

    def reset(self) -> None:
        """The loop is known healthy again (a station went live): the next failure is a first."""
        self.failures = 0


@dataclass(frozen=True)
class JobFailure:
    """A job's unexpected exception, as its owner shows it."""

    job: str
    error: Exception
    restarts: int  # the restarts of this job so far, the coming one included
    retry_in_s: float
    traceback: str

    @property
    def reason(self) -> str:
        """``RuntimeError: what it said`` on one line (remote text in it is sanitized)."""
        return one_line(f"{type(self.error).__name__}: {self.error}", 300)


class Job:
    """One supervised job: its name, state, restarts and last failure (what a bug report needs)."""

    def __init__(self, name: str, work: Work, on_failure: Callable[[JobFailure], object] | None,
                 close: Callable[[], Awaitable[object]] | None) -> None:
        self.name = name
        self.work, self.on_failure, self.close = work, on_failure, close
        self.state: JobState = "running"
        self.restarts = 0
        self.last_failure: JobFailure | None = None
        self.task: asyncio.Task | None = None

    async def wait(self) -> None:
        """Until the job has ended (by itself, or stopped); a cancel of the waiter propagates."""
        if self.task is not None:
            await asyncio.wait({self.task})


class Supervisor:
    """Starts named jobs, restarts a failed one, stops them all (``async with`` stops on exit)."""

    def __init__(self, scale: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        """``scale``: of the back-off table (a test runs it fast)."""
        self.scale, self.clock = scale, clock
        self.jobs: dict[str, Job] = {}

    def start(self, name: str, work: Work, *, on_failure: Callable[[JobFailure], object] | None = None,
              close: Callable[[], Awaitable[object]] | None = None) -> Job:
        """Run ``work()`` as the job ``name`` (unique while it runs) until ``stop``; ``work`` is
        called again for each restart."""
        old = self.jobs.get(name)
        if old is not None and old.task is not None and not old.task.done():
            raise ValueError(f"a job named {name!r} is running already")
        job = Job(name, work, on_failure, close)
        job.task = asyncio.create_task(self._keep(job), name=name)
        self.jobs[name] = job
        return job

    def __getitem__(self, name: str) -> Job:
        return self.jobs[name]

    async def _keep(self, job: Job) -> None:
        backoff = Backoff(self.scale)
        while True:
            job.state = "running"
            began = self.clock()
            try:
                await job.work()
            except asyncio.CancelledError:
                job.state = "stopped"
                raise
            except Exception as exc:  # a bug or an output nobody expected: told, then a restart
                delay = backoff.failed(self.clock() - began)
                job.restarts += 1
                job.state = "restarting"
                job.last_failure = JobFailure(job.name, exc, job.restarts, delay, traceback.format_exc())
                if job.on_failure is not None:
                    with contextlib.suppress(Exception):  # a broken notice must not end the supervision
                        job.on_failure(job.last_failure)
                await asyncio.sleep(delay)
            else:
                job.state = "done"
                return

    async def stop(self) -> None:
        """Cancel every job and wait for its clean-up, then close them (each close's error is kept
        from the others)."""
        jobs = list(self.jobs.values())
        await cancel_and_wait([j.task for j in jobs if j.task is not None])
        closers = [j.close for j in jobs if j.close is not None]
        for j in jobs:
            j.close = None  # closed once, however often stop is called
            if j.state != "done":
                j.state = "stopped"
        await asyncio.gather(*(close() for close in closers), return_exceptions=True)

    async def __aenter__(self) -> Supervisor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
