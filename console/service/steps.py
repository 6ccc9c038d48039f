"""What an action produces and how it is steered: its steps, events and result, the failure that ends
it, the operator's cancel, and the step log every part of a run writes to.

Kept apart from the parts that do the work (plan, gates, run, follow, verify) so each of them records
steps the same way and the screens and the CLI read one shape: ``launch|stop|restart --json`` is
``ActionResult.to_json()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from console.probes.engine_log import TIMELINE_LABELS, TimelineEvent
from console.remote.transport import TransportError
from console.vocabulary import ActionOutcome, NcclTransport, StepStatus

if TYPE_CHECKING:
    from console.service.fit_inputs import FitReport
    from console.service.stop_verify import StopVerdict

ActionName = Literal["launch", "stop", "restart"]
OnCancel = Literal["stop", "keep"]  # what a cancelled start does with the containers it started


class ActionFailed(Exception):
    def __init__(self, detail: str, evidence: list[tuple[str, str]] | None = None, service_up: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.evidence = evidence or []
        self.service_up = service_up  # the service runs (e.g. on sockets): never stopped for this


class ReadOnlyError(Exception):
    """Actions are disabled (--read-only)."""


def require_writable(read_only: bool) -> None:
    if read_only:
        raise ReadOnlyError("read-only mode: launch, stop and restart are disabled (--read-only)")


def iso(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class Step:
    station: str  # a station name, or "all"
    action: str
    status: StepStatus = StepStatus.RUNNING
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"station": self.station, "action": self.action, "status": self.status,
                "started_at": iso(self.started_at), "finished_at": iso(self.finished_at),
                "detail": self.detail}


@dataclass
class ActionEvent:
    kind: str  # step | log | note | timeline
    station: str
    text: str
    step: Step | None = None
    timeline: TimelineEvent | None = None


@dataclass
class ActionResult:
    action: str
    steps: list[Step] = field(default_factory=list)
    result: ActionOutcome = ActionOutcome.OK
    transport: NcclTransport = NcclTransport.UNKNOWN
    summary: str = ""
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (station, line)
    timeline: dict[str, list[TimelineEvent]] = field(default_factory=dict)
    verified: dict[str, StopVerdict] = field(default_factory=dict)
    fit: FitReport | None = None
    notes: list[str] = field(default_factory=list)  # timeline vs last launches, estimate vs logged KV

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": [s.to_json() for s in self.steps], "result": self.result,
                               "transport": self.transport}
        if self.action in ("launch", "restart"):
            out["timeline"] = {n: [e.to_json() for e in evs] for n, evs in self.timeline.items()}
        if self.action in ("stop", "restart") or self.verified:
            out["verified"] = {n: v.to_json() for n, v in self.verified.items()}
        return out

    @property
    def exit_code(self) -> int:
        return 0 if self.result == ActionOutcome.OK else 1


FailureDecision = bool | Callable[[ActionResult], Awaitable[bool] | bool]


def first_line(text: object) -> str:
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    return lines[0][:200] if lines else ""


def last_line(text: str) -> str:
    """The last non-empty line of a command's output (what an error message quotes)."""
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


def and_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def timeline_text(ev: TimelineEvent) -> str:
    return TIMELINE_LABELS.get(ev.event, ev.event) + (f": {ev.detail}" if ev.detail else "")


class ActionCancelled(BaseException):
    """The operator cancelled the action (``CancelToken``): raised at the next step or wake-up so the
    clean-up can run, and turned into the ``cancelled`` result by the action's guard. A
    ``BaseException`` like ``CancelledError``, so no ``except Exception`` on the way swallows it; it
    is not ``CancelledError``, so a real cancel of the task is never mistaken for it (and never
    swallowed: console/tasks.py)."""


class CancelToken:
    """The operator's cancel (Ctrl+C, ``c`` in the TUI), held by whoever started the action.

    ``request()``: a flag checked at every step and every wake-up of a wait (the waits are woken at
    once); ``check()`` raises ``ActionCancelled`` once, so the clean-up that follows can run.
    ``request(hard=True)`` (a second Ctrl+C) also ends the command in flight: the action's body runs
    as a child task of its guard, which cancels it (``hard`` is the event it waits on)."""

    def __init__(self) -> None:
        self.requested = False
        self.hard = asyncio.Event()
        self._raised = False
        self._wakers: list[Callable[[], None]] = []

    def on_request(self, wake: Callable[[], None]) -> None:
        self._wakers.append(wake)

    def request(self, hard: bool = False) -> bool:
        self.requested = True
        for wake in self._wakers:
            wake()
        if hard:
            self.hard.set()
        return True

    def check(self) -> None:
        if self.requested and not self._raised:
            self._raised = True  # once: the clean-up that follows must run
            raise ActionCancelled()


class StepLog:
    """The steps and timeline events of one run, told to ``on_event`` as they happen.

    ``res`` is the result being built (``begin`` starts the next one and keeps the steps already
    taken, e.g. a plan's resolve steps before its launch)."""

    def __init__(self, on_event: Callable[[ActionEvent], None], cancel: CancelToken):
        self.on_event = on_event
        self.cancel = cancel
        self.res = ActionResult("none")
        self.events: dict[str, list[TimelineEvent]] = {}  # events not from a log (container, port, health, token)

    def begin(self, action: str) -> ActionResult:
        self.res = ActionResult(action, steps=list(self.res.steps))
        return self.res

    def emit(self, ev: ActionEvent) -> None:
        with contextlib.suppress(Exception):
            self.on_event(ev)

    def note(self, station: str, text: str) -> None:
        self.emit(ActionEvent("note", station, text))

    @contextlib.asynccontextmanager
    async def step(self, station: str, action: str) -> AsyncIterator[Step]:
        self.cancel.check()
        st = Step(station, action)
        self.res.steps.append(st)
        self.emit(ActionEvent("step", station, f"{action}...", st))
        try:
            yield st
        except ActionFailed as exc:
            st.status, st.detail = StepStatus.FAILED, st.detail or exc.detail
            raise
        except (ActionCancelled, asyncio.CancelledError):
            st.status, st.detail = StepStatus.CANCELLED, st.detail or "cancelled by the operator"
            raise
        except TransportError as exc:
            st.status, st.detail = StepStatus.FAILED, str(exc)
            raise ActionFailed(str(exc)) from None
        else:
            if st.status == StepStatus.RUNNING:
                st.status = StepStatus.OK
        finally:
            st.finished_at = time.time()
            self.emit(ActionEvent("step", station, f"{action}: {st.status}"
                                  + (f" ({st.detail})" if st.detail else ""), st))

    def skip(self, station: str, action: str, detail: str) -> None:
        now = time.time()
        st = Step(station, action, StepStatus.SKIPPED, now, now, detail)
        self.res.steps.append(st)
        self.emit(ActionEvent("step", station, f"{action}: skipped ({detail})", st))

    def record(self, station: str, event: str, at: float | None = None, detail: str = "",
               values: tuple[tuple[str, float], ...] = ()) -> TimelineEvent:
        """A timeline event the console saw itself (container started, port open, health, first token)."""
        ev = TimelineEvent(event, time.time() if at is None else at, detail, values)
        self.events.setdefault(station, []).append(ev)
        self.emit(ActionEvent("timeline", station, timeline_text(ev), timeline=ev))
        return ev
