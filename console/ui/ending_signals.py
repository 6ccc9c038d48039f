"""The terminal went away (SIGHUP) or the process was told to end (SIGTERM) while the TUI runs.

The app then exits through Textual's own teardown: its input thread stops, the services close, and the
caller's ``finally`` runs (the demo stops its simulator). A Python-level handler that raised
``SystemExit`` wherever the signal landed skipped that teardown: Textual's input thread (not a daemon)
kept the process alive after its terminal was gone. A backstop ends the process if the teardown hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Iterator

from textual.app import App

ENDING_SIGNALS = (signal.SIGHUP, signal.SIGTERM)
BACKSTOP_S = 15.0  # the teardown's limit once a signal asked for it


def exit_on_ending_signals(app: App) -> None:
    """From the running app's loop: SIGHUP / SIGTERM exit the app (exit code 128 + the signal).
    Not in a headless app (a Pilot test): the test runner's signals stay its own."""
    if app.is_headless:
        return
    loop = asyncio.get_running_loop()
    for sig in ENDING_SIGNALS:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, _ended, app, sig)
    if _pending:  # one came while the app was starting (see handlers_kept)
        _ended(app, _pending[0])
        _pending.clear()


def _ended(app: App, sig: int) -> None:
    from console.remote.local import end_all

    end_all()  # no local station command (journalctl -k -f) outlives the console
    backstop = threading.Timer(BACKSTOP_S, os._exit, (128 + sig,))
    backstop.daemon = True
    backstop.start()
    _backstops.append(backstop)
    if getattr(app, "first_frame_shown", True):
        app.exit(return_code=128 + sig)
    else:  # an exit while the screen's widgets still mount removed them under their own on_mount (a query
        # that found nothing, reported as the app's crash, exit code 1): the app exits once its first frame
        # is up (ConsoleApp reads this after it)
        app.ending_signal = sig  # type: ignore[attr-defined]


_pending: list[int] = []  # ending signals received while the app started, before its loop took them
# the backstops started for this app: cancelled once ``app.run()`` returns, since the teardown they guard
# is over and the caller's own clean-up follows (the demo stops its simulator and removes its directory;
# under load a backstop counted from the signal ended the process in the middle of it, exit 143 with the
# directory left behind)
_backstops: list[threading.Timer] = []


def _remember(signum: int, _frame: object) -> None:
    _pending.append(signum)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Around ``app.run()``: while the app starts, an ending signal is remembered and ends the app once its
    loop takes the signals (on mount), through the teardown: a handler that raised ``SystemExit`` there
    landed inside Textual's start-up, which reported it as the app's crash (exit code 1; the demo's
    SIGTERM test saw it once the config's library checks moved after the first frame). Afterwards the
    loop's handlers are removed with the loop (to the default action, which ends the process at once);
    the Python-level handlers set before are put back instead, and a signal the app never took is
    handed to them."""
    previous = {sig: signal.getsignal(sig) for sig in ENDING_SIGNALS}
    _pending.clear()
    for sig in ENDING_SIGNALS:
        signal.signal(sig, _remember)
    try:
        yield
    finally:
        for backstop in _backstops:
            backstop.cancel()
        _backstops.clear()
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
        left, _pending[:] = list(_pending), []
        for sig in left[:1]:  # the app ended before it mounted: what would have happened without it
            signal.raise_signal(sig)
