"""One GPU's memory as the console shows it (on GB10's unified memory, drawn from its processes and
the host's memory) and its recent history, as the station state (console/station/state.py) derives
them for the meters and the history plot.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: GPU samples kept per GPU for its history (the meter's sparkline and plot).
HISTORY = 120


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory as the console shows it. ``unified``: GB10, where nvidia-smi reports no
    memory: ``used`` is the sum of the GPU's processes, ``total`` the host's memory (None until a
    host-memory sample came). A GPU that could not be read has neither."""

    used_mib: float | None
    total_mib: float | None
    unified: bool = False

    @property
    def note(self) -> str:
        return "unified" if self.unified else ""

    @property
    def frac(self) -> float | None:
        return self.used_mib / self.total_mib if self.used_mib is not None and self.total_mib else None


@dataclass
class GpuTrace:
    """One GPU's memory and utilization over its last ``HISTORY`` samples, by the samples' own
    clock (newest last). A sample drawn again (new processes, host memory) replaces its entry."""

    times: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    used: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY))
    utils: deque[int | None] = field(default_factory=lambda: deque(maxlen=HISTORY))

    def record(self, at: float, used_mib: float, util: int | None) -> None:
        if self.times and self.times[-1] == at:
            self.used[-1], self.utils[-1] = used_mib, util
        else:
            self.times.append(at)
            self.used.append(used_mib)
            self.utils.append(util)
