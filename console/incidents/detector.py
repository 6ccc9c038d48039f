"""When an incident begins and ends, and which freezes healed by themselves (micro-stalls). Pure: fed
the service's progress verdict (console/station/progress.py) and the head's progress facts on every
judge tick, it answers with events; the recorder (``recorder.py``) writes them down and captures.

An incident opens when the service's verdict turns to one of ``INCIDENT_KINDS`` (wedged, stuck, and
any alarm added later: one line there) and closes when the service is progressing or idle again
(``unknown`` in between closes nothing: an API that stops answering during a wedge is not its end).

A stall is a freeze of the generation-token counter with requests in flight that moved again
before the wedge window ran out: measured from the last move seen to the next, less one poll of the
API (the freeze began after the last read that saw a move and ended before the first that saw the
next; the midpoint is the estimate), counted only when at least ``STALL_MIN_S`` and at least 2.5
polls long (a counter read every 2 s moves once a read when healthy).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from console.station.progress_facts import ProgressFacts
from console.station.verdict import Verdict
from console.vocabulary import Progress

#: The service verdicts that are incidents, and the incident's kind (a new alarm state: one line).
INCIDENT_KINDS: dict[str, str] = {
    "wedged": "wedge",
    "stuck": "stuck",
    "out-of-step": "out-of-step",
    "peer-down": "rank-death",
}
#: What to do next, per kind (the ledger's ``next_step``).
NEXT_STEP: dict[str, str] = {
    "wedge": "read the bundle's verdict.txt (py-spy stacks, flight recorder, NCCL RAS: who waits on whom), "
             "then restart the service (R); a wedge does not heal",
    "stuck": "read the bundle's RAS and py-spy for the rank that never arrived; check the rails (k), then restart",
    "out-of-step": "the bundle's RAS and flight recorder name the rank behind; read its stack, then restart",
    "rank-death": "a rank of the job is gone (the watchdog, a crash): read its last log lines and the bundle's "
                  "RAS for the rank that fell behind first, then restart the whole service (R)",
}
DEFAULT_NEXT = "read the bundle's verdict.txt, then decide on a restart"
CLEARED = frozenset({Progress.PROGRESSING, Progress.IDLE})
STALL_MIN_S = 5.0
POLLS_FOR_STALL = 2.5


@dataclass(frozen=True)
class Opened:
    kind: str
    start: float
    stations: tuple[str, ...]
    verdict: str
    next_step: str


@dataclass(frozen=True)
class Closed:
    kind: str
    end: float


@dataclass(frozen=True)
class Widened:
    """More stations turned alarmed while the incident was open (ranks reach a hang a poll apart)."""

    kind: str
    stations: tuple[str, ...]


@dataclass(frozen=True)
class StallSeen:
    start: float
    seconds: float
    stations: tuple[str, ...]
    running: float | None


Event = Opened | Closed | StallSeen | Widened


def incident_kind(state: Progress | str) -> str | None:
    return INCIDENT_KINDS.get(str(state))


class Detector:
    """One service's incidents and stalls; ``stations``: every station's name (a stall of the
    head's counter is every rank's: tensor-parallel ranks generate together)."""

    def __init__(self, window_s: float, stations: tuple[str, ...]) -> None:
        self.window_s, self.stations = window_s, stations
        self.open: Opened | None = None
        self._moved: float | None = None  # the counter's last move seen
        self._read: float | None = None  # the last scrape seen
        self._poll_s = 2.0  # the API's read interval, as seen
        self._running: float | None = None  # the most requests in flight during the current freeze
        self._alarm_in_freeze = False  # an incident opened during this freeze: not a stall

    def step(self, service: Verdict, verdicts: dict[str, Verdict], facts: ProgressFacts | None,
             running: float | None, now: float) -> list[Event]:
        out: list[Event] = []
        kind = incident_kind(service.state)
        alarmed = tuple(n for n, v in verdicts.items() if v.alarm or incident_kind(v.state))
        if self.open is None and kind is not None:
            alarmed = alarmed or self.stations
            self.open = Opened(kind, service.since if service.since is not None else now, alarmed, service.words,
                               NEXT_STEP.get(kind, DEFAULT_NEXT))
            self._alarm_in_freeze = True
            out.append(self.open)
        elif self.open is not None and service.state in CLEARED:
            out.append(Closed(self.open.kind, now))
            self.open = None
        elif self.open is not None and not set(alarmed) <= set(self.open.stations):
            wider = tuple(n for n in self.stations if n in set(alarmed) | set(self.open.stations))
            wider += tuple(n for n in (*self.open.stations, *alarmed) if n not in wider)
            self.open = replace(self.open, stations=wider)
            out.append(Widened(self.open.kind, wider))
        if facts is not None:
            out += self._stall(facts, running)
        return out

    def _stall(self, f: ProgressFacts, running: float | None) -> list[Event]:
        if f.tokens_read_at is not None and f.tokens_read_at != self._read:
            if self._read is not None:
                gap = f.tokens_read_at - self._read
                if 0 < gap < 60:
                    self._poll_s = 0.7 * self._poll_s + 0.3 * gap
            self._read = f.tokens_read_at
        moved = f.tokens_moved_at
        out: list[Event] = []
        if moved is not None and self._moved is not None and moved > self._moved:
            gap = moved - self._moved
            through = f.active_since is not None and f.active_since <= self._moved  # requests all along
            if (through and not self._alarm_in_freeze and gap >= max(STALL_MIN_S, POLLS_FOR_STALL * self._poll_s)
                    and gap < self.window_s + self._poll_s):
                out.append(StallSeen(self._moved + self._poll_s / 2, max(0.0, gap - self._poll_s), self.stations,
                                     self._running))
        if moved != self._moved:
            self._moved, self._running, self._alarm_in_freeze = moved, None, self.open is not None
        if running is not None and running == running:
            self._running = running if self._running is None else max(self._running, running)
        return out
