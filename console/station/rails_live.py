"""Each rail's live state derived from the rails loop's rounds: up/down and since when, speed and
MTU against the profile, counter rates over the last minute, and flaps over the last ten minutes.

Pure (times come from the samples). A flap is a down-and-up: counted from ``carrier_changes`` (the
kernel counts every carrier change, so a blip shorter than the loop's interval is not missed) or,
where that file is absent, from the down -> up transitions the loop saw. ``StationState`` keeps one
``RailTracker`` per station; the pane's rail strip, the fleet row, ``watch``/``status --json`` and the
workbench's links rung read its ``views``.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from console.probes.rails import CONGESTION_COUNTERS, ERROR_COUNTERS, RailReading

RATE_WINDOW_S = 60.0
FLAP_WINDOW_S = 600.0
# A link renegotiates in tens of milliseconds at the very least: ten down-and-ups a second is past what
# a NIC can do; the flap list never holds more than the window could.
MAX_FLAPS_PER_S = 10
MAX_FLAPS = int(FLAP_WINDOW_S * MAX_FLAPS_PER_S)


@dataclass(frozen=True)
class RailView:
    netdev: str
    up: bool | None
    down_since: float | None  # when it was first seen down (None while up)
    speed_mbps: int | None
    expected_mbps: int | None
    mtu: int | None
    expected_mtu: int | None
    port_state: str | None
    flaps: int  # down-and-ups in the last FLAP_WINDOW_S
    flaps_since: float | None  # the first of them
    rates: dict[str, float] = field(default_factory=dict)  # per second over the last minute, counters read
    at: float | None = None

    @property
    def err_rate(self) -> float | None:
        """Errors, drops, out-of-sequence, ACK timeouts, sequence errors per second (None: none read)."""
        vals = [self.rates[k] for k in ERROR_COUNTERS if k in self.rates]
        return sum(vals) if vals else None

    @property
    def congestion_rate(self) -> float | None:
        vals = [self.rates[k] for k in CONGESTION_COUNTERS if k in self.rates]
        return sum(vals) if vals else None

    @property
    def slow(self) -> bool:
        return bool(self.up and self.speed_mbps and self.expected_mbps and self.speed_mbps < self.expected_mbps)

    @property
    def level(self) -> str | None:
        """``error`` (down), ``warn`` (flapped, slow, MTU off, errors rising) or None (fine / unknown)."""
        if self.up is False:
            return "error"
        if self.flaps or self.slow or (self.err_rate or 0) > 0 or (
                self.mtu and self.expected_mtu and self.mtu != self.expected_mtu):
            return "warn"
        return None

    def words(self, now: float) -> str:
        """The strip's words: ``▲ 400G 9000 · 0 err/s`` / ``✖ down 12 s`` / ``⚠ flapped 3× since 02:55``."""
        from console.durations import age

        if self.up is False:
            since = f" {age(now - self.down_since)}" if self.down_since is not None else ""
            return f"✖ down{since}" + (f" · flapped {self.flaps}×" if self.flaps else "")
        if self.up is None:
            return "? link state unreadable"
        # trouble first: a narrow pane keeps the start of the line
        flap = (f"⚠ flapped {self.flaps}× since " + time.strftime("%H:%M", time.localtime(self.flaps_since or now))
                if self.flaps else "")
        head = f"⚠ {_gbps(self.speed_mbps)} (expected {_gbps(self.expected_mbps)})" if self.slow else (
            f"▲ {_gbps(self.speed_mbps)}")
        if self.mtu:
            head += f" {self.mtu}" + (f" (expected {self.expected_mtu})" if self.expected_mtu
                                       and self.mtu != self.expected_mtu else "")
        err = self.err_rate
        errs = "? err/s" if err is None else f"{_rate(err)} err/s"
        parts = [p for p in ((flap, errs, head) if flap or err else (head, errs)) if p]
        cong = self.congestion_rate
        if cong:
            parts.append(f"{_rate(cong)} ECN/CNP/s")
        return " · ".join(parts)

    def short(self) -> str:
        """The fleet's NCCL column when the engine has not said its transport: ``▲ 400G`` / ``✖ down``."""
        if self.up is False:
            return "✖ down"
        if self.up is None:
            return ""
        return ("⚠ " if self.level else "▲ ") + (f"flap {self.flaps}×" if self.flaps else _gbps(self.speed_mbps))

    def to_dict(self, now: float) -> dict:
        """One rail of ``rails`` in ``watch --json`` / ``status --json``."""
        return {"netdev": self.netdev, "up": self.up, "down_s": None if self.down_since is None
                else round(now - self.down_since, 1), "speed_mbps": self.speed_mbps,
                "expected_mbps": self.expected_mbps, "mtu": self.mtu, "expected_mtu": self.expected_mtu,
                "rdma_port": self.port_state, "flaps_10min": self.flaps, "err_per_s": self.err_rate,
                "rates_per_s": {k: round(v, 3) for k, v in self.rates.items()}, "level": self.level}


def _gbps(mbps: int | None) -> str:
    if not mbps:
        return "?"
    return f"{mbps / 1000:g}G" if mbps >= 1000 else f"{mbps}M"


def _rate(v: float) -> str:
    return "0" if v == 0 else f"{v:.2g}" if v < 10 else f"{v:,.0f}"


@dataclass
class _Track:
    samples: deque[tuple[float, dict[str, int]]] = field(default_factory=deque)
    flaps: deque[float] = field(default_factory=deque)
    last_changes: int | None = None
    base: int | None = None  # carrier_changes at a moment the link was up
    completed: int = 0  # down-and-ups counted since base
    last_up: bool | None = None
    down_since: float | None = None
    last_at: float | None = None


class RailTracker:
    """Folds rounds in; ``views`` says each rail now."""

    def __init__(self, expected_mbps: int | None = None, expected_mtu: int | None = None) -> None:
        self.expected_mbps, self.expected_mtu = expected_mbps, expected_mtu
        self._tracks: dict[str, _Track] = {}
        self.views: dict[str, RailView] = {}

    def feed(self, readings: dict[str, RailReading], at: float) -> dict[str, RailView]:
        for netdev, r in readings.items():
            t = self._tracks.setdefault(netdev, _Track())
            up = r.up
            if r.carrier_changes is not None:
                if t.last_changes is None or r.carrier_changes < t.last_changes:  # first look, or a reload
                    t.last_changes, t.base, t.completed = r.carrier_changes, (r.carrier_changes if up else None), 0
                elif t.base is None and up:  # counted from a moment the link was up
                    t.base = r.carrier_changes
                if t.base is not None:  # every two changes since then: one completed down-and-up
                    done = (r.carrier_changes - t.base) // 2
                    new = min(max(0, done - t.completed), _possible_flaps(t.last_at, at))
                    t.flaps.extend([at] * new)
                    t.completed = max(t.completed, done)
                    while len(t.flaps) > MAX_FLAPS:
                        t.flaps.popleft()
                t.last_changes = r.carrier_changes
            elif t.last_up is False and up is True:
                t.flaps.append(at)
            if up is False and t.down_since is None:
                t.down_since = at
            elif up is not False:
                t.down_since = None
            t.last_up = up
            t.last_at = at
            t.samples.append((at, dict(r.counters)))
            while t.samples and at - t.samples[0][0] > RATE_WINDOW_S:
                t.samples.popleft()
            while t.flaps and at - t.flaps[0] > FLAP_WINDOW_S:
                t.flaps.popleft()
            self.views[netdev] = RailView(
                netdev, up, t.down_since, r.speed_mbps, self.expected_mbps, r.mtu, self.expected_mtu,
                r.port_state, len(t.flaps), t.flaps[0] if t.flaps else None, _rates(t.samples), at)
        return self.views


def _possible_flaps(since: float | None, at: float) -> int:
    """The most down-and-ups a link can make between two reads: a jump of ``carrier_changes`` past it
    (a counter a broken driver or a hostile station reports) is clamped, never a huge flap list."""
    return 1 + int(max(0.0, at - since) * MAX_FLAPS_PER_S) if since is not None else 1


def _rates(samples: deque[tuple[float, dict[str, int]]]) -> dict[str, float]:
    """Per second between the oldest and newest sample of the window; a counter that went down (the
    driver reloaded) starts over. With one sample only: 0 for every counter read."""
    (t0, first), (t1, last) = samples[0], samples[-1]
    out = {}
    for k, v in last.items():
        if k in first and t1 > t0:
            out[k] = max(0, v - first[k]) / (t1 - t0)
        else:
            out[k] = 0.0
    return out
