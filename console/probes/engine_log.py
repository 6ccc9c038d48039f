"""Engine start-up progress read from container log lines (vLLM and SGLang), any prefix.

Pure and incremental: ``EngineLogTracker.feed(line)`` returns True when the phase changed, so a
station service can post a small message only when something the operator sees has moved.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from dataclasses import dataclass, field
from typing import Literal

from console.diagnosis import catalogue
from console.diagnosis.scan import KeyIndex
from console.probes.nccl_transport import transport_of_line, worse
from console.vocabulary import EnginePhase, NcclTransport, phase_text

_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_MODEL_LOADED = re.compile(r"Model loading took ([\d.]+) ?GiB")
_SGL_LOADED = re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# The markers come from the diagnosis catalogue (one source for the launch, the tracker, the log pane).
READY_MARKERS = catalogue.READY_MARKERS
# Lines after which the engine is certainly not coming up on its own: the catalogue's fatal signatures
# (these are their anchors; the signature's pattern decides, as for the launch).
FATAL_MARKERS = catalogue.FATAL_ANCHORS


# ---------------------------------------------------------------- start-up timeline (data)
# The start-up events a log shows, as one table of (event, pattern): the first line matching an
# event records it (at the line's time); a later match of the same event adds its values (vLLM
# logs the KV cache in two lines). Named groups give the figures: gib, seconds, tokens, k, v.
# This table is log knowledge: it moves to the diagnosis catalogue with the other markers.
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
TIMELINE_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((e, re.compile(p)) for e, p in (
    ("engine-up", r"vLLM API server version|headless multiproc executor|server_args=ServerArgs\("),
    ("nccl-init", r"NCCL INFO .*Init COMPLETE|Init torch distributed ends"),
    ("weights-start", r"Starting to load model|Load weight begin"),
    ("weights-end", r"Model loading took (?P<gib>[\d.]+) ?GiB(?: memory)? and (?P<seconds>[\d.]+) seconds"),
    ("weights-end", r"Model loading took (?P<gib>[\d.]+) ?GiB"),
    ("weights-end", r"Load weight end\..*mem usage=(?P<gib>[\d.]+) GB"),
    ("kv-cache", r"Available KV cache memory: (?P<gib>[\d.]+) GiB"),
    ("kv-cache", r"(?:GPU|CPU) KV cache size: (?P<tokens>[\d,]+) tokens"),
    ("kv-cache", r"KV Cache is allocated\. #tokens: (?P<tokens>\d+), K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB"),
    ("kv-cache", r"KV Cache is allocated\. #tokens: (?P<tokens>\d+), KV size: (?P<gib>[\d.]+) GB"),
    ("cuda-graphs", r"Graph capturing finished in (?P<seconds>[\d.]+) secs?(?:, took (?P<gib>[\d.]+) GiB)?"),
    ("cuda-graphs", r"Capture cuda graph end\. Time elapsed: (?P<seconds>[\d.]+) s"),
))
_TIMELINE_ANCHORS = ("API server version", "headless", "server_args", "Init COMPLETE", "Init torch distributed ends",
                     "oad", "KV", "raph")


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


def match_timeline(line: str) -> tuple[str, dict[str, float]] | None:
    """(event, figures) when this log line marks a start-up event."""
    if not any(a in line for a in _TIMELINE_ANCHORS):
        return None
    for event, pat in TIMELINE_MARKERS:
        m = pat.search(line)
        if m:
            vals = {k: float(v.replace(",", "")) for k, v in m.groupdict().items() if v}
            return event, vals
    return None




@dataclass
class EngineProgress:
    phase: EnginePhase = EnginePhase.STARTING
    load_pct: int | None = None
    weights_gib: float | None = None
    transport: NcclTransport = NcclTransport.UNKNOWN
    fatal: str | None = None
    headless: bool = False
    notes: list[str] = field(default_factory=list)
    timeline: tuple[TimelineEvent, ...] = ()

    @property
    def label(self) -> str:
        return phase_text(self.phase, self.load_pct)


# Lines that start a new run of the container: the phase starts over.
RESET_MARKERS = catalogue.RESET_MARKERS
# Substrings every line feed() reacts to contains (phase, transport, headless, ready, reset lines);
# a batch is scanned for these and the fatal markers with catalogue keys, and only lines holding one
# are parsed. Most of a busy log is request and throughput lines that change nothing.
# test_engine_log_anchors_cover_every_marker keeps this list honest.
_ANCHORS = ("NCCL", "NET/", *(m for _p, m in catalogue.PHASE_MARKERS), "headless", "Shutting down",
            *READY_MARKERS.values(), *RESET_MARKERS, *_TIMELINE_ANCHORS)
_SCAN = KeyIndex((*_ANCHORS, *FATAL_MARKERS))
_PHASES = {m: p for p, m in catalogue.PHASE_MARKERS}


class EngineLogTracker:
    def __init__(self, engine: str = "vllm", head: bool = True):
        self.engine = engine
        self.head = head
        self.reset()

    def reset(self) -> None:
        self.progress = EngineProgress()
        self._channel: str | None = None
        self._hint: str | None = None

    def feed_batch(self, lines: list[str]) -> bool:
        """Feed many lines; True when the phase changed. Cheap on lines that cannot matter."""
        hits = _SCAN.hits(lines)
        changed = False
        for idx in sorted(hits):
            changed |= self.feed(lines[idx])
        return changed

    def feed(self, line: str, at: float | None = None) -> bool:
        """One line; ``at``: its time (the docker timestamp), else now. True when the phase, the
        transport, the fatal line or the timeline changed."""
        if any(m in line for m in RESET_MARKERS):
            self.reset()
        p = self.progress
        before = (p.phase, p.load_pct, p.transport, p.fatal)
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        if self._feed_timeline(line, at):
            before = ("timeline",)
        if "NCCL" in line or "NET/" in line:
            t = transport_of_line(line)
            if t and " via NET/" in line:  # channel lines are the evidence; the worst channel wins
                self._channel = t if self._channel is None else worse(self._channel, t)
            elif t:
                self._hint = t
            p.transport = self._channel or self._hint or "unknown"
            if p.phase == "starting":
                p.phase = "connecting"
        if p.phase == "failed":
            return before != (p.phase, p.load_pct, p.transport, p.fatal)
        if catalogue.fatal_of_text(line) is not None:
            p.phase = "failed"
            p.fatal = line.strip()[:480]  # the start names the error (the screen fits it to its width)
            return True
        if "headless multiproc executor" in line:
            p.headless = True
        phase = next((ph for m, ph in _PHASES.items() if m in line), None)
        m = _SHARDS.search(line)
        if m:
            p.phase = "loading"
            p.load_pct = int(m.group(1))
        elif phase == "loading":
            p.phase, p.load_pct = "loading", p.load_pct or 0
        elif phase == "loaded" and (m := _MODEL_LOADED.search(line) or _SGL_LOADED.search(line)):
            p.phase, p.load_pct = "loaded", 100
            p.weights_gib = float(m.group(1))
        elif phase == "loaded":
            p.phase, p.load_pct = "loaded", 100
        elif phase == "kv-cache":
            p.phase = "kv-cache"
        elif phase == "graphs":
            p.phase = "graphs"
        elif phase == "graphs-done":
            p.phase = "graphs" if self.head else "ready"
        elif READY_MARKERS.get(self.engine, READY_MARKERS["vllm"]) in line:
            p.phase = "ready"
        elif "Shutting down" in line and p.phase == "ready":
            p.phase = "stopped"
        return before != (p.phase, p.load_pct, p.transport, p.fatal)

    def _feed_timeline(self, line: str, at: float | None) -> bool:
        hit = match_timeline(line)
        if hit is None:
            return False
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
        return True
