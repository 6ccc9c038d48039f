"""The one cancellation rule (console/tasks.py): a stop ends the child and keeps the caller going;
a cancel of the caller always propagates, after the child's clean-up ran."""

import asyncio

import pytest

from console.tasks import cancel_and_wait, gather_owned, stoppable


async def test_work_that_ends_returns_its_result():
    async def work():
        return 42

    assert await stoppable(work(), asyncio.Event()) == (42, False)


async def test_a_stop_cancels_the_child_and_waits_for_its_clean_up():
    stop, cleaned, started = asyncio.Event(), [], asyncio.Event()

    async def work():
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            await asyncio.sleep(0.01)  # clean-up that awaits
            cleaned.append(True)

    async def press_stop():  # while the work runs
        await started.wait()
        stop.set()

    asyncio.get_running_loop().create_task(press_stop())
    assert await stoppable(work(), stop) == (None, True)
    assert cleaned == [True]
    assert asyncio.current_task().cancelling() == 0  # the caller was never cancelled


async def test_the_callers_cancel_propagates_after_the_childs_clean_up():
    cleaned, started = [], asyncio.Event()

    async def work():
        started.set()
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(True)

    outer = asyncio.create_task(stoppable(work(), asyncio.Event()))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert cleaned == [True]


async def test_the_childs_error_is_the_callers():
    async def work():
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        await stoppable(work(), None)


async def test_cancel_and_wait_retries_a_task_that_survives_one_cancel():
    async def stubborn():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(30)  # swallows the first cancel (as a racing wait_for can)

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await cancel_and_wait([task])
    assert task.done()


async def test_gather_owned_ends_and_awaits_the_others_when_one_fails():
    """A plain gather returns on the first failure and leaves its other children running
    (``status`` ended with "unhandled exception during asyncio.run() shutdown")."""
    ended: list[str] = []

    async def fails() -> None:
        await asyncio.sleep(0.01)
        raise ValueError("first")

    async def slow(name: str) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append(name)

    before = asyncio.all_tasks()
    try:
        await gather_owned(slow("a"), fails(), slow("b"))
        raise AssertionError("expected the failure")
    except ValueError as exc:
        assert str(exc) == "first"
    assert sorted(ended) == ["a", "b"]  # ended and awaited before the failure propagated
    assert not [t for t in asyncio.all_tasks() - before if not t.done()]
    assert await gather_owned(asyncio.sleep(0, "x"), asyncio.sleep(0, "y")) == ["x", "y"]
