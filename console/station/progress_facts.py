"""The times and values the progress judge (console/station/progress.py) reads of one station, kept
as its messages come: the last log line, the engine's phase changes, each GPU's idle power, the
generation-token counter and the API's requests. Pure: every time comes from a message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from console.probes.docker import newest_stamps, parse_time
from console.serving.metrics import known
from console.station.messages import EngineUpdate, GpuSample, LogBatch, LogMarker, ServingUpdate
from console.vocabulary import EnginePhase

if TYPE_CHECKING:
    from console.serving.metrics import ServingSnapshot


#: A GPU at or under this utilization is idle: its power then is the GPU's idle power.
IDLE_UTIL_PCT = 10


@dataclass
class ProgressFacts:
    """The times and values the progress judge reads, kept as messages come (wall times)."""

    log_line_at: float | None = None  # the last log line (not a marker)
    phase: EnginePhase | None = None
    phase_since: float | None = None  # when the engine's phase last changed
    idle_power_w: dict[int, float] = field(default_factory=dict)  # per GPU: lowest power seen while idle
    tokens: float | None = None  # the generation-token counter as last read (None: not in /metrics)
    tokens_read_at: float | None = None  # the scrape it came from
    tokens_moved_at: float | None = None  # when it last changed (a reset is a change; first read starts it)
    tokens_first_at: float | None = None  # the first read of it (a move is a change seen after this)
    down_at: float | None = None  # the container was seen running, then not (None: up, or never seen up)
    active_since: float | None = None  # requests running or waiting since (None: none)
    quiet_since: float | None = None  # no request since

    @property
    def seen_moving(self) -> bool:
        """The counter was seen to change after its first read (until then a frozen one proves nothing)."""
        return None not in (self.tokens_moved_at, self.tokens_first_at) and self.tokens_moved_at > self.tokens_first_at

    def serving(self, snap: ServingSnapshot) -> None:
        """A poll of the API: a new scrape moves the counter's facts (the same scrape twice, nothing)."""
        at = snap.updated_at
        if at is None or at == self.tokens_read_at:
            return
        value = known(snap.gen_tokens_total)  # INVALID (out of range) is no count
        if value is None:
            self.tokens, self.tokens_moved_at, self.tokens_first_at = None, None, None
        elif self.tokens is None or value != self.tokens:  # moved, reset (a restart), or first seen
            self.tokens_moved_at = at
            if self.tokens is None:
                self.tokens_first_at = at
        self.tokens, self.tokens_read_at = value, at
        running = snap.running if snap.running == snap.running else None
        waiting = snap.waiting if snap.waiting == snap.waiting else None
        active = bool(running) or bool(waiting)
        if active and self.active_since is None:
            self.active_since, self.quiet_since = at, None
        elif not active and self.quiet_since is None:
            self.active_since, self.quiet_since = None, at

    def note(self, msg: object) -> None:
        """Keep what the progress judge needs: when the last log line was printed (its docker stamp
        when it has one and it is not ahead of us), when the engine's phase last changed, each GPU's
        idle power, and the generation-token counter with when it last moved."""
        match msg:
            case LogBatch():
                if any(not isinstance(line, LogMarker) for line in msg.lines):
                    at = msg.at
                    stamps = [t for st in newest_stamps(msg.stamps) if (t := parse_time(st)) is not None]
                    if stamps:
                        at = min(at, max(stamps))
                    self.log_line_at = at if self.log_line_at is None else max(self.log_line_at, at)
            case EngineUpdate():
                if msg.progress.phase != self.phase:
                    self.phase, self.phase_since = msg.progress.phase, msg.at
            case GpuSample():
                for g in msg.gpus:
                    if g.power_w is not None and g.util_pct is not None and g.util_pct <= IDLE_UTIL_PCT:
                        self.idle_power_w[g.index] = min(self.idle_power_w.get(g.index, g.power_w), g.power_w)
            case ServingUpdate():
                self.serving(msg.snapshot)
