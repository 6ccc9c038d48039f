"""Incremental diagnosis over streamed log lines from several stations, plus check results.

The hot path (``Diagnoser.feed``) joins a batch once and probes it with ``str.find`` for each
catalogue anchor; only lines an anchor hit are cleaned and matched against regexes. A healthy
log therefore costs one join and a few dozen C-level scans per batch.
"""

from __future__ import annotations

import functools
import itertools
import re
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from console.diagnosis import catalogue as cat
from console.diagnosis.text import clean, redact, shorten

MAX_EVIDENCE = 5  # evidence lines kept per finding (the count says how many matched)
TAIL = 256  # lines kept per source for traceback context
MAX_FRAMES = 12
HANG_AFTER_LINES = 200  # lines logged after the last NCCL "Init START" with no "Init COMPLETE"
_TRACEBACK = "Traceback (most recent call last)"
_CODE_LINE = re.compile(r"\braise\s+[\w.]+\(|^\s*>\s")
_FRAME_NOISE = re.compile(r"^\s*[\^~]+\s*$")
_EXCEPTION = re.compile(r"\w(?:Error|Exception|Interrupt)\b")


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
    fix: str
    evidence: list[Evidence] = field(default_factory=list)
    count: int = 0
    first_seen_line: int | None = None
    rank: int = cat.R_ROOT
    first_ts: str | None = None  # docker timestamp of the first evidence line, when known
    seq: int = 0  # global arrival order of the first evidence line
    explained_by: str | None = None  # "id@station" of the likely root cause, for symptoms
    origin: str = "log"  # "log" or "check"
    _cause_rank: int = 1 << 30

    @property
    def key(self) -> tuple[str, str]:
        return (self.id, self.station)

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
class _Source:
    count: int = 0
    tail: list[str] = field(default_factory=list)
    facts: dict[str, int] = field(default_factory=dict)


def _worse(a: str, b: str) -> str:
    return a if cat.SEVERITY_ORDER[a] <= cat.SEVERITY_ORDER[b] else b


class Diagnoser:
    """Findings over many sources, fed incrementally; ``ranked()`` puts the root cause first.

    ``gpudirect_expected``: True where the profile promises GPUDirect RDMA (GB300), so a
    "GPU Direct RDMA Disabled" line is a warning there and only info elsewhere (GB10).
    """

    def __init__(self, gpudirect_expected: bool | None = None):
        self.gpudirect_expected = gpudirect_expected
        self._findings: dict[tuple[str, str], Finding] = {}
        self._sources: dict[str, _Source] = {}
        self._seq = 0
        self.version = 0  # bumps on any change, counts included

    # ------------------------------------------------------------ hot path

    def feed(self, source: str, lines: list[str]) -> bool:
        """Match a batch of lines from ``source``; True when the set of findings changed."""
        if not lines:
            return False
        st = self._sources.get(source)
        if st is None:
            st = self._sources[source] = _Source()
        base = st.count
        st.count += len(lines)
        blob = "\n".join(lines)
        hits: dict[int, list[str]] | None = None
        starts: list[int] | None = None
        find = blob.find
        for anchor in cat.ANCHORS:
            i = find(anchor)
            if i < 0:
                continue
            if starts is None:
                starts = [0, *itertools.accumulate(len(s) + 1 for s in lines)]
                hits = {}
            while i >= 0:
                idx = bisect_right(starts, i) - 1
                hits.setdefault(idx, []).append(anchor)  # type: ignore[union-attr]
                i = find(anchor, starts[idx + 1])
        for fact, flag in cat.FACTS.items():
            j = blob.rfind(fact)
            if j >= 0:
                st.facts[flag] = st.facts.get(flag, 0) + 1
                st.facts[flag + "_line"] = base + blob.count("\n", 0, j) + 1
        changed = False
        if hits:
            for idx in sorted(hits):
                changed |= self._match_line(source, st, lines, idx, base + idx + 1, hits[idx])
        st.tail = (st.tail + lines)[-TAIL:] if len(lines) < TAIL else lines[-TAIL:]
        return changed

    def _match_line(self, source: str, st: _Source, lines: list[str], idx: int, lineno: int,
                    anchors: list[str]) -> bool:
        text, ts = clean(lines[idx])
        if _CODE_LINE.search(text):  # source code quoted in a traceback frame, not the error itself
            return False
        sigs = {s for a in anchors for s in cat.ANCHORS[a]}
        changed = False
        done: set[str] = set()
        context: tuple[str, ...] | None = None
        for sig in sorted(sigs, key=cat.ORDER.__getitem__) if len(sigs) > 1 else sigs:
            if sig.id in done:
                continue
            m = None
            if sig.pattern is not None:
                m = sig.pattern.search(text)
                if not m:
                    continue
            hit = sig.refine(m, text) if sig.refine else None
            if hit is False:
                continue
            if sig.needs_context is not None:
                context = self._context(st, lines, idx)
                near = "\n".join(context) + "\n" + "\n".join(self._window(st, lines, idx, 30))
                if not sig.needs_context.search(near):
                    continue
            done.add(sig.id)
            f = self._findings.get((sig.id, source))
            if f is not None and len(f.evidence) >= MAX_EVIDENCE:
                ev = None  # already enough evidence: count it, skip the text work
            else:
                if context is None:
                    context = self._context(st, lines, idx) if _EXCEPTION.search(text) else ()
                ev = Evidence(source, lineno, shorten(redact(text)), context)
            changed |= self._record(source, sig, hit if isinstance(hit, cat.Hit) else None, ev, lineno, ts)
        return changed

    # ------------------------------------------------------------ bookkeeping

    def _record(self, source: str, sig: cat.Signature, hit: cat.Hit | None, ev: Evidence | None,
                lineno: int | None, ts: str | None) -> bool:
        spec = cat.SPECS[sig.id]
        severity = (hit and hit.severity) or sig.severity or spec.severity
        if sig.id == "nccl-gdr-disabled":
            severity = "warning" if self.gpudirect_expected else "info"
        rank = hit.rank if hit and hit.rank is not None else (sig.rank if sig.rank is not None else spec.rank)
        cause = (hit and hit.cause) or sig.cause or spec.cause
        fix = (hit and hit.fix) or sig.fix or spec.fix
        self._seq += 1
        self.version += 1
        key = (sig.id, source)
        f = self._findings.get(key)
        if f is None:
            self._findings[key] = Finding(sig.id, severity, source, cause, fix, [ev] if ev else [], 1, lineno,
                                          rank, ts, self._seq, _cause_rank=rank)
            return True
        f.count += 1
        if ev is not None and len(f.evidence) < MAX_EVIDENCE:
            f.evidence.append(ev)
        changed = False
        new_sev = _worse(f.severity, severity)
        if new_sev != f.severity:
            f.severity, changed = new_sev, True
        if rank < f._cause_rank:  # the most root-ward evidence names the cause
            f._cause_rank, f.rank, f.cause, f.fix, changed = rank, rank, cause, fix, True
        return changed

    @staticmethod
    def _window(st: _Source, lines: list[str], idx: int, n: int) -> list[str]:
        if idx >= n:
            return lines[idx - n:idx]
        return st.tail[len(st.tail) - (n - idx):] + lines[:idx] if st.tail else lines[:idx]

    def _context(self, st: _Source, lines: list[str], idx: int) -> tuple[str, ...]:
        """Traceback frames above an exception line (the exception is the evidence, frames context)."""
        window = self._window(st, lines, idx, 200)
        for j in range(len(window) - 1, -1, -1):
            if _TRACEBACK in window[j]:
                frames = [shorten(redact(clean(x)[0]), 200) for x in window[j + 1:]]
                frames = [x for x in frames if x.strip() and not _FRAME_NOISE.match(x.split("] ", 1)[-1])]
                return tuple(frames[-MAX_FRAMES:])
        return ()

    def finish(self) -> bool:
        """End of input (files, stdin): NCCL init that started but never completed is a hang."""
        changed = False
        for source, st in self._sources.items():
            start, done = st.facts.get("init_start_line", 0), st.facts.get("init_complete_line", 0)
            if start > done and st.count - start >= HANG_AFTER_LINES:  # the last init never completed
                sig = cat.Signature("nccl-hang", (), cause="NCCL communicator init started but never reached "
                                                           "Init COMPLETE (the peers never connected)")
                ev = Evidence(source, st.facts.get("init_start_line"),
                              "NCCL init started (Init START) but no 'Init COMPLETE' followed before the log ended")
                changed |= self._record(source, sig, None, ev, ev.line, None)
        return changed

    def add_check_results(self, results: Iterable[CheckResultLike]) -> None:
        """Replace the check-derived findings with these results (failures and warnings only)."""
        for key in [k for k, f in self._findings.items() if f.origin == "check"]:
            del self._findings[key]
        for r in results:
            if r.status not in ("fail", "warn"):
                continue
            self._seq += 1
            sev = "error" if r.status == "fail" else "warning"
            rank = cat.CHECK_RANKS.get(r.id, cat.R_SETUP)
            spec = cat.SPECS.get(r.id)
            f = Finding(r.id, sev, r.station, r.summary or (spec.cause if spec else r.id),
                        r.fix or (spec.fix if spec else cat.LINK_CHECK_FIX),
                        [Evidence("check", None, shorten(redact(r.evidence or r.summary or "")))],
                        1, None, rank, None, self._seq, origin="check", _cause_rank=rank)
            self._findings[f.key] = f
        self.version += 1

    # ------------------------------------------------------------ results

    def ranked(self) -> list[Finding]:
        """Errors and warnings first, then root-ward rank, severity, and first appearance."""
        out = sorted(self._findings.values(), key=functools.cmp_to_key(_compare))
        top = next((f for f in out if f.severity != "info"), None)
        for f in out:  # a symptom points at the top-ranked finding nearer the root
            f.explained_by = None
            if top is not None and f is not top and f.rank >= cat.R_SYMPTOM and top.rank < f.rank:
                f.explained_by = f"{top.id}@{top.station}"
        return out

    def findings(self) -> list[Finding]:
        return self.ranked()

    def lines_seen(self, source: str) -> int:
        st = self._sources.get(source)
        return st.count if st else 0


def _compare(a: Finding, b: Finding) -> int:
    ka = (a.severity == "info", a.rank, cat.SEVERITY_ORDER[a.severity])
    kb = (b.severity == "info", b.rank, cat.SEVERITY_ORDER[b.severity])
    if ka != kb:
        return -1 if ka < kb else 1
    if a.first_ts and b.first_ts and a.first_ts != b.first_ts:
        return -1 if a.first_ts < b.first_ts else 1
    return (a.seq > b.seq) - (a.seq < b.seq)


def diagnose_lines(source: str, lines: Iterable[str], gpudirect_expected: bool | None = None,
                   batch: int = 4096) -> list[Finding]:
    """One-shot diagnosis of a whole log (file or stdin), ranked."""
    d = Diagnoser(gpudirect_expected)
    buf: list[str] = []
    for line in lines:
        buf.append(line.rstrip("\n"))
        if len(buf) >= batch:
            d.feed(source, buf)
            buf = []
    d.feed(source, buf)
    d.finish()
    return d.ranked()


def has_problems(findings: Iterable[Finding]) -> bool:
    return any(f.severity in ("error", "warning") for f in findings)
