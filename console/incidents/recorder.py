"""The flight recorder of one console: the TUI and headless ``watch`` each own one.

Two one-line hooks feed it: ``note(msg)`` after every station message is applied (the window), and
``tick(verdicts, now)`` on every progress judgement (the detector). Its job (``run``, supervised
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
from console.incidents.detector import Closed, Detector, Event, Opened, StallSeen
from console.incidents.recover import Recoverer
from console.incidents.store import Ledger, LedgerError, Stall
from console.incidents.window import Window
from console.sanitize import one_line
from console.station.progress import Verdict, service
from console.station.state import Stations

STALL_SUMMARY_S = 3600.0
NoticeKind = Literal["incident", "capturing", "captured", "skipped", "capture-failed", "ended", "stall",
                     "pruned", "error", "recovering", "recover-waiting", "recovered", "recover-failed",
                     "recover-limit", "recover-refused"]


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
                 ledger: Ledger | None = None, capture: bool | None = None, capture_fn=None, *,
                 read_only: bool = False, busy: Callable[[], str | None] = lambda: None,
                 restart=None, log_source: Callable[[], object] | None = None) -> None:
        self.config, self.stations, self._say = config, stations, say
        self.ledger = ledger or Ledger()
        self.capture_on = config.incidents.capture if capture is None else capture
        self._capture_fn = capture_fn or cap.capture_bundle
        self.window = Window()
        self.detector = Detector(config.ui.progress_window_s, tuple(s.name for s in config.stations))
        self.service = service_key(config)
        self.stalls: deque[Stall] = deque(maxlen=1000)  # this service's, newest last (the pane's words)
        self._events: asyncio.Queue[Event] = asyncio.Queue()
        self._row: int | None = None  # the open incident's ledger row
        self._opened_container: str | None = None  # the head container's start at the incident's opening
        self._captures: set[asyncio.Task] = set()
        self._loaded = False
        # capture-then-recover ([recover]): None unless the operator named incident kinds
        self.recover = Recoverer(config, stations, self.ledger, self.service, read_only=read_only, busy=busy,
                                 is_open=lambda iid: self._row == iid,
                                 say=lambda kind, text, iid, sec: self._tell(kind, text, iid, seconds=sec),  # type: ignore[arg-type]
                                 restart=restart, log_source=log_source) if config.recover.on else None

    # ------------------------------------------------------------------ the hooks (sync, cheap)

    def note(self, msg: object) -> None:
        self.window.note(msg, self.stations.head_name)

    def tick(self, verdicts: dict[str, Verdict], now: float) -> None:
        if self.recovering:  # the console's own restart: its stopped head and start-up are no new incident
            return
        head = self.stations.head
        snap = head.serving if head is not None else None
        running = snap.running if snap is not None else None
        sv = service(verdicts, self.stations.head_name)
        for ev in self.detector.step(sv, verdicts, head.progress if head is not None else None, running, now):
            self._events.put_nowait(ev)

    def stall_summary(self, now: float | None = None) -> str | None:
        return stall_words(tuple(self.stalls), time.time() if now is None else now)

    # ------------------------------------------------------------------ the job

    async def run(self) -> None:
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
            for t in list(self._captures):
                t.cancel()
            if self._captures:
                await asyncio.gather(*self._captures, return_exceptions=True)

    async def drain(self) -> None:
        """Wait until every event so far is written and every capture done (tests, shutdown)."""
        while not self._events.empty() or self._captures:
            await asyncio.sleep(0.05)

    def _tell(self, kind: NoticeKind, text: str, incident: int | None = None, bundle: str | None = None,
              seconds: float | None = None) -> None:
        self._say(Notice(kind, text, incident, bundle, seconds, time.time()))

    async def _handle(self, ev: Event) -> None:
        if isinstance(ev, Opened):
            await self._opened(ev)
        elif isinstance(ev, Closed):
            await self._closed(ev)
        elif isinstance(ev, StallSeen):
            stall = Stall(ev.start, ev.seconds, ev.stations, ev.running, self.service)
            self.stalls.append(stall)
            await asyncio.to_thread(self.ledger.add_stall, self.service, ev.start, ev.seconds, ev.stations, ev.running)
            reqs = "" if ev.running is None else f", {ev.running:.0f} running"
            self._tell("stall", f"tokens froze for {ev.seconds:.0f} s and moved again{reqs} "
                                f"({self.stall_summary() or ''})", seconds=round(ev.seconds, 1))

    async def _opened(self, ev: Opened) -> None:
        claim = await asyncio.to_thread(self.ledger.open_incident, self.service, ev.kind, ev.start, ev.stations,
                                        ev.verdict, ev.next_step)
        self._row = claim.id
        head = self.stations.head
        c = head.container if head is not None else None
        self._opened_container = c.started_at if c is not None else None
        where = ", ".join(ev.stations)
        if not claim.owner:
            self._tell("skipped", f"incident {claim.id} ({ev.kind} on {where}): another console ({claim.other}) "
                                  "owns it and captures it; skipped", claim.id)
            return
        self._tell("incident", f"incident {claim.id}: {ev.kind} on {where}: {one_line(ev.verdict, 200)}", claim.id)
        if not self.capture_on:
            self._tell("skipped", f"incident {claim.id}: not captured ([incidents] capture = false); "
                                  "press h (or run hang-report) for the evidence", claim.id)
            if self.recover is not None and self.recover.wants(ev.kind):
                self._tell("recover-refused", f"incident {claim.id}: not restarted: no evidence was captured "
                                              "(a restart would destroy it)", claim.id)
            return
        task = asyncio.create_task(self._capture(claim.id, ev))
        self._captures.add(task)
        task.add_done_callback(self._captures.discard)

    async def _capture(self, iid: int, ev: Opened) -> None:
        stamp = datetime.fromtimestamp(ev.start, UTC).strftime("%Y%m%d-%H%M%S")
        path = self.ledger.bundles / f"incident-{iid}-{ev.kind}-{stamp}.tar.gz"
        self._tell("capturing", f"incident {iid}: capturing the hang evidence and the window (at most "
                                f"{self.config.incidents.capture_deadline_s:g} s)", iid)
        row = {"id": iid, "kind": ev.kind, "start": ev.start, "stations": list(ev.stations), "verdict": ev.verdict,
               "next_step": ev.next_step, "service": self.service, "window_from": ev.start - cap.WINDOW_BEFORE_S}
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
        iid, self._row = self._row, None
        if iid is None:
            return
        await asyncio.to_thread(self.ledger.close_incident, iid, ev.end)
        head = self.stations.head
        c = head.container if head is not None else None
        if c is not None and self._opened_container is not None and c.started_at != self._opened_container:
            await asyncio.to_thread(self.ledger.add_action, iid, "restarted")
        self._tell("ended", f"incident {iid} ({ev.kind}) ended: the service moves again", iid)
