"""The flight recorder of one console: the TUI and headless ``watch`` each own one.

Two one-line hooks feed it: ``note(msg)`` after every station message is applied (the window), and
``tick(judged, now)`` on every progress judgement (the detector). Its job (``run``, supervised
like every long-lived job) writes the ledger, takes the capture of an incident this console owns
(once per incident; another console that owns it makes this one say it skipped), records the
stalls and prunes the bundles. Every ledger write runs in a thread (SQLite may wait on the other
console's lock); the capture is a task of its own (the evidence's reads are bounded), so a stall or
an incident's end is written while a capture runs. What happened is told through ``say(Notice)``:
the TUI notifies, ``watch --json`` prints a line.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from console.config import Config
from console.incidents import capture as cap
from console.incidents.alert_point import ALERT_HOOKS, AlertEvent
from console.incidents.alerts import Alerter
from console.incidents.conditions import ConditionDetector
from console.incidents.detector import INCIDENT_KINDS, Closed, Detector, Event, Opened, StallSeen, Widened
from console.incidents.recover import Recoverer
from console.incidents.store import Ledger, LedgerError, Stall
from console.incidents.window import Window
from console.sanitize import one_line
from console.station.state import Stations
from console.station.verdict import Judgement
from console.vocabulary import ContainerState

STALL_SUMMARY_S = 3600.0
NoticeKind = Literal["incident", "capturing", "captured", "skipped", "capture-failed", "ended", "stall",
                     "pruned", "error", "alert", "alert-failed",
                     "recovering", "recover-waiting", "recovered", "recover-failed", "recover-limit", "recover-refused"]
#: The alert kind ([alerts] kinds) of each event of the call point (``alert_point.py``).
OUTCOME_KIND = {"recovered": "recovered", "recover-failed": "recovery-failed", "recover-limit": "recovery-failed",
                "recover-refused": "recovery-failed", "memory-low": "memory-low", "memory-ok": "memory-low"}
#: The kinds whose hang evidence is captured (the progress incidents; a rail or a GPU is read live).
CAPTURED_KINDS = frozenset(INCIDENT_KINDS.values())


@dataclass(frozen=True)
class Notice:
    kind: NoticeKind
    text: str
    incident: int | None = None
    bundle: str | None = None
    seconds: float | None = None
    at: float = 0.0

    def to_json(self) -> dict:
        return {"t": round(self.at, 3), "incident": {"event": self.kind, "id": self.incident, "text": self.text,
                                                     "bundle": self.bundle, "seconds": self.seconds}}


def service_key(config: Config) -> str:
    """The pair this console watches, as two consoles of it agree on (the stations and the API)."""
    ident = "|".join(sorted(f"{s.user or ''}@{s.host}:{s.port or 22}/{s.container}" for s in config.stations))
    return hashlib.sha256(f"{ident}|{config.api_url()}".encode()).hexdigest()[:16]


def stall_words(stalls: list[Stall] | tuple[Stall, ...], now: float, span_s: float = STALL_SUMMARY_S) -> str | None:
    """"3 stalls in the last hour, longest 14 s" (None: none)."""
    recent = [s for s in stalls if s.start >= now - span_s]
    if not recent:
        return None
    n = len(recent)
    return f"{n} stall{'s' if n != 1 else ''} in the last hour, longest {max(s.seconds for s in recent):.0f} s"


class IncidentRecorder:
    def __init__(self, config: Config, stations: Stations, say: Callable[[Notice], None],
                 ledger: Ledger | None = None, capture: bool | None = None, capture_fn=None,
                 alarm: Callable[[str], None] | None = None, alerter: Alerter | None = None, *,
                 read_only: bool = False, busy: Callable[[], str | None] = lambda: None,
                 restart=None, log_source: Callable[[], object] | None = None) -> None:
        self.config, self.stations, self._say = config, stations, say
        self.ledger = ledger or Ledger()
        self.capture_on = config.incidents.capture if capture is None else capture
        self._capture_fn = capture_fn or cap.capture_bundle
        self.window = Window()
        self.detector = Detector(config.ui.progress_window_s, tuple(s.name for s in config.stations))
        self.conditions = ConditionDetector()  # gpu-fault, rail, unreachable: incidents of a station's health
        self.service = service_key(config)
        # alerts out ([alerts]): every incident's opening and end; alarm: the TUI's bell
        self.alerter = alerter or Alerter(config, lambda kind, text: self._tell(kind, text), service=self.service)
        self._alarm = alarm
        self.stalls: deque[Stall] = deque(maxlen=1000)  # this service's, newest last (the pane's words)
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._rows: dict[str, tuple[int, Opened]] = {}  # kind -> the open incident's ledger row and opening
        self._bundles: dict[int, str] = {}  # incident -> its bundle's path (planned, then written)
        self._unledgered: dict[str, Opened] = {}  # kind -> an open incident the ledger could not take
        self._opened_container: str | None = None  # the head container's start at the incident's opening
        self._captures: set[asyncio.Task] = set()
        self._loaded = False
        # capture-then-recover ([recover]): None unless the operator named incident kinds
        self.recover = Recoverer(config, stations, self.ledger, self.service, read_only=read_only, busy=busy,
                                 is_open=self._is_open,
                                 say=lambda kind, text, iid, sec: self._tell(kind, text, iid, seconds=sec),  # type: ignore[arg-type]
                                 restart=restart, log_source=log_source) if config.recover.on else None

    # ------------------------------------------------------------------ the hooks (sync, cheap)

    def note(self, msg: object) -> None:
        self.window.note(msg, self.stations.head_name)

    def tick(self, judged: Judgement, now: float) -> None:
        """The progress judge's tick (its judgement, not judged again here): incidents, stalls, conditions."""
        if self.recovering:  # the console's own restart: its stopped head and start-up are no new incident
            return
        head = self.stations.head
        snap = head.serving if head is not None else None
        running = snap.running if snap is not None else None
        if judged.service is not None:  # (None: the judge has not ticked yet)
            for ev in self.detector.step(judged.service, judged.stations, head.progress if head is not None else None,
                                         running, now):
                self._events.put_nowait(ev)
        for ev in self.conditions.step(self.stations, now):
            self._events.put_nowait(ev)

    def alert(self, kind: str, **kw) -> bool:
        """One alert now (``Alerter.alert``: a recovery's outcome), deduplicated and rate-limited."""
        return self.alerter.alert(kind, **kw)

    def _outcome(self, event: AlertEvent) -> None:
        """The call point's events (recovery outcomes, the GB10 memory floor) out through the alerter."""
        kind = OUTCOME_KIND[event.kind]
        verdict = event.text if event.kind != "memory-ok" else f"resolved: {event.text}"
        self.alerter.alert(kind, stations=event.stations, verdict=verdict, incident=event.incident,
                           bundle=event.bundle)

    def requests_now(self, now: float | None = None) -> dict:
        """The head engine's requests in flight as its metrics say now (with the read's age)."""
        head = self.stations.head
        return cap.requests_in_flight(head.serving if head is not None else None,
                                      time.time() if now is None else now)

    def stall_summary(self, now: float | None = None) -> str | None:
        return stall_words(tuple(self.stalls), time.time() if now is None else now)

    # ------------------------------------------------------------------ the job

    async def run(self) -> None:
        ALERT_HOOKS.append(self._outcome)  # recovery outcomes and the memory floor leave through this alerter
        try:
            if not self._loaded:
                self._loaded = True
                with contextlib.suppress(LedgerError):
                    past = await asyncio.to_thread(self.ledger.stalls, time.time() - STALL_SUMMARY_S, self.service)
                    self.stalls.extend(reversed(past))
            while True:
                ev = await self._events.get()
                try:
                    await self._handle(ev)
                except LedgerError as exc:
                    self._tell("error", one_line(str(exc), 300))
        finally:
            with contextlib.suppress(ValueError):
                ALERT_HOOKS.remove(self._outcome)
            for t in list(self._captures):
                t.cancel()
            if self._captures:
                await asyncio.gather(*self._captures, return_exceptions=True)
            await self.alerter.aclose()  # the messages in flight get a few seconds, then go

    async def drain(self) -> None:
        """Wait until every event so far is written and every capture done (tests, shutdown)."""
        while not self._events.empty() or self._captures:
            await asyncio.sleep(0.05)
        await self.alerter.drain()

    def _tell(self, kind: NoticeKind, text: str, incident: int | None = None, bundle: str | None = None,
              seconds: float | None = None) -> None:
        self._say(Notice(kind, text, incident, bundle, seconds, time.time()))

    async def _handle(self, ev: Event) -> None:
        if isinstance(ev, Opened):
            await self._opened(ev)
        elif isinstance(ev, Closed):
            await self._closed(ev)
        elif isinstance(ev, Widened):
            if (got := self._rows.get(ev.kind)) is not None:
                await asyncio.to_thread(self.ledger.add_stations, got[0], ev.stations)
        elif isinstance(ev, StallSeen):
            stall = Stall(ev.start, ev.seconds, ev.stations, ev.running, self.service)
            self.stalls.append(stall)
            await asyncio.to_thread(self.ledger.add_stall, self.service, ev.start, ev.seconds, ev.stations, ev.running)
            reqs = "" if ev.running is None else f", {ev.running:.0f} running"
            self._tell("stall", f"tokens froze for {ev.seconds:.0f} s and moved again{reqs} "
                                f"({self.stall_summary() or ''})", seconds=round(ev.seconds, 1))

    async def _opened(self, ev: Opened) -> None:
        if self._alarm is not None and self.config.alerts.wants(ev.kind):
            self._alarm(ev.kind)
        try:
            claim = await asyncio.to_thread(self.ledger.open_incident, self.service, ev.kind, ev.start, ev.stations,
                                            ev.verdict, ev.next_step)
        except LedgerError as exc:  # no ledger (disk full, a newer schema): the page still goes out
            self._tell("error", f"{ev.kind} on {', '.join(ev.stations)}: not written to the ledger "
                                f"({one_line(str(exc), 200)})")
            self._unledgered[ev.kind] = ev
            self.alerter.opened(ev.kind, stations=ev.stations, verdict=ev.verdict, next_step=ev.next_step,
                                start=ev.start, key=f"{ev.kind}@{ev.start}")
            return
        self._rows[ev.kind] = (claim.id, ev)
        captured = ev.kind in CAPTURED_KINDS
        bundle = str(self._bundle_path(claim.id, ev)) if captured and self.capture_on and claim.owner else None
        if bundle is not None:
            self._bundles[claim.id] = bundle
        if self.alerter.wants(ev.kind) and await self._claim_alert(claim.id):
            # one console alerts an incident (the first to claim it), owner of the capture or not
            self.alerter.opened(ev.kind, stations=ev.stations, verdict=ev.verdict, next_step=ev.next_step,
                                start=ev.start, incident=claim.id, bundle=bundle)
        if captured:
            head = self.stations.head
            c = head.container if head is not None else None
            self._opened_container = c.started_at if c is not None else None
        where = ", ".join(ev.stations)
        if not claim.owner:
            self._tell("skipped", f"incident {claim.id} ({ev.kind} on {where}): another console ({claim.other}) "
                                  "owns it and captures it; skipped", claim.id)
            return
        self._tell("incident", f"incident {claim.id}: {ev.kind} on {where}: {one_line(ev.verdict, 200)}", claim.id)
        if not captured:
            return
        if not self.capture_on:
            self._tell("skipped", f"incident {claim.id}: not captured ([incidents] capture = false); "
                                  "press h (or run hang-report) for the evidence", claim.id)
            if self.recover is not None and self.recover.wants(ev.kind):
                self._tell("recover-refused", f"incident {claim.id}: not restarted: no evidence was captured "
                                              "(a restart would destroy it)", claim.id)
            return
        task = asyncio.create_task(self._capture(claim.id, ev))
        self._captures.add(task)
        task.add_done_callback(self._capture_done)

    def _is_open(self, iid: int) -> bool:
        return any(row_id == iid for row_id, _ in self._rows.values())

    def _capture_done(self, task: asyncio.Task[None]) -> None:
        """A capture (or the recovery after it) that ended by a bug is said, never a silently dead task."""
        self._captures.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        self._tell("error", f"the incident's capture or recovery ended: {type(exc).__name__}: "
                            f"{one_line(str(exc), 200)}")

    async def _claim_alert(self, iid: int) -> bool:
        """This console sends the incident's alert (the ledger's claim); a ledger that cannot say
        means yes: a page twice is better than none."""
        try:
            return await asyncio.to_thread(self.ledger.claim_action, iid, "alerted")
        except LedgerError as exc:
            self._tell("error", f"incident {iid}: the alert's claim was not written ({one_line(str(exc), 200)}); "
                                "alerting anyway", iid)
            return True

    def _bundle_path(self, iid: int, ev: Opened):
        stamp = datetime.fromtimestamp(ev.start, UTC).strftime("%Y%m%d-%H%M%S")
        return self.ledger.bundles / f"incident-{iid}-{ev.kind}-{stamp}.tar.gz"

    async def _capture(self, iid: int, ev: Opened) -> None:
        path = self._bundle_path(iid, ev)
        self._tell("capturing", f"incident {iid}: capturing the hang evidence and the window (at most "
                                f"{self.config.incidents.capture_deadline_s:g} s)", iid)
        row = {"id": iid, "kind": ev.kind, "start": ev.start, "stations": list(ev.stations), "verdict": ev.verdict,
               "next_step": ev.next_step, "service": self.service, "window_from": ev.start - cap.WINDOW_BEFORE_S,
               "requests": self.requests_now()}
        try:
            got = await self._capture_fn(self.config, path, row, lambda: self.window.lines(ev.start - cap.WINDOW_BEFORE_S),
                                         self.config.incidents.capture_deadline_s)
        except asyncio.CancelledError:
            with contextlib.suppress(LedgerError):
                await asyncio.shield(asyncio.to_thread(self.ledger.update, iid,
                                                       note="the console ended during the capture"))
            raise
        except Exception as exc:  # the capture is best effort: its failure is said and written, never fatal
            why = f"{type(exc).__name__}: {one_line(str(exc), 200)}"
            await asyncio.to_thread(self.ledger.update, iid, note=why)
            await asyncio.to_thread(self.ledger.add_action, iid, "failed")
            self._tell("capture-failed", f"incident {iid}: the capture failed ({why})", iid)
            await self._recover(iid, ev, None)  # the failure is written: a wedge left alone all night is worse
            return
        await asyncio.to_thread(self.ledger.update, iid, bundle=str(got.path), bundle_bytes=got.bytes,
                                note=one_line(got.verdict, 300))
        await asyncio.to_thread(self.ledger.add_action, iid, "captured")
        self._tell("captured", f"incident {iid}: evidence in {got.path} ({got.bytes / 1024:.0f} KiB, "
                               f"{got.seconds:.1f} s)", iid, str(got.path), round(got.seconds, 2))
        said = await asyncio.to_thread(self.ledger.prune, self.config.incidents.max_incidents,
                                       self.config.incidents.max_bundle_mib * 1024 * 1024)
        for line in said:
            self._tell("pruned", line)
        await self._recover(iid, ev, str(got.path))

    async def _recover(self, iid: int, ev: Opened, bundle: str | None) -> None:
        """After the capture: the restart the operator asked for in [recover] (recover.py)."""
        if self.recover is not None:
            await self.recover.after_capture(iid, ev.kind, ev.stations, bundle)

    @property
    def recovering(self) -> bool:
        """A restart of this console's own is under way (the operator's actions wait)."""
        return self.recover is not None and self.recover.running

    async def _closed(self, ev: Closed) -> None:
        if (lost := self._unledgered.pop(ev.kind, None)) is not None:
            self.alerter.resolved(ev.kind, key=f"{ev.kind}@{lost.start}", stations=lost.stations,
                                  verdict=lost.verdict, start=lost.start, end=ev.end)
            return
        row = self._rows.pop(ev.kind, None)
        if row is None:
            return
        iid, opened = row
        await asyncio.to_thread(self.ledger.close_incident, iid, ev.end)
        self.alerter.resolved(ev.kind, incident=iid, stations=opened.stations, verdict=opened.verdict,
                              start=opened.start, end=ev.end, bundle=self._bundles.pop(iid, None))
        head = self.stations.head
        c = head.container if head is not None else None
        if (ev.kind in CAPTURED_KINDS and c is not None and self._opened_container is not None
                and c.started_at != self._opened_container):
            await asyncio.to_thread(self.ledger.add_action, iid, "restarted")
        elif c is not None and c.state != ContainerState.RUNNING:  # ended by stopping the engine (a restart's first half)
            await asyncio.to_thread(self.ledger.add_action, iid, "stopped")
        cleared = "the service moves again" if ev.kind in CAPTURED_KINDS else "every station reads clear"
        self._tell("ended", f"incident {iid} ({ev.kind}) ended: {cleared}", iid)
