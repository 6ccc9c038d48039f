"""Waiting for a condition: the suite's one polling helper.

A test never sleeps and then asserts: it waits for the state it is about to assert, under a deadline,
so a slow machine only makes it slower and a condition that never comes is a failure that says what
it waited for and what it saw (pytest-timeout stays the last resort, for a hang outside a wait).

Between polls: ``pilot.pause`` when a Textual pilot is given (the app handles its messages and
refreshes, so the condition can change), else the ``wake`` event (set by whoever produces the
state: the wait ends as soon as something arrives), else a short sleep."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_S = 0.05


async def until(cond: Callable[[], T | Awaitable[T]], *, what: str, timeout: float = 30.0, pilot: Any = None,
                wake: asyncio.Event | None = None, detail: Callable[[], object] | None = None) -> T:
    """Wait until ``cond()`` (sync or async) is truthy and return what it returned.

    On timeout: AssertionError naming ``what``, with ``detail()`` (what was seen instead) when given."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if wake is not None:
            wake.clear()  # before the check: a state that arrives after it wakes the wait below
        got = cond()
        if inspect.isawaitable(got):
            got = await got
        if got:
            return got
        left = deadline - loop.time()
        if left <= 0:
            seen = f"; seen: {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}{seen}")
        if pilot is not None:
            await pilot.pause(min(POLL_S, left))
        elif wake is not None:
            try:
                await asyncio.wait_for(wake.wait(), left)
            except TimeoutError:
                pass
        else:
            await asyncio.sleep(min(POLL_S, left))
