"""Engine start-up progress read from container log lines (vLLM and SGLang), any prefix.

Pure and incremental: ``EngineLogTracker.feed_classified(batch)`` reads a batch's classification (the
one scan of ``console.catalogue.classify``, shared with the diagnosis) and returns True when the phase,
the transport, the fatal line or the timeline changed, so a station service can post a small message
only when something the operator sees has moved. What each line means (the markers, the figures, the
timeline events) is the catalogue's (``console.catalogue.markers``); this module keeps the
state.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from console import catalogue
from console.catalogue.classify import ClassifiedBatch, LineMarks, classify
from console.probes.docker import parse_time
from console.probes.nccl_transport import worse
from console.vocabulary import EnginePhase, NcclTransport, phase_text

READY_MARKERS = catalogue.READY_MARKERS


# ---------------------------------------------------------------- start-up timeline
# The start-up events of one station, in order; the log lines that mark them are the catalogue's
# (``TIMELINE_MARKERS``), the others the launch records itself.
TimelineEventId = Literal["container-started", "engine-up", "nccl-init", "weights-start", "weights-end",
                          "kv-cache", "cuda-graphs", "port-open", "health-ok", "first-token"]
TIMELINE_ORDER: tuple[TimelineEventId, ...] = (
    "container-started", "engine-up", "nccl-init", "weights-start", "weights-end", "kv-cache", "cuda-graphs",
    "port-open", "health-ok", "first-token")
TIMELINE_LABELS: dict[str, str] = {
    "container-started": "container started", "engine-up": "engine process up", "nccl-init": "NCCL init complete",
    "weights-start": "weights loading", "weights-end": "weights loaded", "kv-cache": "KV cache allocated",
    "cuda-graphs": "CUDA graphs captured", "port-open": "API port open", "health-ok": "/health 200",
    "first-token": "first token"}


@dataclass(frozen=True)
class TimelineEvent:
    """One start-up event of one station: ``at`` in Unix seconds; ``values`` the logged figures."""

    event: str
    at: float
    detail: str = ""
    values: tuple[tuple[str, float], ...] = ()

    def value(self, key: str) -> float | None:
        return next((v for k, v in self.values if k == key), None)

    def to_json(self) -> dict[str, str | None]:
        stamp = dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        return {"event": self.event, "at": stamp, "detail": self.detail}


def timeline_detail(event: str, values: dict[str, float]) -> str:
    """The short text an event shows: "218.00 GiB in 240.1 s", "11.23 GiB, 193,696 tokens"."""
    gib, sec, tok = values.get("gib"), values.get("seconds"), values.get("tokens")
    if event == "kv-cache" and gib is None and "k" in values and "v" in values:
        gib = values["k"] + values["v"]
    parts = []
    if event == "cuda-graphs":
        parts = [f"{sec:.0f} s" if sec is not None else "", f"{gib:.2f} GiB" if gib is not None else ""]
    else:
        if gib is not None:
            parts.append(f"{gib:.2f} GiB" + (f" in {sec:.1f} s" if sec is not None else ""))
        if tok is not None:
            parts.append(f"{int(tok):,} tokens")
    return ", ".join(p for p in parts if p)


FATAL_LINES_MAX = 8  # a failed run's fatal lines kept (each rank's, the engine's); the log keeps the rest


@dataclass
class EngineProgress:
    phase: EnginePhase = EnginePhase.STARTING
    load_pct: int | None = None
    weights_gib: float | None = None
    transport: NcclTransport = NcclTransport.UNKNOWN
    fatal: str | None = None  # the run's first fatal line (the one that names the error)
    fatal_lines: tuple[str, ...] = ()  # every distinct fatal line of the run, in order (up to FATAL_LINES_MAX)
    headless: bool = False
    notes: list[str] = field(default_factory=list)
    timeline: tuple[TimelineEvent, ...] = ()
    # The NCCL this run loaded (first seen), and the log words that said so
    nccl_version: str | None = None
    nccl_version_line: str = ""
    # the timeline's events came from a run whose start (its new-run line) was never read: the console
    # attached to an engine already up, so "start-up +0:00" from the first event seen would be a lie
    attached: bool = False

    @property
    def label(self) -> str:
        return phase_text(self.phase, self.load_pct)


class EngineLogTracker:
    def __init__(self, engine: str = "vllm", head: bool = True):
        self.engine = engine
        self.head = head
        self._ready = READY_MARKERS.get(engine, READY_MARKERS["vllm"])
        self.reset()

    def reset(self, start_seen: bool = False) -> None:
        self.progress = EngineProgress()
        self._start_seen = start_seen
        self._channel: NcclTransport | None = None
        self._hint: NcclTransport | None = None

    def feed_batch(self, lines: list[str]) -> bool:
        """Feed many lines (classified here); True when the phase changed."""
        return self.feed_classified(classify(lines))

    def feed(self, line: str, at: float | None = None) -> bool:
        """One line; ``at``: its time (the docker timestamp), else now. True when the phase, the
        transport, the fatal line or the timeline changed."""
        return self.feed_classified(classify([line]), at)

    def feed_stamped(self, batch: ClassifiedBatch, stamps: Sequence[str | None]) -> bool:
        """A batch whose lines carry their docker timestamps: each marked line is read at its own time,
        so a backlog read when the console attaches keeps the engine's real start-up times."""
        return self.feed_classified(batch, stamps=stamps)

    def feed_classified(self, batch: ClassifiedBatch, at: float | None = None, start: int = 0,
                        stop: int | None = None, stamps: Sequence[str | None] = ()) -> bool:
        """A classified batch (``at``: the time of its lines, else now); True when the phase, the
        transport, the fatal line or the timeline changed. Only the lines holding a start-up marker are
        read one by one; between them only an NCCL line can matter (the ranks are connecting), and the
        batch's text says whether there is one. ``start``/``stop``: only those lines (a launch reads a
        batch line range by line range, each at its own docker time)."""
        stop = len(batch.lines) if stop is None else stop
        changed = False
        done = start
        for idx, marks in batch.marks.items():
            if idx < start:
                continue
            if idx >= stop:
                break
            changed |= self._connecting(batch, done, idx)
            changed |= self._apply(marks, _stamp_time(stamps, idx) or at)
            done = idx + 1
        return self._connecting(batch, done, stop) or changed

    def _connecting(self, batch: ClassifiedBatch, start: int, stop: int) -> bool:
        p = self.progress
        if p.phase == EnginePhase.STARTING and batch.holds_any(catalogue.NCCL_WORDS, start, stop):
            p.phase = EnginePhase.CONNECTING
            return True
        return False

    def _apply(self, line: LineMarks, at: float | None) -> bool:
        if line.reset:
            self.reset(start_seen=True)
        p = self.progress
        before = (p.phase, p.load_pct, p.transport, p.fatal)
        timeline = line.timeline is not None and self._feed_timeline(line.timeline, at)
        if line.nccl_version is not None and p.nccl_version is None:  # the first a run names
            p.nccl_version, p.nccl_version_line = line.nccl_version
            timeline = True  # reported as a change, as a new timeline event is
        if line.nccl:
            t = line.transport
            if t and line.channel:  # channel lines are the evidence; the worst channel wins
                self._channel = t if self._channel is None else worse(self._channel, t)
            elif t:
                self._hint = t
            p.transport = self._channel or self._hint or NcclTransport.UNKNOWN
            if p.phase == EnginePhase.STARTING:
                p.phase = EnginePhase.CONNECTING
        if p.phase == EnginePhase.FAILED:
            if line.fatal is not None and self._more_fatal(line.text.strip()[:480]):
                return True  # a crash read at once (between two looks) keeps every fatal line, not the first
            return timeline or before != (p.phase, p.load_pct, p.transport, p.fatal)
        if line.fatal is not None:
            p.phase = EnginePhase.FAILED
            p.fatal = line.text.strip()[:480]  # the start names the error (the screen fits it to its width)
            p.fatal_lines = (p.fatal,)
            return True
        if line.headless:
            p.headless = True
        if line.load_pct is not None:
            p.phase, p.load_pct = EnginePhase.LOADING, line.load_pct
        elif line.phase == EnginePhase.LOADING:
            p.phase, p.load_pct = EnginePhase.LOADING, p.load_pct or 0
        elif line.phase == EnginePhase.LOADED:
            p.phase, p.load_pct = EnginePhase.LOADED, 100
            if line.weights_gib is not None:
                p.weights_gib = line.weights_gib
        elif line.phase is not None:  # kv-cache, graphs
            p.phase = line.phase
        elif line.graphs_done:
            p.phase = EnginePhase.GRAPHS if self.head else EnginePhase.READY
        elif line.holds(self._ready):
            p.phase = EnginePhase.READY
        elif line.shutdown and p.phase == EnginePhase.READY:
            p.phase = EnginePhase.STOPPED
        return timeline or before != (p.phase, p.load_pct, p.transport, p.fatal)

    def _more_fatal(self, text: str) -> bool:
        """Another fatal line of the failed run (a second rank's OOM, the engine's own death): kept
        when new and while there is room."""
        p = self.progress
        if text in p.fatal_lines or len(p.fatal_lines) >= FATAL_LINES_MAX:
            return False
        p.fatal_lines = (*p.fatal_lines, text)
        return True

    def _feed_timeline(self, hit: tuple[str, dict[str, float]], at: float | None) -> bool:
        event, vals = hit
        tl = self.progress.timeline
        old = next((e for e in tl if e.event == event), None)
        if old is not None:
            merged = {**dict(old.values), **{k: v for k, v in vals.items() if k not in dict(old.values)}}
            if merged == dict(old.values):
                return False
            new = TimelineEvent(event, old.at, timeline_detail(event, merged), tuple(merged.items()))
            self.progress.timeline = tuple(new if e is old else e for e in tl)
            return True
        ev = TimelineEvent(event, time.time() if at is None else at, timeline_detail(event, vals), tuple(vals.items()))
        self.progress.timeline = (*tl, ev)
        if not self._start_seen and event != "container-started":
            self.progress.attached = True
        return True


def _stamp_time(stamps: Sequence[str | None], idx: int) -> float | None:
    """Line ``idx``'s docker time, never ahead of this machine's (a station clock that runs ahead must
    not start a phase in our future); None when the line has no stamp."""
    stamp = stamps[idx] if idx < len(stamps) else None
    t = parse_time(stamp) if stamp else None
    return None if t is None else min(t, time.time())
