"""Engine start-up progress read from container log lines (vLLM and SGLang), any prefix.

Pure and incremental: ``EngineLogTracker.feed(line)`` returns True when the phase changed, so a
station service can post a small message only when something the operator sees has moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.diagnosis import catalogue
from console.diagnosis.scan import KeyIndex
from console.probes.nccl_transport import transport_of_line, worse

_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_MODEL_LOADED = re.compile(r"Model loading took ([\d.]+) ?GiB")
_SGL_LOADED = re.compile(r"Load weight end\..*?mem usage=([\d.]+) GB")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# The markers come from the diagnosis catalogue (one source for the launch, the tracker, the log pane).
READY_MARKERS = catalogue.READY_MARKERS
# Lines after which the engine is certainly not coming up on its own: the catalogue's fatal signatures
# (these are their anchors; the signature's pattern decides, as for the launch).
FATAL_MARKERS = catalogue.FATAL_ANCHORS


@dataclass
class EngineProgress:
    phase: str = "starting"  # starting | connecting | loading | loaded | kv-cache | graphs | ready | failed | stopped
    load_pct: int | None = None
    weights_gib: float | None = None
    transport: str = "unknown"
    fatal: str | None = None
    headless: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        if self.phase == "loading" and self.load_pct is not None:
            return f"loading weights {self.load_pct}%"
        return {"kv-cache": "allocating KV cache", "graphs": "capturing CUDA graphs",
                "loaded": "weights loaded"}.get(self.phase, self.phase)


# Lines that start a new run of the container: the phase starts over.
RESET_MARKERS = catalogue.RESET_MARKERS
# Substrings every line feed() reacts to contains (phase, transport, headless, ready, reset lines);
# a batch is scanned for these and the fatal markers with catalogue keys, and only lines holding one
# are parsed. Most of a busy log is request and throughput lines that change nothing.
# test_engine_log_anchors_cover_every_marker keeps this list honest.
_ANCHORS = ("NCCL", "NET/", *(m for _p, m in catalogue.PHASE_MARKERS), "headless", "Shutting down",
            *READY_MARKERS.values(), *RESET_MARKERS)
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

    def feed(self, line: str) -> bool:
        if any(m in line for m in RESET_MARKERS):
            self.reset()
        p = self.progress
        before = (p.phase, p.load_pct, p.transport, p.fatal)
        if "\x1b" in line:
            line = _ANSI.sub("", line)
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
            p.fatal = line.strip()[-240:]
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
