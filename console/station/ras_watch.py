"""The continuous NCCL RAS watch, pure: each short ``ncclras`` read (console/station/ras_monitor.py
asks one every ``RAS_WATCH_EVERY_S`` while an engine serves) is compared with the one before
(console/probes/ncclras.py's ``verdict``), and the job gets one of four words
(``console.vocabulary.RasState``), with since-when, the stations behind and the evidence:

- ``healthy``: the collective counts advance (a spread of an operation or so while they move is the
  read catching the ranks mid-step, not a straggler), or every rank is in step with its GPUs idle
  (an idle engine launches no collective: frozen and equal is what idle looks like);
- ``suspect``: a spread seen on one read only, or every rank frozen in one collective with the
  GPUs busy for less than two intervals;
- ``stuck``: a spread frozen over two reads (the ranks behind are the suspects: NVIDIA/nccl #2213),
  every rank frozen in one collective with its GPUs busy over two intervals, or a rank missing
  from the job; a rank that went missing after others fell behind is the consequence, the ranks
  behind the cause;
- ``unknown``: not read yet, the read failed or is late, or RAS does not answer (and why).

The RAS report is the job's, not one station's: one watch serves the fleet (``Stations.ras``, and
every ``StationState.ras`` is that one object), whichever station the read ran on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.durations import clock
from console.probes import ParseError, ncclras
from console.remote.cmdlines.nccl import RAS_WATCH_EVERY_S, RAS_WATCH_LIMIT_S
from console.sanitize import one_line
from console.station.messages import RasSample
from console.vocabulary import RasState

#: A read older than this proves nothing about now (three intervals and one read's bound).
RAS_LATE_S = 3 * RAS_WATCH_EVERY_S + RAS_WATCH_LIMIT_S
#: Every rank frozen in one collective with its GPUs busy this long is stuck (two intervals: one
#: frozen pair could be a long kernel; a served request launches hundreds of collectives a second).
FROZEN_BUSY_S = 2 * RAS_WATCH_EVERY_S - 0.5


@dataclass(frozen=True)
class RasView:
    """The watch's word at a moment: ``behind`` the stations that fell behind (the stragglers),
    ``missing`` the stations gone from the job, ``cause`` the stations that had fallen behind before
    a rank went missing (the death is then their consequence); ``kind``: the last read's verdict
    (console/probes/ncclras.py: moving, in-step, frozen-equal, out-of-step, missing-ranks,
    unavailable, unknown); ``station``: where the last read ran."""

    state: RasState
    since: float | None
    words: str
    kind: str = "unknown"
    behind: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    cause: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    station: str | None = None
    read_at: float | None = None

    @property
    def alarm(self) -> bool:
        return self.state == RasState.STUCK

    def json(self, now: float) -> dict:
        """``watch --json``/``status --json``'s ``ras`` object."""
        return {"state": str(self.state), "since_s": None if self.since is None else round(max(0.0, now - self.since), 1),
                "why": self.words, "kind": self.kind, "behind": list(self.behind), "missing": list(self.missing),
                "cause": list(self.cause), "read_on": self.station,
                "read_age_s": None if self.read_at is None else round(max(0.0, now - self.read_at), 1)}


@dataclass(frozen=True)
class RankHome:
    """Where a station's ranks run: its name, its rank (one rank per station) and its addresses."""

    name: str
    rank: int
    addresses: tuple[str, ...] = ()


class RasWatch:
    """The job's RAS reads, folded as they come (``apply``); ``view(now, busy)`` says what they mean."""

    def __init__(self, homes: Iterable[RankHome] = ()) -> None:
        self.homes = tuple(homes)
        self.report: ncclras.RasReport | None = None  # the last report read
        self.prev: ncclras.RasReport | None = None  # the one before it
        self.read_at: float | None = None  # when the last read was asked
        self.prev_at: float | None = None
        self.station: str | None = None
        self.why: str | None = None  # the last read gave no report: why
        self.verdict: ncclras.RasVerdict | None = None
        self.frozen_since: float | None = None  # counts unchanged since (the read before the first frozen one)
        self.spread_since: float | None = None  # the ranks out of step since (first read that showed it)
        self.missing_since: float | None = None
        self.behind: tuple[str, ...] = ()  # the last stations seen behind (kept until the job runs in step)
        self.behind_words = ""

    # ------------------------------------------------------------------ reads

    def name(self, report: ncclras.RasReport | None) -> Callable[[int], str]:
        """RAS rank -> station: by the node address RAS names, else by rank when one rank per station."""
        by_addr = {a: h.name for h in self.homes for a in h.addresses if a}
        by_rank = {h.rank: h.name for h in self.homes}
        ranks = report.ranks() if report is not None else {}
        size = report.main().size if report is not None and report.comms else None
        one_each = size is None or size == len(self.homes)

        def name(r: int) -> str:
            x = ranks.get(r)
            if x is not None and x.host in by_addr:
                return by_addr[x.host]
            return by_rank[r] if one_each and r in by_rank else f"rank {r}"
        return name

    def apply(self, msg: RasSample) -> None:
        """Fold one read; a failed or unreadable one forgets the reads before it (nothing to compare)."""
        if msg.error is not None:
            self._absent(msg.station, msg.at, f"the read failed: {one_line(msg.error, 200)}")
            return
        text = msg.text.replace("NO-NCCLRAS-CLIENT\n", "")
        try:
            report = ncclras.parse_ras(text)
        except ParseError:
            self._absent(msg.station, msg.at, self._why_unread(msg.text, text))
            return
        self._read(report, msg.at, msg.station)

    @staticmethod
    def _why_unread(raw: str, text: str) -> str:
        """The client's own reason when it gave one, else the tail of what it printed."""
        return ncclras.unavailable(raw) or (
            f"no RAS report ({one_line(text.strip()[-160:], 160) or 'no output'})")

    def _read(self, report: ncclras.RasReport, at: float, station: str) -> None:
        """Compare a parsed read with the one before and keep the verdict."""
        self.prev, self.prev_at = (self.report, self.read_at) if self.report is not None else (None, None)
        self.report, self.read_at, self.station, self.why = report, at, station, None
        interval = at - self.prev_at if self.prev_at is not None else RAS_WATCH_EVERY_S
        name = self.name(report)
        # the first read is compared with an empty one: "one read", never "frozen"
        first = self.prev or ncclras.RasReport(report.format, report.nccl_version, ())
        v = ncclras.verdict(first, report, round(interval, 1), name)
        self.verdict = v
        self.frozen_since = None if v.kind == "moving" else (self.frozen_since or self.prev_at or at)
        self._track_spread(v, at, name)
        self.missing_since = (self.missing_since or at) if v.kind == "missing-ranks" else None

    def _track_spread(self, v: ncclras.RasVerdict, at: float, name: Callable[[int], str]) -> None:
        """Since when the ranks are out of step, and who is behind: kept until the job moves in step,
        so a rank that dies later can name them as the cause."""
        if v.kind == "moving" and not self._spread(v):
            self.behind, self.behind_words = (), ""  # the job runs in step: nothing behind any more
        if v.kind in ("out-of-step", "moving") and self._spread(v):
            if self.spread_since is None:
                self.spread_since = at
            if v.kind == "out-of-step":
                self.behind = tuple(name(r) for r in sorted(v.behind))
                self.behind_words = v.text
        else:
            self.spread_since = None

    def new_job(self, station: str) -> None:
        """A rank's container started a new run: a new NCCL job, whose collective counts start over. The
        old job's reads compared with the new job's would read a restart that lands on the same counts as
        frozen since before the restart (a stuck incident older than the service it is about)."""
        self.report = self.prev = self.verdict = None
        self.read_at = self.prev_at = None
        self.station, self.why = station, None
        self.frozen_since = self.spread_since = self.missing_since = None
        self.behind, self.behind_words = (), ""

    def _absent(self, station: str, at: float, why: str) -> None:
        self.why, self.read_at, self.station, self.verdict = why, at, station, None
        self.prev = self.report = None
        self.prev_at = None
        self.frozen_since = self.spread_since = self.missing_since = None

    @staticmethod
    def _spread(v: ncclras.RasVerdict) -> bool:
        return bool(v.behind)

    # ------------------------------------------------------------------ the word

    def view(self, now: float, busy: bool = False, serving: bool = True) -> RasView:
        """What the reads say at ``now``; ``busy``: the job's GPUs busy in fresh readings (a frozen,
        equal job with busy GPUs spins in a collective; with idle GPUs it is idle); ``serving``:
        an engine serves (the watch reads only then)."""
        at = self.read_at
        if at is None or now - at > RAS_LATE_S:
            return self._unread(now, serving)
        v = self.verdict
        if v is None:
            return self._word(RasState.UNKNOWN, None, f"RAS not read on {self.station}: {self.why}",
                              kind="unavailable")
        name = self.name(self.report)
        ev = (f"RAS read on {self.station} {clock(now - at)} ago: {v.text}",)
        if v.kind == "missing-ranks":
            return self._missing(v, name, ev)
        behind = tuple(name(r) for r in sorted(v.behind))
        if v.kind == "out-of-step":
            return self._out_of_step(v, behind, ev)
        if v.kind == "frozen-equal":
            return self._frozen(v, now - (self.frozen_since or at), busy, ev)
        if v.kind in ("moving", "in-step"):
            words = (v.text if not behind
                     else "RAS: operations advance (a rank a step apart mid-read: not stuck)")
            return self._word(RasState.HEALTHY, None, words, kind=v.kind, evidence=ev)
        return self._word(RasState.UNKNOWN, None, v.text, kind=v.kind, evidence=ev)

    def _word(self, state: RasState, since: float | None, words: str, **kw) -> RasView:
        """A view stamped with where and when the last read ran."""
        return RasView(state, since, words, station=self.station, read_at=self.read_at, **kw)

    def _unread(self, now: float, serving: bool) -> RasView:
        """Unknown: no read yet, or the last one too old to say anything about now."""
        at = self.read_at
        if at is None:
            why = "not read yet" if serving else "not watched: no engine serving"
            return self._word(RasState.UNKNOWN, None, f"RAS {why}")
        if not serving:
            return self._word(RasState.UNKNOWN, None, "RAS not watched: no engine serving")
        return self._word(RasState.UNKNOWN, None, f"RAS last read {clock(now - at)} ago on {self.station}")

    def _missing(self, v: ncclras.RasVerdict, name: Callable[[int], str], ev: tuple[str, ...]) -> RasView:
        """Stuck: a rank left the job; the stations that fell behind before it are the cause."""
        missing = tuple(name(r) for r in v.missing)
        dead = tuple(name(r) for r in v.dead)
        gone = ", ".join(f"{m} ({'dead' if m in dead else 'not answering'})" for m in missing) or "a rank"
        if self.behind:
            words = (f"{', '.join(self.behind)} fell behind (the cause: {self.behind_words}); then {gone} "
                     "left the job (the consequence)")
            return self._word(RasState.STUCK, self.missing_since, words, kind=v.kind, behind=self.behind,
                              missing=missing, cause=self.behind, evidence=ev)
        return self._word(RasState.STUCK, self.missing_since, f"{gone} missing from the NCCL job",
                          kind=v.kind, missing=missing, evidence=ev)

    def _out_of_step(self, v: ncclras.RasVerdict, behind: tuple[str, ...], ev: tuple[str, ...]) -> RasView:
        """Suspect on one read (a spread not yet seen to hold), stuck once a second read shows it."""
        if self.prev is None:
            return self._word(RasState.SUSPECT, self.spread_since,
                              f"{v.text} (one read; the next says whether it holds)",
                              kind=v.kind, behind=behind, evidence=ev)
        return self._word(RasState.STUCK, self.spread_since, v.text, kind=v.kind, behind=behind, evidence=ev)

    def _frozen(self, v: ncclras.RasVerdict, frozen_for: float, busy: bool, ev: tuple[str, ...]) -> RasView:
        """Frozen and equal is idle with idle GPUs; with busy GPUs, stuck once it lasts two intervals."""
        if not busy:
            return self._word(RasState.HEALTHY, self.frozen_since,
                              "RAS: every rank in step, no collective running (GPUs not busy: idle)",
                              kind=v.kind, evidence=ev)
        if self.prev is None or frozen_for < FROZEN_BUSY_S:
            return self._word(RasState.SUSPECT, self.frozen_since, f"{v.text}; GPUs busy", kind=v.kind,
                              evidence=ev)
        return self._word(RasState.STUCK, self.frozen_since, f"{v.text}; GPUs busy for {clock(frozen_for)}",
                          kind=v.kind, evidence=ev)
