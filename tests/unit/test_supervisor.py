"""The supervisor of the long-lived jobs (console/supervisor.py): a job that raises is reported and
restarted with a backoff, a broken report never ends the supervision, ``stop`` cancels every job, waits
for its clean-up and closes it once, and a cancelled owner leaves no task behind."""

from __future__ import annotations

import asyncio

import pytest

from console.supervisor import HEALTHY_AFTER_S, JobFailure, Supervisor

FAST = 0.01  # the back-off table at a hundredth: 0.01, 0.02, 0.05 s


async def test_a_job_that_raises_is_reported_then_restarted_with_a_backoff():
    sup = Supervisor(scale=FAST)
    failures: list[JobFailure] = []
    runs = 0
    ran_again = asyncio.Event()

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs <= 2:
            raise RuntimeError(f"injected {runs}")
        ran_again.set()
        await asyncio.Event().wait()  # then runs until stopped

    job = sup.start("probe", work, on_failure=failures.append)
    try:
        await asyncio.wait_for(ran_again.wait(), 5)
        assert [f.reason for f in failures] == ["RuntimeError: injected 1", "RuntimeError: injected 2"]
        assert [f.retry_in_s for f in failures] == [0.01, 0.02] and [f.restarts for f in failures] == [1, 2]
        assert failures[0].job == "probe" and "RuntimeError: injected 1" in failures[0].traceback
        assert job.restarts == 2 and job.state == "running" and job.last_failure is failures[-1]
        assert sup["probe"] is job
    finally:
        await sup.stop()
    assert job.state == "stopped" and job.task is not None and job.task.cancelled()


async def test_a_report_that_raises_does_not_end_the_supervision():
    sup = Supervisor(scale=FAST)
    runs = 0
    third = asyncio.Event()

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            third.set()
            await asyncio.Event().wait()
        raise ValueError("again")

    def broken(_f: JobFailure) -> None:
        raise RuntimeError("the notice itself is broken")

    job = sup.start("probe", work, on_failure=broken)
    try:
        await asyncio.wait_for(third.wait(), 5)
        assert job.restarts == 2 and job.last_failure is not None and job.last_failure.reason == "ValueError: again"
    finally:
        await sup.stop()


async def test_stop_cancels_waits_for_the_clean_up_and_closes_once():
    sup = Supervisor(scale=FAST)
    started = asyncio.Event()
    cleaned: list[str] = []
    closed: list[str] = []

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.01)  # a clean-up that takes a while: stop waits for it
            cleaned.append("work")

    async def close() -> None:
        assert cleaned == ["work"]  # the job ended before its connection closes
        closed.append("closed")

    async def failing_close() -> None:
        raise OSError("a close that fails does not stop the others")

    sup.start("a", work, close=close)
    sup.start("b", lambda: asyncio.Event().wait(), close=failing_close)
    await asyncio.wait_for(started.wait(), 5)
    await sup.stop()
    await sup.stop()
    assert cleaned == ["work"] and closed == ["closed"]
    assert {j.state for j in sup.jobs.values()} == {"stopped"}


async def test_a_job_that_returns_is_done_and_not_restarted():
    sup = Supervisor(scale=FAST)
    runs = []

    async def once() -> None:
        runs.append(1)

    job = sup.start("once", once)
    await asyncio.wait_for(job.wait(), 5)
    assert runs == [1] and job.state == "done" and job.restarts == 0
    await sup.stop()
    assert job.state == "done"


async def test_one_name_one_running_job():
    async with Supervisor() as sup:
        sup.start("x", lambda: asyncio.Event().wait())
        with pytest.raises(ValueError, match="running already"):
            sup.start("x", lambda: asyncio.Event().wait())


async def test_the_backoff_starts_over_after_a_job_that_ran_a_while():
    now = [0.0]
    sup = Supervisor(scale=FAST, clock=lambda: now[0])
    failures: list[JobFailure] = []
    runs = 0
    done = asyncio.Event()

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs == 3:
            now[0] += HEALTHY_AFTER_S  # this run was a long, healthy one before it failed
        if runs == 4:
            done.set()
            await asyncio.Event().wait()
        raise RuntimeError("x")

    async with sup:
        sup.start("probe", work, on_failure=failures.append)
        await asyncio.wait_for(done.wait(), 5)
    assert [f.retry_in_s for f in failures] == [0.01, 0.02, 0.01]


async def test_a_cancelled_owner_leaves_no_task_behind():
    before = asyncio.all_tasks()
    started = asyncio.Event()

    async def owner() -> None:
        async with Supervisor(scale=FAST) as sup:
            sup.start("a", lambda: asyncio.Event().wait())
            sup.start("b", lambda: asyncio.sleep(3600))
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(owner())
    await asyncio.wait_for(started.wait(), 5)
    assert len(asyncio.all_tasks() - before) == 3  # the owner and its two jobs
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() - before == set()
