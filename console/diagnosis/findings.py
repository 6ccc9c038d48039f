"""What a diagnosis says: findings with their evidence (the ``diagnose --json`` contract), their order,
and the per-source state the incremental matcher keeps (``console.diagnosis.engine``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from console import catalogue as cat


@dataclass(frozen=True)
class Evidence:
    source: str  # station name, file path, or "check"
    line: int | None  # 1-based line number within the source (None for check results)
    text: str
    context: tuple[str, ...] = ()  # traceback frames above an exception line

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "line": self.line, "text": self.text}
        if self.context:
            d["context"] = list(self.context)
        return d


@dataclass
class Finding:
    id: str
    severity: str
    station: str
    cause: str
    remedy: str  # what to change (no console command in it: see ``next``)
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0
    first_seen_line: int | None = None
    rank: int = cat.R_ROOT
    first_ts: str | None = None  # docker timestamp of the first evidence line, when known
    seq: int = 0  # global arrival order of the first evidence line
    explained_by: str | None = None  # "id@station" of the likely root cause, for symptoms
    origin: str = "log"  # "log" or "check"
    next: str | None = None  # a catalogue.NEXT_STEPS key: what the console itself can do next
    _cause_rank: int = 1 << 30

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.station)

    @property
    def fix(self) -> str:
        """The remedy and, for the command line, the console command that helps next."""
        step = cat.NEXT_STEPS.get(self.next or "")
        if not step or step[0] in self.remedy:
            return self.remedy
        return f"{self.remedy}; {step[0].replace('NAME', self.station)}"

    @property
    def next_action(self) -> str | None:
        """The TUI's wording of the next step ("press k to run the link checks now"), or None."""
        step = cat.NEXT_STEPS.get(self.next or "")
        return step[1] if step else None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id, "severity": self.severity, "station": self.station,
            "cause": self.cause, "fix": self.fix,
            "evidence": [e.to_dict() for e in self.evidence],
            "count": self.count, "first_seen_line": self.first_seen_line,
        }
        if self.explained_by:
            d["explained_by"] = self.explained_by
        if self.first_ts:
            d["first_seen_at"] = self.first_ts
        return d


class CheckResultLike(Protocol):
    id: str
    station: str
    status: str
    summary: str
    evidence: str
    fix: str


@dataclass
class Contextual:
    """One line of contextual evidence (a catalogue Role), judged in ``ranked()``."""

    sig: cat.Signature
    hit: cat.Hit | None
    ev: Evidence
    ts: str | None
    seq: int
    values: dict[str, str] = field(default_factory=dict)


@dataclass
class Candidate:
    """An error line no signature matched (possible evidence of ``unrecognised-error``)."""

    ev: Evidence
    summary: str
    ts: str | None
    seq: int


@dataclass
class SourceState:
    count: int = 0
    tail: list[str] = field(default_factory=list)
    facts: dict[str, int] = field(default_factory=dict)
    networks: set[str] = field(default_factory=set)  # "ib" / "socket": the networks NCCL chose
    via: set[str] = field(default_factory=set)  # channel kinds: "ib", "socket", "gdr", "local"
    nnodes: int = 0
    nccl: bool = False  # any NCCL line seen (this source takes part in NCCL)
    load_start: int = 0  # last line that started loading weights
    load_end: int = 0  # last line that finished loading weights
    cap_hi: tuple[int, int] | None = None  # highest CUDA capability this PyTorch build supports
    cap_list: tuple[int, ...] = ()  # "supports CUDA capabilities sm_50 ..." as numbers (50, ...)
    gdr_on: bool = False
    roles: dict[str, list[Contextual]] = field(default_factory=dict)
    role_counts: dict[str, int] = field(default_factory=dict)
    matched: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=512))  # (line, rank)
    candidates: list[Candidate] = field(default_factory=list)
    open_traceback: Candidate | None = None
    # --- retries that may still succeed; a kernel-log source of a station
    retrying: dict[str, tuple[tuple[str, ...], int]] = field(default_factory=dict)  # id -> (success markers, line)
    final_ids: set[str] = field(default_factory=set)  # ids raised by a line that is no retry
    station: str | None = None  # the station a kernel-log source belongs to (its findings are the station's)
    label: str | None = None  # what its evidence names as the source ("NAME kernel log")
    kernel: bool = False  # kernel-log lines: no line numbers, no unrecognised errors
    # --- the run's context read from the log (console.diagnosis.context)
    stack: str | None = None  # which engine or tool speaks: vllm, sglang, tensorrt-llm, llama.cpp, nccl-tests
    hosts: dict[str, int] = field(default_factory=dict)  # host -> ranks on it (nccl-tests lists every rank)
    nranks: int = 0  # ranks in the NCCL communicator (NCCL's nRanks)
    local_ranks: int = 0  # ranks on this host (NCCL's localRanks)
    retried_errors: list[int] = field(default_factory=list)  # lines of error candidates that said they retry


def compare(a: Finding, b: Finding) -> int:
    ka = (a.severity == "info", a.rank, cat.SEVERITY_ORDER[a.severity])
    kb = (b.severity == "info", b.rank, cat.SEVERITY_ORDER[b.severity])
    if ka != kb:
        return -1 if ka < kb else 1
    if a.first_ts and b.first_ts and a.first_ts != b.first_ts:
        return -1 if a.first_ts < b.first_ts else 1
    return (a.seq > b.seq) - (a.seq < b.seq)



def has_problems(findings: Iterable[Finding]) -> bool:
    return any(f.severity in ("error", "warning") for f in findings)
