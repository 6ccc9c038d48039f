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


def _ended(app: App, sig: int) -> None:
    from console.remote.local import end_all

    end_all()  # no local station command (journalctl -k -f) outlives the console
    backstop = threading.Timer(BACKSTOP_S, os._exit, (128 + sig,))
    backstop.daemon = True
    backstop.start()
    app.exit(return_code=128 + sig)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """Around ``app.run()``: the loop's signal handlers are removed with the loop (to the default action,
    which ends the process at once); the Python-level handlers set before are put back instead."""
    previous = {sig: signal.getsignal(sig) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
