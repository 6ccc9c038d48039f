"""Engine start-up progress read from container log lines (vLLM and SGLang), any prefix.

Pure and incremental: ``EngineLogTracker.feed(line)`` returns True when the phase changed, so a
station service can post a small message only when something the operator sees has moved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.probes.nccl_transport import transport_of_line, worse

_SHARDS = re.compile(r"Loading safetensors checkpoint shards:\s+(\d+)% Completed \| (\d+)/(\d+)")
_MODEL_LOADED = re.compile(r"Model loading took ([\d.]+) ?GiB")
_SGL_LOADED = re.compile(r"Load weight end\..*mem usage=([\d.]+) GB")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

READY_MARKERS = {
    "vllm": "Application startup complete.",
    "sglang": "The server is fired up and ready to roll!",
}
# Lines after which the engine is certainly not coming up on its own.
FATAL_MARKERS = (
    "Engine core initialization failed",
    "EngineCore encountered a fatal error",
    "EngineDeadError",
    "died unexpectedly",
    "OutOfMemoryError",
    "CUDA out of memory",
    "larger than the available KV cache memory",
    "No available memory for the cache blocks",
    "Watchdog caught collective operation timeout",
    "DistStoreError",
    "Scheduler hit an exception",
    "state cache is too small",
)


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
RESET_MARKERS = ("Launching vLLM", "vLLM API server version", "server_args=ServerArgs")
# Short substrings that every line feed() reacts to contains (each covers several markers): a
# batch is scanned for these once, and only lines holding one are parsed. Most of a busy log is
# request and throughput lines that change nothing. test_engine_log_anchors_cover_every_marker
# keeps this list honest.
_ANCHORS = ("NCCL", "NET/", "oad", "KV", "raph", "headless", "Shutting down", "startup complete", "fired up",
            "ngine core init", "EngineCore enc", "EngineDead", "died unexpectedly", "OutOfMemory", "out of memory",
            "No available memory", "Watchdog caught", "DistStoreError", "Scheduler hit", "state cache",
            "Launching vLLM", "API server version", "server_args")


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
        blob = "\n".join(lines)
        if not any(a in blob for a in _ANCHORS):
            return False
        changed = False
        for line in lines:
            if any(a in line for a in _ANCHORS):
                changed |= self.feed(line)
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
        for marker in FATAL_MARKERS:
            if marker in line:
                p.phase = "failed"
                p.fatal = line.strip()[-240:]
                return True
        if "headless multiproc executor" in line:
            p.headless = True
        m = _SHARDS.search(line)
        if m:
            p.phase = "loading"
            p.load_pct = int(m.group(1))
        elif "Starting to load model" in line or "Load weight begin" in line:
            p.phase, p.load_pct = "loading", p.load_pct or 0
        elif (m := _MODEL_LOADED.search(line) or _SGL_LOADED.search(line)):
            p.phase, p.load_pct = "loaded", 100
            p.weights_gib = float(m.group(1))
        elif "Available KV cache memory" in line or "KV Cache is allocated" in line:
            p.phase = "kv-cache"
        elif "Capturing CUDA graphs" in line or "Capture cuda graph begin" in line:
            p.phase = "graphs"
        elif "Graph capturing finished" in line or "Capture cuda graph end" in line:
            p.phase = "graphs" if self.head else "ready"
        elif READY_MARKERS.get(self.engine, "Application startup complete.") in line:
            p.phase = "ready"
        elif "Shutting down" in line and p.phase == "ready":
            p.phase = "stopped"
        return before != (p.phase, p.load_pct, p.transport, p.fatal)
