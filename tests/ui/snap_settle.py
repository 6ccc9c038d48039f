"""Settling a screen before its snapshot, so the picture cannot depend on the machine's speed.

A snapshot is taken once the screen has reached a state, never after a fixed pause: what a
timer would do later (the diagnosis redraw every 0.5 s, a toast, a blinking cursor) is done now
or switched off, so a slow CI runner and a fast laptop draw the same frame."""

from __future__ import annotations

from textual.widgets import Input


async def settle(pilot) -> None:
    """The timers' work done now, the toasts gone, no blinking cursor, no animation in flight."""
    app = pilot.app
    await pilot.pause()
    if hasattr(app, "refresh_diagnosis"):
        app.refresh_diagnosis()  # what the 0.5 s interval would draw (badges, the panel)
    await pilot.pause()
    app.clear_notifications()  # a toast comes and goes with the clock
    for inp in app.screen.query(Input):
        inp.cursor_blink = False
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
