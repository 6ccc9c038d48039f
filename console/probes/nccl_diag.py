"""NCCL's own diagnostics (NCCL 2.31+), as it prints them: the active diagnostics of
``NCCL_RUN_DIAGNOSTICS=1`` (P2P and network checks at communicator init, on rank 0's standard output)
and the RAS diagnostics of ``ncclras -D`` (GPU model and count, CUDA driver, ECC, NVLink, ``NCCL_*``
across ranks). Every report line holds ``NCCL DIAG`` (after ``host:pid`` in a RAS report, after the
engine's own prefix in a container log): a ``=== NAME ===`` header, ``[OK]`` / ``[INFO]`` result lines
(``check: text``) and a completion line (NVIDIA NCCL user guide, troubleshooting/diagnostics and
troubleshooting/ras; fixtures in tests/fixtures/nccl_diag). Pure: no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from console.catalogue.nccl_builds import version_key

DIAG_MIN_VERSION = "2.31.0"  # NCCL_RUN_DIAGNOSTICS, NCCL_RUN_RAS_DIAGNOSTICS and ncclras -D
BUSY = "BUSY: diagnostics already in progress"
_LINE = re.compile(r"(?:(?P<origin>[\w.\-]+:\d+) )?NCCL DIAG (?P<body>.*)$")
_HEADER = re.compile(r"=== (?P<name>.+?) ===\s*$")
_RESULT = re.compile(r"\[(?P<tag>OK|INFO)\]\s+(?P<check>[^:]+): (?P<text>.*)$")
_DONE = re.compile(r"(?P<what>.+ diagnostics) completed in (?P<ms>[\d.]+) ms across (?P<n>\d+) (?P<unit>ranks|RAS peers)")


def has_diagnostics(version: str | None) -> bool:
    """Whether this NCCL (``2.31.2``) has the diagnostics; None (not known) says no."""
    return bool(version) and version_key(version or "") >= version_key(DIAG_MIN_VERSION)


@dataclass(frozen=True)
class DiagResult:
    ok: bool  # [OK]; [INFO] is a condition to review
    check: str  # p2p, GPU inventory, CUDA driver version, ECC, NVLink, NCCL environment, ...
    text: str


@dataclass(frozen=True)
class DiagReport:
    name: str  # "NCCL Diagnostics" (active) or "RAS Diagnostics"
    origin: str  # host:pid of the process that printed it ("" in a container log)
    results: tuple[DiagResult, ...]
    completed: str | None  # "RAS diagnostics completed in 12.3 ms across 8 RAS peers"; None: cut short

    @property
    def issues(self) -> tuple[DiagResult, ...]:
        return tuple(r for r in self.results if not r.ok)

    def checks(self) -> list[str]:
        return list(dict.fromkeys(r.check for r in self.results))

    def summary(self) -> str:
        """``RAS Diagnostics: 4 OK, NCCL environment: mismatch ...`` (one line)."""
        ok = [c for c in self.checks() if all(r.ok for r in self.results if r.check == c)]
        parts = [f"{len(ok)} OK ({', '.join(ok)})"] if ok else []
        seen: set[str] = set()
        for r in self.issues:
            if r.check not in seen:  # a check's first INFO line says what; the group lines follow it
                seen.add(r.check)
                parts.append(f"{r.check}: {r.text}")
        done = "" if self.completed else " (report cut short)"
        return f"{self.name}: " + "; ".join(parts or ["no result lines"]) + done


def parse_diag(lines: Iterable[str]) -> list[DiagReport]:
    """Every report in ``lines`` (a container log, the output of ``ncclras -D``), in order."""
    reports: list[DiagReport] = []
    cur: dict | None = None

    def close() -> None:
        if cur is not None:
            reports.append(DiagReport(cur["name"], cur["origin"], tuple(cur["results"]), cur["done"]))

    for raw in lines:
        m = _LINE.search(raw.rstrip("\r\n"))
        if m is None:
            continue
        body, origin = m.group("body").strip(), m.group("origin") or ""
        if h := _HEADER.match(body):
            close()
            cur = {"name": h.group("name"), "origin": origin, "results": [], "done": None}
            continue
        if cur is None:  # lines of a report whose header was cut off (a log's tail)
            cur = {"name": "NCCL diagnostics", "origin": origin, "results": [], "done": None}
        if r := _RESULT.match(body):
            cur["results"].append(DiagResult(r.group("tag") == "OK", r.group("check").strip(), r.group("text").strip()))
        elif _DONE.match(body):
            cur["done"] = body
            close()
            cur = None
    close()
    return reports


def busy(text: str) -> bool:
    """``ncclras -D`` answered that a diagnostics request already runs (retry later)."""
    return BUSY in text
