"""Where an alert goes: a generic webhook (one JSON POST), an ntfy topic (the text as the body, its
title, priority and tags as headers), the desktop (notify-send). One delivery per sink, bounded: each
try at most ``timeout_s`` (the whole request, not each phase), ``retries`` more tries with back-off
(the console's one table, ``restart_delay``: 1, 2, 5 ... 30 s) after a connection error, a timeout, 429 or a 5xx (never after another 4xx: the receiver refused it);
a 429 or 503 that says when to come back (``Retry-After``: seconds or an HTTP date) is waited for
that long instead when it is longer, at most ``RETRY_AFTER_MAX_S`` (a rate-limited ntfy topic
answers 429 with it: retrying sooner only spends the tries);
the response body is never read. Every outcome comes back as an ``Outcome`` (sent / failed /
unavailable) with the sink's URL masked (``mask_sink_url``) and the detail through the config's masker.

The webhook's JSON (``WEBHOOK_KEYS``): ``source`` ("dgx-console"), ``event`` (open / resolved /
test), ``kind``, ``incident`` (the ledger's id, or null), ``title``, ``text``, ``stations``,
``verdict``, ``next_step``, ``bundle`` (the incident's evidence bundle, where it is or will be
written), ``console_host``, ``service``, ``started_at``, ``resolved_at``, ``sent_at`` (ISO 8601 UTC),
``duration_s``, ``folded`` (alerts of this kind held back by the rate limit since the last one sent).
"""

from __future__ import annotations

import asyncio
import base64
import email.utils
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from console.lazy import lazy_module
from console.sanitize import one_line
from console.secrets import mask_sink_url
from console.supervisor import restart_delay

httpx = lazy_module("httpx")  # loaded by the first alert sent, not by the app's first frame

AlertEvent = Literal["open", "resolved", "test"]
SinkName = Literal["webhook", "ntfy", "desktop"]
OutcomeStatus = Literal["sent", "failed", "unavailable"]
WEBHOOK_KEYS = ("source", "event", "kind", "incident", "title", "text", "stations", "verdict", "next_step", "bundle",
                "console_host", "service", "started_at", "resolved_at", "sent_at", "duration_s", "folded")
URGENT = frozenset({"wedge", "rank-death", "gpu-fault", "recovery-failed"})
DESKTOP_TIMEOUT_S = 5.0
TEXT_CHARS = 600


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Alert:
    """One message: an incident that opened or cleared, a recovery's outcome, or a test."""

    kind: str
    event: AlertEvent
    stations: tuple[str, ...]
    verdict: str
    next_step: str
    started_at: float
    host: str
    service: str = ""
    incident: int | None = None
    bundle: str | None = None
    resolved_at: float | None = None
    folded: int = 0

    @property
    def title(self) -> str:
        where = ", ".join(self.stations) or "the service"
        if self.event == "test":
            return f"dgx-console test alert from {self.host}"
        if self.event == "resolved":
            return f"resolved: {self.kind} on {where} ({self.host})"
        return f"{self.kind} on {where} ({self.host})"

    @property
    def text(self) -> str:
        lines = [self.verdict]
        if self.event == "resolved" and self.resolved_at is not None:
            lines.append(f"cleared after {self.resolved_at - self.started_at:.0f} s")
        if self.next_step and self.event != "resolved":
            lines.append(f"next: {self.next_step}")
        if self.bundle:
            lines.append(f"evidence: {self.bundle}")
        if self.incident is not None:
            lines.append(f"incident {self.incident} (dgx-console incidents show {self.incident})")
        if self.folded:
            lines.append(f"{self.folded} more alert{'s' if self.folded != 1 else ''} held back by the rate limit")
        return "\n".join(lines)

    @property
    def priority(self) -> int:
        """ntfy's 1-5: urgent for what stops the service, high for the rest, default when it clears."""
        if self.event != "open" or self.kind == "recovered":
            return 3
        return 5 if self.kind in URGENT else 4

    def to_json(self, now: float) -> dict:
        return {"source": "dgx-console", "event": self.event, "kind": self.kind, "incident": self.incident,
                "title": self.title, "text": self.text, "stations": list(self.stations), "verdict": self.verdict,
                "next_step": self.next_step, "bundle": self.bundle, "console_host": self.host,
                "service": self.service, "started_at": iso(self.started_at), "resolved_at": iso(self.resolved_at),
                "sent_at": iso(now),
                "duration_s": None if self.resolved_at is None else round(self.resolved_at - self.started_at, 1),
                "folded": self.folded}

    def masked(self, mask: Callable[[str], str]) -> Alert:
        """The outside words (verdicts carry station output) through the config's masker, on one line each."""
        from dataclasses import replace

        return replace(self, verdict=one_line(mask(self.verdict), TEXT_CHARS),
                       next_step=one_line(mask(self.next_step), TEXT_CHARS),
                       bundle=one_line(mask(self.bundle), 500) if self.bundle else None)


@dataclass(frozen=True)
class Outcome:
    sink: SinkName
    target: str  # shown: a URL as mask_sink_url gives it
    status: OutcomeStatus
    detail: str
    attempts: int = 0
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"sink": self.sink, "target": self.target, "status": self.status, "detail": self.detail,
                "attempts": self.attempts, "seconds": round(self.seconds, 2)}

    def words(self) -> str:
        tries = f" after {self.attempts} tries" if self.attempts > 1 else ""
        return f"{self.sink} {self.target}: {self.status}{tries} ({self.detail})"


def header_value(text: str) -> str:
    """A header value as ntfy reads it: ASCII as it is, anything else as RFC 2047 UTF-8 base64."""
    text = one_line(text, 250)
    if text.isascii():
        return text
    return "=?UTF-8?B?" + base64.b64encode(text.encode()).decode() + "?="


def ntfy_headers(alert: Alert) -> dict[str, str]:
    tag = {"open": "rotating_light" if alert.priority == 5 else "warning", "resolved": "white_check_mark",
           "test": "test_tube"}[alert.event]
    if alert.kind == "recovered":
        tag = "white_check_mark"
    return {"Title": header_value(alert.title), "Priority": str(alert.priority),
            "Tags": f"{tag},{alert.kind},{alert.event}", "Content-Type": "text/plain; charset=utf-8"}


RETRY_AFTER_MAX_S = 60.0  # the longest wait a receiver's Retry-After may ask for: a delivery stays bounded


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """A ``Retry-After`` header's wait in seconds (``120`` or an HTTP date), at most
    ``RETRY_AFTER_MAX_S``; None when absent or not one of the two (the table's wait then)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit() and len(text) <= 9:
        return min(float(text), RETRY_AFTER_MAX_S)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when is None or when.tzinfo is None:
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return min(max(wait, 0.0), RETRY_AFTER_MAX_S)


async def post(sink: SinkName, url: str, content: bytes, headers: dict[str, str], *, timeout_s: float,
               retries: int, backoff_s: float, mask: Callable[[str], str]) -> Outcome:
    """One delivery (see the module): the outcome, never an exception (but cancellation).
    ``backoff_s`` scales the back-off table (1: its seconds)."""
    shown = mask_sink_url(url)
    t0 = time.monotonic()
    detail = "not tried"
    attempts = 0
    async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as client:
        for attempt in range(retries + 1):
            attempts = attempt + 1
            asked: float | None = None  # the receiver's Retry-After, when it gave one
            try:
                async with asyncio.timeout(timeout_s):
                    async with client.stream("POST", url, content=content, headers=headers) as r:
                        code = r.status_code
                        asked = retry_after_s(r.headers.get("retry-after")) if code in (429, 503) else None
            except (TimeoutError, httpx.TimeoutException):
                detail = f"no answer within {timeout_s:g} s"
            except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
                detail = f"{type(exc).__name__}: {one_line(mask(str(exc)), 200) or 'connection failed'}"
            else:
                if 200 <= code < 300:
                    return Outcome(sink, shown, "sent", f"HTTP {code}", attempts, time.monotonic() - t0)
                detail = f"HTTP {code}"
                if code != 429 and code < 500:  # the receiver refused it: the same again changes nothing
                    break
            if attempt < retries:
                await asyncio.sleep(max(restart_delay(attempt + 1, backoff_s), asked or 0.0))
    return Outcome(sink, shown, "failed", detail, attempts, time.monotonic() - t0)


async def webhook(url: str, alert: Alert, **kw) -> Outcome:
    from console import json_out

    body = json_out.dumps(alert.to_json(time.time())).encode()
    return await post("webhook", url, body, {"Content-Type": "application/json"}, **kw)


async def ntfy(url: str, alert: Alert, **kw) -> Outcome:
    return await post("ntfy", url, alert.text.encode(), ntfy_headers(alert), **kw)


def desktop_available() -> str | None:
    """Why there is no desktop notification here (None: notify-send and a session are there)."""
    if shutil.which("notify-send") is None:
        return "not available here: notify-send not found (the libnotify-bin package)"
    if not any(os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS")):
        return "not available here: no desktop session (DISPLAY, WAYLAND_DISPLAY and DBUS_SESSION_BUS_ADDRESS unset)"
    return None


async def desktop(alert: Alert) -> Outcome:
    t0 = time.monotonic()
    if why := desktop_available():
        return Outcome("desktop", "notify-send", "unavailable", why)
    exe = shutil.which("notify-send") or "notify-send"
    urgency = "critical" if alert.priority == 5 else "normal"
    try:
        proc = await asyncio.create_subprocess_exec(exe, "-a", "dgx-console", "-u", urgency, "--", alert.title,
                                                    alert.text, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.DEVNULL,
                                                    stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        return Outcome("desktop", "notify-send", "failed", one_line(str(exc), 200), 1, time.monotonic() - t0)
    try:
        async with asyncio.timeout(DESKTOP_TIMEOUT_S):
            _, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return Outcome("desktop", "notify-send", "failed", f"no answer within {DESKTOP_TIMEOUT_S:g} s", 1,
                       time.monotonic() - t0)
    if proc.returncode != 0:
        why = one_line(err.decode(errors="replace"), 200) or f"exit {proc.returncode}"
        return Outcome("desktop", "notify-send", "failed", why, 1, time.monotonic() - t0)
    return Outcome("desktop", "notify-send", "sent", "shown", 1, time.monotonic() - t0)
