"""The TUI's hook into the unified-memory guard (console/station/memory_guard.py): the progress
judge's tick reaches it through the dashboard; a station under the MemAvailable floor during a
start-up gets a badge on its pane and a notice (and the alert call point), once when it falls under
and once when it is back."""

from __future__ import annotations

from console.incidents.alert_point import AlertEvent, outcome_alert
from console.sanitize import one_line
from console.station.memory_guard import MemoryGuard


def memory_guard_tick(screen, now: float) -> None:
    guard: MemoryGuard | None = getattr(screen, "memory_guard", None)
    if guard is None:
        guard = screen.memory_guard = MemoryGuard(screen.config)
    if not guard.on:
        return
    for ch in guard.step(screen.stations, now):
        pane = screen.panes.get(ch.station)
        if pane is not None:
            pane.set_badge("memory-floor", None if ch.low is None else f"⚠ {ch.low.text}")
        screen.app.notify(ch.text, title="Unified memory", severity="error" if ch.low else "information",
                          timeout=20 if ch.low else 8, markup=False)
        for line in outcome_alert(AlertEvent("memory-low" if ch.low else "memory-ok", ch.text, (ch.station,))):
            screen.app.notify(one_line(line, 300), severity="warning", markup=False)
