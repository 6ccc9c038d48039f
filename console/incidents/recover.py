"""Capture-then-recover: on the incident kinds the operator chose (``[recover] on``), once the evidence
is on disk, the verified restart (``run_action(cfg, "restart")``: the head stopped first and the stop
proven clean, the stations started in order, ready means a first token) — at most ``max_per_hour``
restarts in any hour, each after a back-off that doubles with the restarts already made that hour.

It refuses, and says why, in ``--read-only``, while an operator's action (launch / stop / restart)
is planned or runs, and while a station is in a start-up this console did not make (a launch from
elsewhere). When the limit is reached it makes no restart and says so; the count is read back from
the ledger, so a console restarted at night does not start over. Every outcome is a Notice (the
TUI's toast and the head pane's badge, ``watch``'s line), a word in the incident's ``action`` with a
note, and an ``outcome_alert`` (console/incidents/alert_point.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from console.config import Config
from console.incidents.alert_point import AlertEvent, AlertKind, outcome_alert
from console.incidents.store import Ledger
from console.sanitize import one_line
from console.service.steps import CancelToken
from console.station.state import Stations
from console.station.verdict import Verdict
from console.vocabulary import LOADING_PHASES, Progress

HOUR_S = 3600.0
#: The ledger words of a restart this console made (an attempt, whatever its end).
ATTEMPT_WORDS = frozenset({"recovered", "recover-failed"})
POLL_S = 0.5
#: The verdicts that end a restart early when they speak of its new run. Not peer-down, nor a silent
#: start-up: the restart itself stops the head and starts the service again.
AGAIN = frozenset({Progress.WEDGED, Progress.STUCK})
CANCEL_GRACE_S = 60.0  # a stopped restart's clean-up (its SSH commands end, its log step closes)

RestartFn = Callable[[], Awaitable["RestartResult"]]


@dataclass(frozen=True)
class RestartResult:
    ok: bool
    summary: str


@dataclass(frozen=True)
class Outcome:
    """What the recovery of one incident came to (the Notice and the alert say it)."""

    word: AlertKind
    text: str
    seconds: float | None = None


def backoff_wait(attempts: list[float], last_end: float | None, backoff_s: float, now: float) -> float:
    """Seconds still to wait before the next restart: ``backoff_s`` doubled per restart made in
    the last hour, counted from the end of the last one (0: go now)."""
    recent = [t for t in attempts if t > now - HOUR_S]
    if not recent or last_end is None or backoff_s <= 0:
        return 0.0
    return max(0.0, last_end + backoff_s * 2 ** (len(recent) - 1) - now)


def limit_reached(attempts: list[float], max_per_hour: int, now: float) -> float | None:
    """None while a restart is allowed; else when the oldest restart of the hour leaves it."""
    recent = sorted(t for t in attempts if t > now - HOUR_S)
    return None if len(recent) < max_per_hour else recent[0] + HOUR_S


class Recoverer:
    """One console's recoveries. ``busy()`` names the operator's action running (None: none);
    ``is_open(iid)`` says whether the incident is still open; ``say(word, text, iid, seconds)``
    tells the screen or the NDJSON; ``restart`` is the verified restart (default: ``run_action``)."""

    def __init__(self, config: Config, stations: Stations, ledger: Ledger, service: str, *,
                 read_only: bool, busy: Callable[[], str | None],
                 is_open: Callable[[int], bool], say: Callable[[str, str, int, float | None], None],
                 restart: RestartFn | None = None, log_source: Callable[[], object] | None = None) -> None:
        self.config, self.stations, self.ledger, self.service = config, stations, ledger, service
        self.read_only, self._busy, self._is_open = read_only, busy, is_open
        self._say_out = say
        self.last: tuple[str, str] | None = None  # (word, text) of the latest thing said: the pane's badge
        self._restart = restart or self._run_restart
        self._log_source = log_source
        self.attempts: list[float] = []  # when each restart of the last hour began
        self.last_end: float | None = None
        self.running = False  # a restart is under way: the operator's L / S / R wait for it
        self._cancel: CancelToken | None = None  # the running restart's (a recurring wedge stops it)
        self._loaded = False

    def _say(self, word: str, text: str, iid: int, seconds: float | None) -> None:
        if word != "error":
            self.last = (word, text)
        self._say_out(word, text, iid, seconds)

    @property
    def kinds(self) -> tuple[str, ...]:
        return self.config.recover.on

    def wants(self, kind: str) -> bool:
        return kind in self.kinds

    async def _load(self) -> None:
        """The restarts of the last hour the ledger knows (this console's before a restart of it, too)."""
        if self._loaded:
            return
        self._loaded = True
        since = time.time() - HOUR_S
        rows = await asyncio.to_thread(self.ledger.incidents, since)
        for r in rows:
            if r.service == self.service and ATTEMPT_WORDS & set(r.action.split(", ")):
                self.attempts.append(r.start)

    async def after_capture(self, iid: int, kind: str, stations: tuple[str, ...], bundle: str | None) -> Outcome | None:
        """The incident's evidence is taken (or its capture failed, which the ledger says): recover
        when the operator asked for it for this kind. None: not asked for."""
        if not self.wants(kind):
            return None
        await self._load()
        out = await self._decide_and_run(iid, kind)
        if out is None:
            return None
        await asyncio.to_thread(self.ledger.add_action, iid, out.word)
        row = await asyncio.to_thread(self.ledger.get, iid)
        note = out.text if row is None or not row.note else f"{row.note}; {out.text}"
        await asyncio.to_thread(self.ledger.update, iid, note=one_line(note, 1000))
        self._say(out.word, f"incident {iid}: {out.text}", iid, out.seconds)
        for line in outcome_alert(AlertEvent(out.word, f"incident {iid} ({kind}): {out.text}", stations, iid,
                                             bundle, out.seconds)):
            self._say("error", one_line(line, 300), iid, None)
        return out

    async def _decide_and_run(self, iid: int, kind: str) -> Outcome | None:
        refused = self._refusal(kind)
        if refused:
            return Outcome("recover-refused", f"not restarted: {refused}")
        now = time.time()
        until = limit_reached(self.attempts, self.config.recover.max_per_hour, now)
        if until is not None:
            n = self.config.recover.max_per_hour
            return Outcome("recover-limit", f"recovery stopped: limit reached ({n} restart{'s' if n != 1 else ''} in "
                                            f"the last hour, [recover] max_per_hour = {n}); the service is left as "
                                            f"it is — read the bundle, then restart it yourself (R); automatic "
                                            f"restarts resume at {time.strftime('%H:%M', time.localtime(until))}")
        wait = backoff_wait(self.attempts, self.last_end, self.config.recover.backoff_s, now)
        if wait > 0:
            self._say("recover-waiting", f"incident {iid}: restart in {wait:.0f} s (back-off after "
                                         f"{len(self.attempts)} restart(s) this hour)", iid, round(wait, 1))
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not self._is_open(iid):
                    self._say("recover-waiting", f"incident {iid}: ended during the back-off; no restart", iid, None)
                    return None
                await asyncio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
            refused = self._refusal(kind)  # the world may have changed during the wait
            if refused:
                return Outcome("recover-refused", f"not restarted: {refused}")
        if not self._is_open(iid):
            return None  # it healed (or someone restarted it) while the evidence was taken
        return await self._attempt(iid, kind)

    def _refusal(self, kind: str) -> str | None:
        if self.read_only:
            return "read-only mode (--read-only): the console changes nothing on the stations"
        if self.running:
            return "the console's own restart is under way"
        busy = self._busy()
        if busy:
            return f"an operator's action runs ({one_line(busy, 120)}); the console does not act beside it"
        if kind != "stuck":  # a stuck start-up is the one incident that is a start-up
            coming = [s.name for s in self.stations.values() if s.engine is not None and s.engine.phase in LOADING_PHASES]
            if coming:
                return f"a start-up is under way on {', '.join(coming)} (a launch from another console?)"
        return None

    async def _attempt(self, iid: int, kind: str) -> Outcome:
        n = len([t for t in self.attempts if t > time.time() - HOUR_S]) + 1
        self.attempts.append(time.time())
        self.running = True
        self._say("recovering", f"incident {iid}: restarting the service ({kind}; restart {n} of at most "
                                f"{self.config.recover.max_per_hour} this hour): head stopped first, then "
                                "started in order, ready at the first token", iid, None)
        t0 = time.monotonic()
        try:
            res = await self._restart_unless_wedged(time.time())
        except Exception as exc:  # noqa: BLE001 - a restart that cannot run is a failed recovery, said
            res = RestartResult(False, f"{type(exc).__name__}: {one_line(str(exc), 300)}")
        finally:
            self.running = False
            self.last_end = time.time()
        took = time.monotonic() - t0
        if res.ok:
            return Outcome("recovered", f"recovered in {took:.0f} s ({one_line(res.summary, 300)})", round(took, 1))
        return Outcome("recover-failed", f"recovery failed after {took:.0f} s: {one_line(res.summary, 400)}; "
                                         "the service is not serving — read the bundle and the restart's steps",
                       round(took, 1))

    async def _restart_unless_wedged(self, began: float) -> RestartResult:
        """The restart, raced against the progress judge: a service judged wedged (or stuck) again after the
        restart began (the new run serving, requests running, no token for W) fails the recovery then, instead
        of at the launch's ready timeout (>= 10 min) while the first-token request waits on a frozen
        engine and every screen says "recovering"."""
        self._cancel = CancelToken()
        restart = asyncio.ensure_future(self._restart())
        again = asyncio.ensure_future(self._wedged_since(began))
        try:
            await asyncio.wait({restart, again}, return_when=asyncio.FIRST_COMPLETED)
            if restart.done():
                return restart.result()
            verdict = again.result()
            self._cancel.request(hard=True)  # the action's own cancel: its clean-up runs, the result says so
            done, _ = await asyncio.wait({restart}, timeout=CANCEL_GRACE_S)
            why = "" if done else f"; its steps did not end within {CANCEL_GRACE_S:.0f} s of the cancel"
            return RestartResult(False, f"the service wedged again before the restart finished "
                                        f"({one_line(verdict.words, 200)}); the restart was stopped{why}")
        finally:
            for task in (restart, again):
                task.cancel()
            self._cancel = None

    async def _wedged_since(self, began: float) -> Verdict:
        """The service's verdict once the judge says wedged or stuck (every rank in one collective), since
        ``began`` or later (the run before the restart was wedged too: its verdict is older)."""
        while True:
            await asyncio.sleep(POLL_S)
            v = self.stations.judged.service
            if v is not None and v.state in AGAIN and v.since is not None and v.since >= began:
                return v

    async def _run_restart(self) -> RestartResult:
        from console.service.actions import run_action
        from console.service.run import ActionOptions

        src = self._log_source() if self._log_source is not None else None  # the TUI's monitors' streams
        settings: dict[str, object] = {"log_source": src} if src is not None else {}
        if self._cancel is not None:
            settings["cancel"] = self._cancel
        res = await run_action(self.config, "restart", ActionOptions(on_failure=True), **settings)
        if res.exit_code == 0:
            tok = next((s.detail for s in res.steps if s.detail.startswith("first token")), "ready")
            return RestartResult(True, f"head stopped first, started in order; {tok}")
        failed = [s for s in res.steps if str(s.status) == "failed"]
        why = res.summary or (f"{failed[0].station}: {failed[0].action}: {failed[0].detail}" if failed else str(res.result))
        return RestartResult(False, why)
