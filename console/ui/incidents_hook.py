"""The TUI's hooks into the flight recorder (console/incidents/): the app owns one recorder, the
dashboard's progress judge ticks it, its news are notices (an alert's delivery among them: one that
failed is an error notice), the bell rings on an incident with ``[alerts] bell = true``, and the head's
pane says the stalls."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.incidents.recorder import IncidentRecorder, Notice

if TYPE_CHECKING:
    from textual.app import App

SEVERITY = {"incident": "error", "capture-failed": "error", "error": "error", "captured": "warning",
            "skipped": "warning", "stall": "information", "ended": "information", "pruned": "information",
            "capturing": "information", "alert": "information", "alert-failed": "error"}
TITLES = {"alert": "Alert", "alert-failed": "Alert not delivered"}


def incident_recorder(app: App) -> IncidentRecorder:
    def say(n: Notice) -> None:
        if n.kind == "stall":  # the pane's badge says them; a toast for each would be noise
            return
        hint = " (I: incidents)" if n.kind in ("incident", "captured", "skipped") else ""
        app.notify(n.text + hint, title=TITLES.get(n.kind, "Incident"),
                   severity=SEVERITY.get(n.kind, "information"),  # type: ignore[arg-type]
                   timeout=12 if n.kind != "capturing" else 6, markup=False)

    config = app.config  # type: ignore[attr-defined]
    # [alerts] bell = true: the terminal bell when an incident of a kind switched on opens
    alarm = (lambda kind: app.bell()) if config.alerts.bell else None
    return IncidentRecorder(config, app.stations, say, alarm=alarm)  # type: ignore[attr-defined]


def incidents_tick(screen, verdicts, now: float) -> None:
    """The dashboard judged progress: the recorder looks for incidents and stalls; the head's pane
    carries "3 stalls in the last hour, longest 14 s" while there are some."""
    rec: IncidentRecorder | None = getattr(screen.app, "incidents", None)
    if rec is None:
        return
    rec.tick(verdicts, now)
    head = screen.stations.head_name
    if head is not None and (pane := screen.panes.get(head)) is not None:
        words = rec.stall_summary(now)
        if pane.badges.get("stalls") is None and words is None:
            return
        pane.set_badge("stalls", None if words is None else f"⏸ {words}")
