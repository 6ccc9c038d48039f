"""What a cancelled caller left behind: the tasks started since a moment that are still there, the
simulated stations' own aside (their in-process sshd and API serve in the test's loop)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


def tasks_left(before: set[asyncio.Task]) -> list[str]:
    """Tasks started since ``before`` that have not ended, by name and coroutine (the simulator's left out)."""
    left = []
    for t in asyncio.all_tasks() - before:
        coro = t.get_coro()
        code = getattr(coro, "cr_code", None)
        if code is not None and "/console/sim/" in code.co_filename:
            continue
        left.append(f"{t.get_name()}: {getattr(coro, '__qualname__', coro)}")
    return left


async def cancel_when_under_way(work: Callable[[asyncio.Event], Awaitable[object]], limit: float = 60.0
                                ) -> list[str]:
    """Run ``work(under_way)`` as a task; once it sets ``under_way`` (commands in flight) cancel it, await its
    end (the ``CancelledError`` must propagate) and return the tasks it left."""
    before = asyncio.all_tasks()
    under_way = asyncio.Event()
    task = asyncio.ensure_future(work(under_way))
    waiter = asyncio.ensure_future(under_way.wait())
    try:
        await asyncio.wait({task, waiter}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    assert under_way.is_set() and not task.done(), "the work never got under way, or ended first"
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancel did not propagate")
    await asyncio.wait({waiter})
    return tasks_left(before)
