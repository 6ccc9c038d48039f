"""The console's one cancellation rule, as code.

``CancelledError`` always propagates: a coroutine catches it only to clean up, then re-raises
(never ``uncancel()``, never "return a partial result instead"). To end work early and keep what
it did, the owner does not cancel *itself*: it asks for a stop (an ``asyncio.Event``), and the
work runs as a *child* task that the owner cancels and awaits. A ``CancelledError`` from awaiting
that child, while the owner itself is not being cancelled, is the child's end, not the owner's.
``stoppable`` is that pattern; ``cancel_and_wait`` ends tasks one owns, for sure; ``gather_owned`` is a
gather that never leaves a child behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


async def cancel_and_wait(tasks: list[asyncio.Task], tries: int = 20) -> None:
    """Cancel tasks and wait for them, cancelling again while one is left: in Python 3.11
    ``asyncio.wait_for`` can swallow a cancellation that races its inner future (gh-86296), and a
    task that survived one cancel must not keep the console (or a test) waiting forever."""
    pending = {t for t in tasks if not t.done()}
    for _ in range(tries):
        if not pending:
            break
        for t in pending:
            t.cancel()
        _, pending = await asyncio.wait(pending, timeout=0.5)
    for t in tasks:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: never "exception was never retrieved" at exit


async def gather_owned(*aws: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather`` whose children never outlive it. A plain gather returns on the first failure
    and leaves the others running, unowned: their own failure is then never retrieved, or surfaces as
    "unhandled exception during asyncio.run() shutdown" (``status`` with a short command timeout). Here
    the first failure (or a cancel) cancels the rest and waits for them, then propagates."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return await asyncio.gather(*tasks)
    except BaseException:
        await asyncio.shield(cancel_and_wait(tasks))
        raise


def being_cancelled() -> bool:
    """True when the current task has been asked to cancel (its own cancel must propagate)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def stoppable(work: Coroutine[Any, Any, T], stop: asyncio.Event | None, *,
                    name: str | None = None) -> tuple[T | None, bool]:
    """Run ``work`` as a child task until it ends or ``stop`` is set: ``(result, False)``, or
    ``(None, True)`` once the child was cancelled because of the stop (and awaited: its clean-up
    ran). The caller's own cancellation cancels the child, waits for it, and propagates."""
    child = asyncio.ensure_future(work)
    if name:
        child.set_name(name)
    if stop is None:
        stop = asyncio.Event()
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({child, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await cancel_and_wait([child, waiter])
        raise
    waiter.cancel()
    if child.done():
        return child.result(), False  # its own exception, if any, is the caller's
    await cancel_and_wait([child])
    if being_cancelled():  # (a cancel that arrived while we waited for the child's clean-up)
        raise asyncio.CancelledError
    if not child.cancelled() and child.exception() is None:  # it finished just before the cancel
        return child.result(), False
    if not child.cancelled():
        raise child.exception()  # type: ignore[misc]
    return None, True


@contextlib.contextmanager
def on_signal(callback: Callable[[], object], sig: int = signal.SIGINT) -> Iterator[None]:
    """Call ``callback`` on ``sig`` while the block runs (where the loop supports signal handlers)."""
    loop = asyncio.get_running_loop()
    installed = False
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(sig, callback)
        installed = True
    try:
        yield
    finally:
        if installed:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
