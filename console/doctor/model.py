"""The NCCL workbench's data: a rung's results, the uniform rung interface, the report and its verdict.

A rung is anything with an ``id`` and ``async run(ctx) -> list[RungResult]``; the CLI and the screen
run the same rungs through ``console.doctor.runner``. Results keep the JSON contract of
``doctor --json`` (``id, station, status, summary, evidence, next``); ``cause`` marks a failure that
names a cause rather than a symptom, and ``suggest`` carries overrides the debug relaunch could try.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from console import json_out
from console.vocabulary import CheckStatus

if TYPE_CHECKING:
    from console.doctor.context import DoctorContext

Status = CheckStatus  # a rung's outcome is a check's
STATUSES: tuple[Status, ...] = tuple(CheckStatus)
EVIDENCE_MAX = 6000


@dataclass(frozen=True)
class RungResult:
    id: str  # the rung's id (links, rdma, nccl, env, addresses, hang, relaunch)
    station: str  # "A"; "A->B" one direction; "A<->B" a pair; "A,B" every station
    status: Status
    summary: str
    evidence: tuple[str, ...] = ()
    next: str = ""
    cause: bool = False  # a failure that names the cause (GID index, MTU, address...), not a symptom
    suggest: tuple[tuple[str, str, str | None], ...] = ()  # (station, VAR, value or None = unset) to try

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "station": self.station, "status": self.status, "summary": self.summary,
                "evidence": [e if len(e) <= EVIDENCE_MAX else e[:EVIDENCE_MAX] + "\n... (truncated)"
                             for e in self.evidence], "next": self.next}


RungFn = Callable[["DoctorContext"], Awaitable[list[RungResult]]]


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder: ``await rung.run(ctx)``. ``action`` rungs change the stations."""

    id: str
    number: int
    title: str
    fn: RungFn
    action: bool = False

    async def run(self, ctx: DoctorContext) -> list[RungResult]:
        return await self.fn(ctx)


@dataclass
class DoctorReport:
    results: list[RungResult] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)  # rung ids, in ladder order
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    cancelled: bool = False
    order: tuple[str, ...] = ()

    def of(self, rung: str) -> list[RungResult]:
        return [r for r in self.results if r.id == rung]

    @property
    def verdict(self) -> str:
        """The id of the first failing rung (ladder order); else ``cancelled`` for a run stopped before its
        end (it concluded nothing: never ``ok``); else ``ok``."""
        for rid in self.order or tuple(dict.fromkeys(r.id for r in self.results)):
            if any(r.status == CheckStatus.FAIL for r in self.of(rid)):
                return rid
        return "cancelled" if self.cancelled else "ok"

    @property
    def cancelled_at(self) -> str | None:
        """The rung a cancel stopped (its one result is a skip "cancelled after ...")."""
        hit = next((r for r in self.results if r.status == CheckStatus.SKIP
                    and r.summary.startswith("cancelled after")), None)
        return hit.id if hit else None

    def conclusion(self) -> tuple[str, str]:
        """(the cause line, the next step) every verdict ends on, the same words on the CLI and the screen:
        the named cause; else the verdict rung's first failure, said to be a symptom; else what a cancel
        or an all-pass means. The next step always moves on (never back to a rung that passed)."""
        v = self.verdict
        c = self.cause
        if c is not None:
            return (f"{c.id} {c.station}: {c.summary}",
                    c.next or "Read this row's evidence (Enter); `dgx-console bundle PATH` keeps it for whoever helps.")
        if v == "cancelled":
            at = self.cancelled_at
            return (f"none: the run was cancelled{f' in {at}' if at else ''} before it concluded (nothing failed "
                    "before that; the rungs after it did not run)",
                    "Run the ladder again (a, or `dgx-console doctor`) and let it finish.")
        if v == "ok":
            ran = len(dict.fromkeys(r.id for r in self.results))
            unmeasured = self.not_measured
            if unmeasured and not any(r.status in (CheckStatus.PASS, CheckStatus.WARN) for r in self.results):
                return (f"not measured: every rung was skipped for want of an SSH channel ({', '.join(unmeasured)}); "
                        "nothing was proved either way",
                        "Rerun the ladder (a, or `dgx-console doctor`) when the station's other jobs (a validation "
                        "run, a capture) have ended.")
            if unmeasured:
                return (f"none found where measured: no rung failed ({ran} rungs ran); not measured for want of an "
                        f"SSH channel: {', '.join(unmeasured)}",
                        "Rerun those rungs (`dgx-console doctor --rung ID`) when the station's other jobs have ended; "
                        "if the service still fails meanwhile, the diagnosis (d) lists the log's findings.")
            return (f"none found: no rung failed ({ran} rungs ran)",
                    "If the service still fails: the diagnosis (d, `dgx-console diagnose`) lists the log's findings; "
                    "while it hangs, rung 6 (hang) reads the stacks and counters live.")
        first = next(r for r in self.of(v) if r.status == CheckStatus.FAIL)
        return (f"not named by a rung; the first failure is {first.id} {first.station}: {first.summary}",
                first.next or "Read this row's evidence (Enter); `dgx-console bundle PATH` keeps it for whoever helps.")

    @property
    def not_measured(self) -> list[str]:
        """The rungs with a result skipped for want of an SSH channel (the console's own limit, not the
        stations'): such a rung proved nothing, so a clean verdict over it must say so."""
        return list(dict.fromkeys(r.id for r in self.results if r.status == CheckStatus.SKIP
                                  and "not measured" in r.summary))

    @property
    def cause(self) -> RungResult | None:
        """The first failure that names a cause, in ladder order (the symptom rungs point at it)."""
        for rid in self.order or tuple(dict.fromkeys(r.id for r in self.results)):
            hit = next((r for r in self.of(rid) if r.status == CheckStatus.FAIL and r.cause), None)
            if hit:
                return hit
        return None

    @property
    def exit_code(self) -> int:
        return 1 if any(r.status == CheckStatus.FAIL for r in self.results) else 0

    def suggestions(self) -> dict[str, dict[str, str | None]]:
        out: dict[str, dict[str, str | None]] = {}
        for r in self.results:
            for station, var, value in r.suggest:
                out.setdefault(station, {})[var] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        c = self.cause
        return {"rungs": [r.to_dict() for r in self.results], "verdict": self.verdict,
                "cause": None if c is None else {"id": c.id, "station": c.station, "summary": c.summary,
                                                 "next": c.next},
                "conclusion": dict(zip(("cause", "next"), self.conclusion(), strict=True)),
                "cancelled": self.cancelled}

    def to_json(self) -> str:
        return json_out.dumps(self.to_dict(), indent=2)


def counts(results: Iterable[RungResult]) -> dict[str, int]:
    out = dict.fromkeys(STATUSES, 0)
    for r in results:
        out[r.status] += 1
    return out


def worst(results: Iterable[RungResult]) -> Status | None:
    seen = {r.status for r in results}
    for s in (CheckStatus.FAIL, CheckStatus.WARN, CheckStatus.PASS, CheckStatus.SKIP):
        if s in seen:
            return s  # type: ignore[return-value]
    return None
