"""What the progress judge says (console/station/progress.py), as data every reader shares.

``Verdict``: one station's (or the service's) progress. ``Judgement``: one tick of the judge, every
station's verdict and the service's, stored on the fleet (``Stations.judged``) so that the dashboard
(banner, serving panel, fleet rows), the flight recorder, ``watch`` and ``status`` read the same
verdicts instead of judging again. Pure data: no state, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.vocabulary import PROGRESS_ALARMS, Progress


@dataclass(frozen=True)
class Verdict:
    """One station's (or the service's) progress: the state, since when (wall time; None: not
    known), one line that says it, and the evidence lines behind it."""

    state: Progress
    since: float | None
    words: str
    evidence: tuple[str, ...] = ()
    station: str | None = None  # the service's verdict: the station it comes from (out of step: the cause)
    judged_at: float | None = None  # unknown only until then (wall time): the counter is being watched
    stragglers: tuple[str, ...] = ()  # out of step: the stations behind (the cause)
    consequence: tuple[str, ...] = ()  # the stations gone from the job after (the watchdog's kill)

    @property
    def alarm(self) -> bool:
        """Something should move and nothing does (the dashboard's banner)."""
        return self.state in PROGRESS_ALARMS

    def since_s(self, now: float) -> float | None:
        """How long it has held (``progress_since_s``), rounded to 0.1 s."""
        return None if self.since is None else round(max(0.0, now - self.since), 1)


@dataclass(frozen=True)
class Judgement:
    """One tick of the progress judge at ``at`` (wall time; None: not judged yet): each station's
    verdict by name and the service's (None until the first tick)."""

    at: float | None = None
    stations: dict[str, Verdict] = field(default_factory=dict)
    service: Verdict | None = None


#: The fleet's judgement before the judge's first tick: nothing said yet (no banner, no verdict).
NOT_JUDGED = Judgement()
