"""Clock state: ``chronyc tracking``, ``timedatectl show -p NTPSynchronized --value`` and the skew
between two stations measured from ``date +%s.%N`` and the round trip."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError


@dataclass(frozen=True)
class ClockSync:
    source: str  # "chrony" | "timedatectl"
    synchronised: bool
    offset_s: float | None  # chrony: positive = local clock ahead of NTP
    leap_status: str | None


def parse_chronyc_tracking(text: str) -> ClockSync:
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    leap = fields.get("Leap status")
    if leap is None:
        raise ParseError(f"chronyc tracking: no 'Leap status' line in {text.strip()[:120]!r}")
    offset = None
    m = re.match(r"([\d.]+) seconds (fast|slow) of NTP time", fields.get("System time", ""))
    if m:
        offset = float(m.group(1)) * (1 if m.group(2) == "fast" else -1)
    return ClockSync("chrony", leap != "Not synchronised", offset, leap)


def parse_timedatectl(text: str) -> ClockSync:
    value = text.strip().splitlines()[-1].strip() if text.strip() else ""
    if value.startswith("NTPSynchronized="):
        value = value.split("=", 1)[1]
    if value not in ("yes", "no"):
        raise ParseError(f"timedatectl: expected yes/no, got {text.strip()[:80]!r}")
    return ClockSync("timedatectl", value == "yes", None, None)


def parse_clock_sync(text: str) -> ClockSync:
    """Whichever of the two the station answered with."""
    if "Leap status" in text:
        return parse_chronyc_tracking(text)
    return parse_timedatectl(text)


def parse_epoch(text: str) -> float:
    """``date +%s.%N``."""
    m = re.search(r"^\s*(\d{9,}(?:\.\d+)?)\s*$", text, re.M)
    if not m:
        raise ParseError(f"date: expected seconds since the epoch, got {text.strip()[:80]!r}")
    return float(m.group(1))


@dataclass(frozen=True)
class ClockReading:
    sent: float  # local clock when the command was sent
    remote: float  # the station's clock
    received: float  # local clock when the answer came back

    @property
    def offset(self) -> float:
        """Station clock minus local clock, at the midpoint of the round trip."""
        return self.remote - (self.sent + self.received) / 2

    @property
    def uncertainty(self) -> float:
        return (self.received - self.sent) / 2


def skew(a: ClockReading, b: ClockReading) -> tuple[float, float]:
    """(B - A, uncertainty): B's clock relative to A's, each corrected for its own round trip."""
    return b.offset - a.offset, a.uncertainty + b.uncertainty
