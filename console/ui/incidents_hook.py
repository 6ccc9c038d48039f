"""The TUI's hooks into the flight recorder (console/incidents/): the app owns one recorder, the
progress judge's tick reaches it through the dashboard, its news are notices (an alert's delivery
among them: one that failed is an error notice), the bell rings on an incident with ``[alerts] bell =
true``, and the head's pane says the stalls."""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.incidents.recorder import IncidentRecorder, Notice

if TYPE_CHECKING:
    from textual.app import App

    from console.station.verdict import Judgement

SEVERITY = {"incident": "error", "capture-failed": "error", "error": "error", "captured": "warning",
            "skipped": "warning", "stall": "information", "ended": "information", "pruned": "information",
            "capturing": "information", "alert": "information", "alert-failed": "error",
            "recovering": "warning", "recover-waiting": "information",
            "recovered": "information", "recover-failed": "error", "recover-limit": "error",
            "recover-refused": "warning"}
TITLES = {"alert": "Alert", "alert-failed": "Alert not delivered"}
#: The head pane's badge per recovery word (the latest one stays until the next).
RECOVER_BADGE = {"recovering": "⟳ restarting", "recover-waiting": "⟳ restart waits", "recovered": "✓ recovered",
                 "recover-failed": "✗ recovery failed", "recover-limit": "⛔ recovery limit reached",
                 "recover-refused": "⛔ not restarted"}


def incident_recorder(app: App) -> IncidentRecorder:
    def say(n: Notice) -> None:
        if n.kind == "stall":  # the pane's badge says them; a toast for each would be noise
            return
        hint = " (I: incidents)" if n.kind in ("incident", "captured", "skipped") else ""
        app.notify(n.text + hint, title=TITLES.get(n.kind, "Incident"),
                   severity=SEVERITY.get(n.kind, "information"),  # type: ignore[arg-type]
                   timeout=12 if n.kind != "capturing" else 6, markup=False)

    def busy() -> str | None:  # the operator's launch / stop / restart, planned, confirmed or running
        from console.ui.screens.actions import action_in_progress

        w = action_in_progress(app)
        return None if w is None else (w.description or w.name or "an action")

    config = app.config  # type: ignore[attr-defined]
    # [alerts] bell = true: the terminal bell when an incident of a kind switched on opens
    alarm = (lambda kind: app.bell()) if config.alerts.bell else None
    return IncidentRecorder(config, app.stations, say, alarm=alarm,  # type: ignore[attr-defined]
                            read_only=getattr(app, "read_only", False), busy=busy,
                            log_source=lambda: getattr(app, "log_source", None))


def incidents_tick(screen, judged: Judgement, now: float) -> None:
    """The progress judge ticked: the recorder looks for incidents and stalls; the head's pane
    carries "3 stalls in the last hour, longest 14 s" while there are some."""
    rec: IncidentRecorder | None = getattr(screen.app, "incidents", None)
    if rec is None:
        return
    rec.tick(judged, now)
    head = screen.stations.head_name
    if head is not None and (pane := screen.panes.get(head)) is not None and rec.recover is not None \
            and rec.recover.last is not None:
        word, text = rec.recover.last
        badge = f"{RECOVER_BADGE.get(word, word)}: {text.partition(': ')[2] or text}"
        if pane.badges.get("recover") is None or pane.badges["recover"].plain != badge:
            pane.set_badge("recover", badge)
    if head is not None and (pane := screen.panes.get(head)) is not None:
        words = rec.stall_summary(now)
        if pane.badges.get("stalls") is None and words is None:
            return
        pane.set_badge("stalls", None if words is None else f"⏸ {words}")
