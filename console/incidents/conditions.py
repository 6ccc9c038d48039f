"""Incidents of a station's health, beside the progress ones of ``detector.py``: a GPU fallen off the
bus or a serious Xid (``gpu-fault``), a rail down or flapping (``rail``), a station unreachable
(``unreachable``). Pure: read from the ``StationState``s on every judge tick, it answers with the
same ``Opened`` / ``Closed`` events, so the recorder writes them to the ledger and the alerts hang
off them as off a wedge.

One incident per kind for the service (the stations it covers named at its opening): it opens when
one station shows the kind and closes when every station reads clear. A station whose source is not
read now (not live, its GPU samples or rails late) keeps what it said last: not read is not clear.
"""

from __future__ import annotations

from collections.abc import Mapping

from console.incidents.detector import Closed, Event, Opened
from console.station.aspects import Aspect
from console.station.state import StationState
from console.vocabulary import ConnState

CONDITION_KINDS: tuple[str, ...] = ("gpu-fault", "rail", "unreachable")
#: How long a station must show the kind before it is an incident (an SSH hiccup is not a page).
HOLD_S: dict[str, float] = {"unreachable": 15.0, "rail": 0.0, "gpu-fault": 0.0}
#: Down-and-ups in the rail tracker's ten minutes that make a rail flapping.
FLAPS_ALARM = 3
NEXT_STEP: dict[str, str] = {
    "gpu-fault": "the GPU needs a reset or a power cycle (nvidia-smi -r with no process on it, else reboot the "
                 "station); the engine on it cannot serve: restart the service after",
    "rail": "check the cable, the switch port and the NIC (k: checks; the rail strip's counters); NCCL falls "
            "back or hangs while a rail is down",
    "unreachable": "check the station's power, network and sshd (ping it, ssh to it); the service cannot serve "
                   "without it",
}

Reading = tuple[str, str]  # ("on", words) | ("off", "") | ("unknown", "")
ON, OFF, UNKNOWN = "on", "off", "unknown"


def read_station(st: StationState, now: float) -> dict[str, Reading]:
    """What one station says of each condition kind now."""
    state = st.conn.state
    unreachable = _unreachable(st, state)
    live = state == ConnState.LIVE
    return {"unreachable": unreachable, "gpu-fault": _gpu_fault(st, now, live), "rail": _rail(st, now, live)}


def _unreachable(st: StationState, state: ConnState) -> Reading:
    """Only a live connection says reachable: one still connecting (or given up) is not known."""
    if state == ConnState.UNREACHABLE:
        return (ON, f"{st.name} unreachable" + (f": {st.conn.detail}" if st.conn.detail else ""))
    return (OFF, "") if state == ConnState.LIVE else (UNKNOWN, "")


def _gpu_fault(st: StationState, now: float, live: bool) -> Reading:
    """A fatal Xid of this run is on whatever else is read; GPUs in error count only from a fresh
    sample of a live station, and only such a sample can say clear."""
    fatal = [x for x in st.run_xids() if x.info_severity == "fatal"]
    lost = st.gpus_in_error if live and not st.stale(Aspect.GPUS, now) else None
    if fatal or lost:
        words = [f"{st.name} GPU {g.index}: {g.error}" for g in lost or ()]
        words += [f"{st.name} {x.words()}" for x in fatal[-2:]]
        return (ON, "; ".join(words))
    return (OFF, "") if lost is not None else (UNKNOWN, "")


def _rail(st: StationState, now: float, live: bool) -> Reading:
    """A rail down or flapping, from a fresh read of a live station's rails; no such read is unknown."""
    views = st.rails.views
    if not live or st.stale(Aspect.RAILS, now) or not views:
        return (UNKNOWN, "")
    bad = [f"{st.name} rail {dev} " + ("down" if v.up is False else f"flapped {v.flaps}x in 10 min")
           for dev, v in sorted(views.items()) if v.up is False or v.flaps >= FLAPS_ALARM]
    return (ON, "; ".join(bad)) if bad else (OFF, "")


class ConditionDetector:
    """The health incidents of one service (see the module)."""

    def __init__(self, hold_s: Mapping[str, float] = HOLD_S) -> None:
        self.hold_s = dict(hold_s)
        self._on: dict[tuple[str, str], tuple[float, str]] = {}  # (kind, station) -> (seen since, words)
        self.open: dict[str, Opened] = {}

    def step(self, stations: Mapping[str, StationState], now: float) -> list[Event]:
        for st in stations.values():
            for kind, (status, words) in read_station(st, now).items():
                key = (kind, st.name)
                if status == ON:
                    since = self._on[key][0] if key in self._on else now
                    self._on[key] = (since, words)
                elif status == OFF:
                    self._on.pop(key, None)
        out: list[Event] = []
        for kind in CONDITION_KINDS:
            mine = {name: v for (k, name), v in self._on.items() if k == kind}
            held = {name: v for name, v in mine.items() if now - v[0] >= self.hold_s.get(kind, 0.0)}
            if kind not in self.open and held:
                names = tuple(sorted(held))
                ev = Opened(kind, min(v[0] for v in held.values()), names,
                            "; ".join(held[n][1] for n in names), NEXT_STEP[kind])
                self.open[kind] = ev
                out.append(ev)
            elif kind in self.open and not mine:
                del self.open[kind]
                out.append(Closed(kind, now))
        return out
