"""The unified-memory guard (GB10 pairs, the Spark profile): while an engine loads its weights or
captures its CUDA graphs, the GPU's memory is the host's, and a box whose MemAvailable runs out
can lock up until a power cycle — no SSH, no ``docker stop``. So, during those phases, a fresh
MemAvailable under the floor (``[ui] memory_floor_mib``) is a warning on the station's pane, a
Notice and an alert (``incidents/alert_point.py``), said once when it falls under and once when
it is back; stale or unread memory decides nothing (never "fine" from an old reading either).

Pure: ``low(state, ...)`` judges one station; ``MemoryGuard`` keeps which stations are under the
floor now and answers with the changes, for the TUI's judge tick and ``watch``'s loop alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from console.config import Config
from console.station.aspects import Aspect
from console.station.state import Stations, StationState
from console.vocabulary import EnginePhase

#: The start-up phases in which unified memory fills fastest: weights, KV cache, CUDA graphs.
GUARDED_PHASES = frozenset({EnginePhase.LOADING, EnginePhase.LOADED, EnginePhase.KV_CACHE, EnginePhase.GRAPHS})
PHASE_WORDS = {EnginePhase.LOADING: "weight loading", EnginePhase.LOADED: "weight loading",
               EnginePhase.KV_CACHE: "KV-cache sizing", EnginePhase.GRAPHS: "CUDA-graph capture"}


@dataclass(frozen=True)
class MemoryLow:
    station: str
    available_mib: int
    floor_mib: int
    phase: EnginePhase
    text: str

    def to_json(self) -> dict:
        return {"available_mib": self.available_mib, "floor_mib": self.floor_mib, "phase": str(self.phase),
                "text": self.text}


@dataclass(frozen=True)
class GuardChange:
    """A station fell under the floor (``low`` set) or came back (``low`` None, ``text`` says so)."""

    station: str
    low: MemoryLow | None
    text: str


def gib(mib: int) -> str:
    return f"{mib / 1024:.1f} GiB"


def low(state: StationState, floor_mib: int, now: float) -> MemoryLow | None:
    """``state``'s MemAvailable under ``floor_mib`` during a guarded phase, read fresh (else None)."""
    eng, hm = state.engine, state.host_mem
    if eng is None or eng.phase not in GUARDED_PHASES or hm is None or state.stale(Aspect.HOSTMEM, now):
        return None
    if hm.available_mib >= floor_mib:
        return None
    what = PHASE_WORDS.get(eng.phase, str(eng.phase))
    return MemoryLow(state.name, hm.available_mib, floor_mib, eng.phase,
                     f"MemAvailable {gib(hm.available_mib)} of {gib(hm.total_mib)}, under the floor "
                     f"{gib(floor_mib)} during {what}: unified memory can lock this box up until a power "
                     "cycle — stop the launch (S) or free host memory now")


class MemoryGuard:
    """Which stations are under the floor now; ``step`` answers with what changed since the last."""

    def __init__(self, config: Config) -> None:
        self.on = config.profile.gpu.unified_memory
        self.floor_mib = config.ui.memory_floor_mib
        self.now_low: dict[str, MemoryLow] = {}

    def step(self, stations: Stations, now: float) -> list[GuardChange]:
        if not self.on:
            return []
        out: list[GuardChange] = []
        for st in stations.values():
            got = low(st, self.floor_mib, now)
            was = self.now_low.get(st.name)
            if got is not None:
                self.now_low[st.name] = got
                if was is None:
                    out.append(GuardChange(st.name, got, f"{st.name}: {got.text}"))
            elif was is not None and self._cleared(st, now):
                del self.now_low[st.name]
                hm = st.host_mem
                now_words = f"MemAvailable {gib(hm.available_mib)}" if hm is not None else "the start-up is over"
                out.append(GuardChange(st.name, None, f"{st.name}: memory back above the floor ({now_words})"))
        return out

    def _cleared(self, st: StationState, now: float) -> bool:
        """Back over the floor on a fresh reading, or out of the guarded phases (never on a stale read)."""
        eng = st.engine
        if eng is None or eng.phase not in GUARDED_PHASES:
            return True
        return st.host_mem is not None and not st.stale(Aspect.HOSTMEM, now) \
            and st.host_mem.available_mib >= self.floor_mib
