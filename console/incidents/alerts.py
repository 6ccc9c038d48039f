"""Alerts out (``[alerts]``, console/config/alerts.py): the recorder hands every incident's opening
and end here (``opened`` / ``resolved``); a recovery says its outcome through ``alert(kind=...)``.

What goes out: one message per incident when it opens (deduplicated: the same incident never twice)
and, with ``resolved = true``, one when it clears; only the kinds switched on. Rate: an incident of a
kind alerted less than ``repeat_after_s`` ago is folded (counted, said in the next message of that
kind: a flapping rail is one page, not sixty), and at most ``max_per_hour`` messages go out in any
hour (the rest are counted and said). Delivery is a task per message, every sink at once, each
bounded (console/incidents/sinks.py): the caller never waits, the UI never blocks. What happened is
told through ``say(kind, text)``: ``alert`` (sent), ``alert-failed`` (a sink failed, or the rate
limit held messages back); the TUI notifies, ``watch`` prints a line. Everything said and sent
passes the config's masker; sink URLs are shown masked.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from collections.abc import Callable
from typing import Literal

from console.config import Config
from console.incidents.capture import full_masker
from console.incidents.sinks import Alert, Outcome, desktop, ntfy, webhook
from console.sanitize import one_line
from console.tasks import gather_owned

HOUR_S = 3600.0
BACKOFF_S = 1.0  # the scale of the sinks' back-off table (console/supervisor.py); a test runs it faster
AlertSay = Callable[[Literal["alert", "alert-failed"], str], None]


class Alerter:
    def __init__(self, config: Config, say: AlertSay | None = None, *, service: str = "",
                 backoff_s: float = BACKOFF_S) -> None:
        self.settings = config.alerts
        self.mask = full_masker(config)
        self.host = socket.gethostname()
        self.service, self.backoff_s = service, backoff_s
        self._say = say if say is not None else (lambda kind, text: None)
        self._sent: deque[float] = deque()  # when each message of the last hour went out
        self._last: dict[str, float] = {}  # kind -> when its last open alert went out
        self._folded: dict[str, int] = {}  # kind -> opens held back since (said in the next one)
        self._held_back = 0  # messages over max_per_hour in the current hour
        self._alerted: dict[int | str, float] = {}  # incident -> when its open alert went out (its end is said)
        self._outcomes_sent: set[tuple[str, int]] = set()  # (kind, incident) of alert() calls sent
        self._tasks: set[asyncio.Task] = set()
        # messages leave in the order they were raised: an incident's end never before its opening (a slow
        # sink delays the next message by at most its own bounded timeout and retries)
        self._in_order = asyncio.Lock()
        self.outcomes: deque[tuple[Alert, list[Outcome]]] = deque(maxlen=100)  # the latest, newest last

    @property
    def configured(self) -> bool:
        return self.settings.configured

    def wants(self, kind: str) -> bool:
        """An opening of this kind would be sent (a sink is set and the kind is on)."""
        return self.configured and self.settings.wants(kind)

    # ------------------------------------------------------------------ what the recorder calls

    def opened(self, kind: str, *, stations: tuple[str, ...], verdict: str, next_step: str, start: float,
               incident: int | None = None, bundle: str | None = None, now: float | None = None,
               key: str | None = None) -> bool:
        """An incident opened: its alert is queued (True) or folded / held back / not wanted (False).
        ``key``: what names the incident when it has no ledger id (its "resolved" is asked by it)."""
        now = time.time() if now is None else now
        ident = incident if incident is not None else key
        if not self.wants(kind) or (ident is not None and ident in self._alerted):
            return False
        last = self._last.get(kind)
        if last is not None and now - last < self.settings.repeat_after_s:
            self._folded[kind] = self._folded.get(kind, 0) + 1
            self._say("alert", f"{kind} alert folded: one of this kind went out {now - last:.0f} s ago "
                               f"(repeat_after_s = {self.settings.repeat_after_s:g}); the next one says it")
            return False
        if not self._admit(now):
            return False
        folded = self._folded.pop(kind, 0)
        self._last[kind] = now
        if ident is not None:
            self._alerted[ident] = now
        self._send(Alert(kind, "open", stations, verdict, next_step, start, self.host, self.service, incident,
                         bundle, folded=folded))
        return True

    def resolved(self, kind: str, *, stations: tuple[str, ...], verdict: str, start: float, end: float,
                 incident: int | None = None, key: str | None = None, bundle: str | None = None,
                 now: float | None = None) -> bool:
        """An incident this console alerted has cleared: the "resolved" message is queued (True)."""
        now = time.time() if now is None else now
        ident = incident if incident is not None else key
        if ident not in self._alerted or not self.settings.resolved or not self.configured:
            return False
        del self._alerted[ident]
        if not self._admit(now):
            return False
        self._send(Alert(kind, "resolved", stations, verdict, "", start, self.host, self.service, incident, bundle,
                         resolved_at=end))
        return True

    def alert(self, kind: str, *, stations: tuple[str, ...] = (), verdict: str, next_step: str = "",
              incident: int | None = None, bundle: str | None = None, start: float | None = None) -> bool:
        """One alert of ``kind`` now (a recovery's outcome: ``recovered``, ``recovery-failed``), under the
        same switches and rate limit; for an incident already alerted it goes out all the same (the
        outcome is news), once per kind and incident."""
        now = time.time()
        if not self.wants(kind):
            return False
        if incident is not None:
            key = (kind, incident)
            if key in self._outcomes_sent:
                return False
            self._outcomes_sent.add(key)
        if not self._admit(now):
            return False
        self._send(Alert(kind, "open", tuple(stations), verdict, next_step, now if start is None else start,
                         self.host, self.service, incident, bundle))
        return True

    # ------------------------------------------------------------------ delivery

    def _admit(self, now: float) -> bool:
        while self._sent and self._sent[0] < now - HOUR_S:
            self._sent.popleft()
        if not self._sent:
            self._held_back = 0
        if len(self._sent) >= self.settings.max_per_hour:
            self._held_back += 1
            if self._held_back == 1:
                self._say("alert-failed", f"alerts held back: {self.settings.max_per_hour} went out in the last hour "
                                          "(max_per_hour); the incidents are in the ledger (I)")
            return False
        self._sent.append(now)
        return True

    def _send(self, alert: Alert) -> None:
        task = asyncio.get_running_loop().create_task(self.deliver(alert))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def deliver(self, alert: Alert) -> list[Outcome]:
        """Every configured sink at once (bounded each); the outcomes are said and kept."""
        alert = alert.masked(self.mask)
        try:
            async with self._in_order:
                got = await self.send_all(alert)
        except Exception as exc:  # a bug of ours must not end silently in a task nobody awaits
            self._say("alert-failed", f"alert {alert.kind} ({alert.event}) not sent: {type(exc).__name__}: "
                                      f"{one_line(self.mask(str(exc)), 200)}")
            return []
        self.outcomes.append((alert, got))
        what = f"{alert.kind} ({alert.event})" + (f", incident {alert.incident}" if alert.incident is not None else "")
        failed = [o for o in got if o.status != "sent"]
        if failed:
            self._say("alert-failed", f"alert {what}: " + "; ".join(o.words() for o in failed)
                      + ("" if len(failed) == len(got) else
                         f"; sent to {', '.join(o.sink for o in got if o.status == 'sent')}"))
        elif got:
            self._say("alert", f"alert {what} sent to {', '.join(o.sink for o in got)}")
        return got

    async def send_all(self, alert: Alert) -> list[Outcome]:
        s = self.settings
        kw = {"timeout_s": s.timeout_s, "retries": s.retries, "backoff_s": self.backoff_s, "mask": self.mask}
        jobs = []
        if s.webhook:
            jobs.append(webhook(s.webhook, alert, **kw))
        if s.ntfy:
            jobs.append(ntfy(s.ntfy, alert, **kw))
        if s.desktop:
            jobs.append(desktop(alert))
        return list(await gather_owned(*jobs))

    def test_alert(self) -> Alert:
        """The message ``alert-test`` sends to every sink."""
        now = time.time()
        return Alert("test", "test", (), "a test alert from dgx-console alert-test: if you read this, this sink works",
                     "nothing to do", now, self.host, self.service)

    async def drain(self, timeout_s: float | None = None) -> bool:
        """Wait for the messages in flight (True: all done within ``timeout_s``)."""
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout_s)
        return not pending

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Give the messages in flight ``grace_s``, then cancel them (the console is ending)."""
        with contextlib.suppress(Exception):
            await self.drain(grace_s)
        for t in list(self._tasks):
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
