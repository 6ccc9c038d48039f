"""The incident window: a ring buffer of time-aligned samples per station, fed from the same
messages ``StationState`` applies (the TUI's ``_route`` and ``watch``'s ``post`` hand each one here
after applying it: no second reader of the stations), and written around an incident into its
bundle as ``window.ndjson``.

Each sample is one JSON object on one line, encoded once when it arrives (a compact string is the
cheapest thing to keep), oldest first when written. Every object has ``t`` (wall time, s),
``station`` and ``kind``; the rest by kind:

- ``gpu``: ``gpus``: ``[{"i", "util", "mem_mib", "mem_total_mib", "power_w", "temp_c", "error"?}]``
  (one nvidia-smi round), ``error`` when the round failed;
- ``health``: ``gpus``: ``[{"i", "sm_mhz", "sm_max_mhz", "power_w", "power_limit_w", "reasons"}]``
  (clocks, power limit and the clocks-event reasons bitmask);
- ``serving`` (the head; the API's poll): ``running``, ``waiting``, ``gen_tokens`` (the
  generation-token counter), ``gen_tok_s``, ``kv``, ``health`` (ok / unhealthy / ...), ``error``;
- ``rails``: ``rails``: ``[{"dev", "up", "speed_mbps", "port", "carrier_changes", "counters"}]``;
- ``kernel``: ``events``: ``[{"kind", "severity", "xid", "text"}]``;
- ``log``: ``lines`` (how many lines in that second) and ``marks``: ``[{"anchors", "text"}]``
  (lines the classifier marked: findings, start-up phases), at most one object per second;
- ``conn`` / ``container`` / ``engine``: ``state`` (or ``phase``) when it changes, with ``detail``.

Bounded: samples older than ``keep_s`` (15 min) go, and a station never keeps more than
``max_bytes`` of encoded text (the oldest go first).
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from console.sanitize import one_line
from console.serving.metrics import known
from console.station.messages import (
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuHealthSample,
    GpuSample,
    KernelEvents,
    LogBatch,
    LogMarker,
    RailsSample,
    ServingUpdate,
)

KEEP_S = 900.0  # 15 minutes: the 10 before an incident and its confirmation
MAX_BYTES = 4 * 1024 * 1024  # per station
MAX_MARKS = 8  # marked log lines kept per second per station
TEXT_CHARS = 300


def _num(x: Any) -> Any:
    """A serving value as recorded: ``INVALID`` as null (the readers' parsers map non-finite to None)."""
    x = known(x)
    return round(x, 3) if isinstance(x, float) else x


def _error(text: str | None, chars: int) -> str | None:
    """An error's words on one line; none (or empty) is null."""
    return one_line(text, chars) if text else None


def _gpu_row(g: Any) -> dict[str, Any]:
    """One GPU of an nvidia-smi round; ``error`` only where that GPU's read failed."""
    return {"i": g.index, "util": g.util_pct, "mem_mib": g.memory_used_mib, "mem_total_mib": g.memory_total_mib,
            "power_w": _num(g.power_w), "temp_c": g.temp_c} | ({"error": one_line(g.error, 200)} if g.error else {})


class Window:
    def __init__(self, keep_s: float = KEEP_S, max_bytes: int = MAX_BYTES) -> None:
        self.keep_s, self.max_bytes = keep_s, max_bytes
        self._rings: dict[str, deque[tuple[float, str]]] = {}
        self._bytes: dict[str, int] = {}
        self._last: dict[tuple[str, str], str] = {}  # (station, kind) -> last state said (conn, engine...)
        self._log: dict[str, list[Any]] = {}  # station -> [second, lines, marks]

    # ------------------------------------------------------------------ in

    def add(self, station: str, t: float, kind: str, body: dict[str, Any]) -> None:
        line = json.dumps({"t": round(t, 3), "station": station, "kind": kind} | body, separators=(",", ":"),
                          ensure_ascii=False)
        ring = self._rings.setdefault(station, deque())
        ring.append((t, line))
        size = self._bytes.get(station, 0) + len(line)
        while ring and (size > self.max_bytes or ring[0][0] < t - self.keep_s):
            size -= len(ring.popleft()[1])
        self._bytes[station] = size

    def note(self, msg: object, head: str | None = None) -> None:
        """One message, as the state applied it (a ``ServingUpdate`` is the head's)."""
        if isinstance(msg, ServingUpdate):
            if head is not None:
                self._serving(head, msg)
            return
        name = getattr(msg, "station", None)
        if not isinstance(name, str):
            return
        for kind, take in _TAKES:  # in order: the first class the message is an instance of
            if isinstance(msg, kind):
                take(self, name, msg)
                return

    def _serving(self, head: str, msg: ServingUpdate) -> None:
        s = msg.snapshot
        self.add(head, s.updated_at or msg.at, "serving", {
            "running": _num(s.running), "waiting": _num(s.waiting), "gen_tokens": _num(s.gen_tokens_total),
            "gen_tok_s": _num(s.gen_tok_s), "kv": _num(s.kv_usage), "health": s.status,
            "error": _error(s.error, TEXT_CHARS)})

    def _gpu(self, name: str, msg: GpuSample) -> None:
        self.add(name, msg.at, "gpu", {"gpus": [_gpu_row(g) for g in msg.gpus],
                                       "error": _error(msg.error, TEXT_CHARS)})

    def _health(self, name: str, msg: GpuHealthSample) -> None:
        self.add(name, msg.at, "health", {"gpus": [
            {"i": g.index, "sm_mhz": g.sm_mhz, "sm_max_mhz": g.sm_max_mhz, "power_w": _num(g.power_w),
             "power_limit_w": _num(g.power_limit_w), "reasons": g.reasons} for g in msg.gpus],
            "error": _error(msg.error, TEXT_CHARS)})

    def _rails(self, name: str, msg: RailsSample) -> None:
        self.add(name, msg.at, "rails", {"rails": [
            {"dev": dev, "up": r.up, "speed_mbps": r.speed_mbps, "port": r.port_state,
             "carrier_changes": r.carrier_changes, "counters": dict(r.counters)}
            for dev, r in sorted(msg.readings.items())], "error": _error(msg.error, 200)})

    def _kernel(self, name: str, msg: KernelEvents) -> None:
        """Only a read that found events is a sample (the last 50 of them)."""
        if msg.events:
            self.add(name, msg.at, "kernel", {"events": [
                {"kind": e.kind, "severity": e.severity, "xid": e.xid, "text": one_line(e.text, TEXT_CHARS)}
                for e in msg.events[-50:]]})

    def _conn(self, name: str, msg: ConnectionState) -> None:
        self._change(name, time.time(), "conn", str(msg.state),
                     {"state": str(msg.state), "detail": one_line(msg.detail, 200)})

    def _container(self, name: str, msg: ContainerUpdate) -> None:
        self._change(name, msg.at, "container", f"{msg.info.state} {msg.info.started_at}",
                     {"state": msg.info.state, "started_at": msg.info.started_at, "exit_code": msg.info.exit_code})

    def _engine(self, name: str, msg: EngineUpdate) -> None:
        phase = str(getattr(msg.progress, "phase", ""))
        self._change(name, msg.at, "engine", phase, {"phase": phase})

    def _change(self, station: str, at: float, kind: str, key: str, body: dict[str, Any]) -> None:
        if self._last.get((station, kind)) == key:
            return
        self._last[(station, kind)] = key
        self.add(station, at, kind, body)

    def _log_batch(self, station: str, msg: LogBatch) -> None:
        sec = int(msg.at)
        pend = self._log.get(station)
        if pend is not None and pend[0] != sec:
            self._flush_log(station)
            pend = None
        if pend is None:
            pend = self._log[station] = [sec, 0, []]
        if any(issubclass(k, LogMarker) for k in set(map(type, msg.lines))):  # (rare: a marker among them)
            pend[1] += sum(1 for ln in msg.lines if not isinstance(ln, LogMarker))
        else:
            pend[1] += len(msg.lines)
        if msg.classified is not None and len(pend[2]) < MAX_MARKS:
            for idx, anchors in msg.classified.diagnosis.items():
                if len(pend[2]) >= MAX_MARKS:
                    break
                pend[2].append({"anchors": sorted(anchors)[:6], "text": one_line(msg.classified.texts[idx], TEXT_CHARS)})

    def _flush_log(self, station: str) -> None:
        pend = self._log.pop(station, None)
        if pend is not None and (pend[1] or pend[2]):
            self.add(station, float(pend[0]), "log", {"lines": pend[1], "marks": pend[2]})

    # ------------------------------------------------------------------ out

    def lines(self, since: float, until: float | None = None) -> list[str]:
        """Every station's samples from ``since`` to ``until`` (inclusive), merged by time."""
        for station in list(self._log):
            self._flush_log(station)
        hi = float("inf") if until is None else until
        parts: Iterable[Iterable[tuple[float, str]]] = [
            [x for x in ring if since <= x[0] <= hi] for ring in self._rings.values()]
        return [line for _, line in heapq.merge(*parts, key=lambda x: x[0])]

    def span(self) -> tuple[float, float] | None:
        """The oldest and newest sample's time, or None when empty."""
        firsts = [r[0][0] for r in self._rings.values() if r]
        lasts = [r[-1][0] for r in self._rings.values() if r]
        return (min(firsts), max(lasts)) if firsts else None

    def encoded_bytes(self) -> int:
        return sum(self._bytes.values())

    def memory_bytes(self) -> int:
        """What the buffer holds in memory (the strings, the tuples, the deques), measured."""
        total = 0
        for ring in self._rings.values():
            total += sys.getsizeof(ring)
            for item in ring:
                total += sys.getsizeof(item) + sys.getsizeof(item[1]) + sys.getsizeof(item[0])
        return total


_TAKES: tuple[tuple[type, Callable[[Window, str, Any], None]], ...] = (
    (GpuSample, Window._gpu), (GpuHealthSample, Window._health), (RailsSample, Window._rails),
    (KernelEvents, Window._kernel), (LogBatch, Window._log_batch), (ConnectionState, Window._conn),
    (ContainerUpdate, Window._container), (EngineUpdate, Window._engine))
