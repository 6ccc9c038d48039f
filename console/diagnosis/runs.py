"""Findings belong to a container run: when a newer run of a station's container starts, the old run's
log findings leave the live list (the process they describe is gone) and are kept, newest first, as
that station's previous runs. ``Diagnoser`` (``console.diagnosis.engine``) inherits this from ``RunBook``.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable

from console.diagnosis.findings import Candidate, Evidence, Finding, PastRun, SourceState
from console.probes.docker import parse_time

MAX_PAST_RUNS = 3  # ended runs (with findings) kept per station, newest first


class RunBook:
    """The container runs of ``Diagnoser`` (see the module docstring)."""

    version: int
    ranked: Callable[[], list[Finding]]
    _run_of: dict[str, tuple[float, float | None]]  # station -> its run's (start, finish) times
    _past: dict[str, deque[PastRun]]  # station -> its ended runs' findings, newest first
    _findings: dict[tuple[str, str], Finding]
    _sources: dict[str, SourceState]
    _exits: dict[str, Candidate]
    _versions: dict[tuple[str, str], tuple[str, Evidence, str | None, int]]

    def note_run(self, station: str, started_at: str | None, finished_at: str | None = None) -> bool:
        """The station's container as last read (docker's StartedAt / FinishedAt). Findings belong to a
        run: when a newer run starts, the old run's log findings leave the live list (the process they
        describe is gone) for ``previous_runs``. True when that happened. A run with no start time (a
        container never started, or removed) changes nothing: the findings stay with the last run known."""
        start = parse_time(started_at) if started_at else None
        if start is None:
            return False
        finish = parse_time(finished_at) if finished_at else None
        known = self._run_of.get(station)
        if known is not None and start < known[0]:
            return False  # an older run read late: the newer one stands
        self._run_of[station] = (start, finish if finish is not None and finish >= start else None)
        if known is None or known[0] == start:
            return False
        old_start, old_finish = known
        self.end_run(station, old_start, old_finish if old_finish is not None else start, old_finish is not None)
        return True

    def end_run(self, station: str, started: float | None, ended: float | None, seen: bool) -> None:
        """The station's run fed so far has ended (``ended``: when; ``seen``: its own finish time, else an
        upper bound such as the next run's start). Move the station's log findings (its container log and
        its kernel log since the run started) to its past runs, and start its sources afresh (their line numbers go on: the log view keeps the old
        lines above the new run's)."""
        kept = tuple(dataclasses.replace(f, evidence=list(f.evidence)) for f in self.ranked()
                     if f.station == station and f.origin == "log")
        if kept:
            past = self._past.setdefault(station, deque(maxlen=MAX_PAST_RUNS))
            past.appendleft(PastRun(station, started, ended, seen, kept))
        for key in [k for k, f in self._findings.items() if k[1] == station and f.origin == "log"]:
            del self._findings[key]
        kernel = f"{station}\x00kernel"
        for source in (station, kernel):
            old = self._sources.get(source)
            if old is not None:
                self._sources[source] = SourceState(count=old.count, station=old.station, label=old.label,
                                                    kernel=old.kernel)
        self._exits.pop(station, None)
        for key in [k for k in self._versions if k[0] in (station, kernel)]:
            del self._versions[key]
        self.version += 1

    def previous_runs(self, station: str | None = None) -> list[PastRun]:
        """Ended runs with findings (of ``station``, or of every station), newest first."""
        runs = [r for name, past in self._past.items() if station in (None, name) for r in past]
        return sorted(runs, key=lambda r: -(r.ended_at or 0.0))
