"""The one call point between what the console did or saw on its own and the alerts that leave it.

The recovery (``recover.py``: recovered / failed / limit reached / refused) and the unified-memory
guard (``station/memory_guard.py``: the MemAvailable floor crossed during a start-up) call
``outcome_alert(event)``; whatever sends alerts (a webhook, ntfy, the desktop, the bell) appends a
hook to ``ALERT_HOOKS``. A hook must not block (it queues and returns); one that raises is reported
back as a line for the caller to say, never swallowed and never fatal to the caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

AlertKind = Literal["recovered", "recover-failed", "recover-limit", "recover-refused", "memory-low",
                    "memory-ok"]


@dataclass(frozen=True)
class AlertEvent:
    """One thing to tell someone away from the desk (the text is already one clean line)."""

    kind: AlertKind
    text: str
    stations: tuple[str, ...]
    incident: int | None = None
    bundle: str | None = None
    seconds: float | None = None
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "stations": list(self.stations), "incident": self.incident,
                "bundle": self.bundle, "seconds": self.seconds, "t": round(self.at, 3)}


AlertHook = Callable[[AlertEvent], None]
#: Senders connected by the alerts module (none: the event is on screen and in the ledger only).
ALERT_HOOKS: list[AlertHook] = []


def outcome_alert(event: AlertEvent, hooks: list[AlertHook] | None = None) -> list[str]:
    """Hand ``event`` to every hook; the lines of those that failed (empty: all took it)."""
    failed: list[str] = []
    for hook in list(ALERT_HOOKS if hooks is None else hooks):
        try:
            hook(event)
        except Exception as exc:  # noqa: BLE001 - a broken sender is said by the caller, never fatal here
            failed.append(f"alert hook {getattr(hook, '__name__', type(hook).__name__)} failed: "
                          f"{type(exc).__name__}: {exc}")
    return failed
