"""Incremental diagnosis over streamed log lines from several stations, plus check results.

The hot path (``Diagnoser.feed``) reads the batch's classification (``console.catalogue.classify``:
one scan for every catalogue anchor, shared with the start-up tracker; a station's monitor made it
already, a file is classified here); only lines an anchor hit are cleaned and matched against regexes.

Some findings are decided from context, not from one line: NCCL's socket plugin announces its
interface even when NCCL then picks IB/RoCE, a missing verbs library does not matter on one node,
GPUDirect being off is normal where the profile expects it (GB10), NCCL versions only mismatch
across hosts. Those lines are kept as *contextual evidence* and judged in ``ranked()`` against
what the sources showed (the network NCCL chose, the channel lines, ``nNodes``, the number of
stations, the profile). A traceback, ERROR/CRITICAL line, NCCL WARN or non-zero exit that no
entry explains becomes ``unrecognised-error``, ranked below every specific finding.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import deque
from collections.abc import Iterable

from console import catalogue as cat
from console.catalogue.classify import ClassifiedBatch, classify
from console.catalogue.wordings import RETRY_LINE, RUN_WENT_ON
from console.diagnosis import context
from console.diagnosis.decisions import MAX_EVIDENCE, OPEN_TRACEBACK_LINES, Decisions
from console.diagnosis.findings import (
    Candidate,
    CheckResultLike,
    Contextual,
    Evidence,
    Finding,
    PastRun,
    SourceState,
    compare,
)
from console.diagnosis.runs import RunBook
from console.diagnosis.text import clean, message_of, redact, shorten
from console.vocabulary import CheckStatus

TAIL = 256  # lines kept per source for traceback context
MAX_FRAMES = 12
FIRST_FRAMES = 6  # traceback lines shown for an error no entry explains
HANG_AFTER_LINES = 200  # lines logged after the last NCCL "Init START" with no "Init COMPLETE"
MAX_CANDIDATES = 20  # unexplained error lines remembered per source (the count goes on)
_CODE_LINE = re.compile(r"\braise\s+[\w.]+\(")
_FRAME_NOISE = re.compile(r"^\s*[\^~]+\s*$")
_EXCEPTION = re.compile(r"\w(?:Error|Exception|Interrupt)\b")
_LOAD_FRAMES = re.compile(r"load_weights|load_model|weight_loader|model_loader|Load weight|load_single_module")
def _worse(a: str, b: str) -> str:
    return a if cat.SEVERITY_ORDER[a] <= cat.SEVERITY_ORDER[b] else b


def _network_kind(name: str) -> str:
    return "socket" if name.lower().startswith("socket") else "ib"


def _exception_summary(ex: re.Match[str]) -> str:
    return ex.group("type") + (f": {ex.group('msg').strip()}" if ex.group("msg") else "")


def _error_summary(text: str, msg: str) -> str | None:
    """What an error line that is no exception line says, by the first kind of line it is (NCCL
    WARN, a crash, C++'s what(), a run ending, an exit, an ERROR/CRITICAL level); None where it
    is none of them or its kind says nothing worth a candidate (an exit with code 0)."""
    if "NCCL WARN" in text:
        w = cat.NCCL_WARN_LINE.search(text)
        return f"NCCL WARN {w.group('msg').strip()}" if w else None
    if (c := cat.CRASH_LINE.search(text)) is not None:
        return c.group(0)
    if "what():" in text:  # C++'s message for the exception "terminate called" only names the type of
        return text.split("what():", 1)[1].strip()
    if (r := cat.RUN_ENDING.search(text)) is not None:
        return cat.innermost_cause(msg) or msg.strip() or r.group(0)  # the line names what ended the run
    if (e := cat.EXIT_LINE.search(text)) is not None:
        return _exit_summary(e)
    if cat.LEVEL_LINE.search(text) and msg.strip() and not cat.FRAME.search(msg):
        return msg.strip()
    return None


def _exit_summary(e: re.Match[str]) -> str | None:
    """A process's exit is an error only with a code other than 0."""
    code = int(e.group("code") or e.group("code2") or e.group("code3"))
    return f"a process exited with code {code}" if code != 0 else None


# anchor -> (signatures, context probes, generic?) for the batch prefilter
_ANCHOR_TABLE: dict[str, tuple[tuple[cat.Signature, ...], tuple[tuple[str, re.Pattern[str]], ...], bool]] = {}
for _a in (*cat.ANCHORS, *cat.CONTEXT_ANCHORS, *cat.GENERIC_ANCHORS):
    _ANCHOR_TABLE[_a] = (cat.ANCHORS.get(_a, ()), cat.CONTEXT_ANCHORS.get(_a, ()), _a in cat.GENERIC_ANCHORS)


class Diagnoser(Decisions, RunBook):
    """Findings over many sources, fed incrementally; ``ranked()`` puts the root cause first.

    ``gpudirect_expected``: True where the profile promises GPUDirect RDMA (GB300), so a
    "GPU Direct RDMA Disabled" line is a warning there and only info elsewhere (GB10).
    ``nodes``: how many stations the service spans (from the config), when known; otherwise it is
    read from the logs (NCCL's nNodes, network channel lines, how many sources speak NCCL).
    """

    def __init__(self, gpudirect_expected: bool | None = None, nodes: int | None = None):
        self.gpudirect_expected = gpudirect_expected
        self.nodes = nodes
        self._findings: dict[tuple[str, str], Finding] = {}
        self._sources: dict[str, SourceState] = {}
        self._versions: dict[tuple[str, str], tuple[str, Evidence, str | None, int]] = {}
        self._exits: dict[str, Candidate] = {}
        self._seq = 0
        self.version = 0  # bumps on any change, counts included
        self._ranked_at = -1
        self._ranked: list[Finding] = []
        self._run_of: dict[str, tuple[float, float | None]] = {}  # station -> its run's (start, finish) times
        self._past: dict[str, deque[PastRun]] = {}  # station -> its ended runs' findings, newest first

    # ------------------------------------------------------------ hot path

    def feed(self, source: str, lines: list[str], classified: ClassifiedBatch | None = None,
             first: int | None = None) -> bool:
        """Match a batch of lines from ``source``; True when the set of findings changed.
        ``classified``: the batch's classification when the caller has it (a station's monitor made
        it for these lines), else the batch is classified here. ``first``: the number of the batch's
        first line where its owner numbers them (a station's log buffer: "line N" of a finding is then
        line N of the log view); else the lines are counted here, from 1 per source."""
        if not lines:
            return False
        st = self._sources.get(source)
        if st is None:
            st = self._sources[source] = SourceState()
        batch = classified if classified is not None else classify(lines)
        lines = batch.texts  # what the lines say (escape sequences removed once, by the classifier)
        base = st.count if first is None else first - 1
        st.count = base + len(lines)
        blob = batch.blob
        hits = batch.diagnosis
        if not st.nccl and "NCCL " in blob:
            st.nccl = True
        for fact, flag in cat.FACTS.items():
            j = blob.rfind(fact)
            if j >= 0:
                st.facts[flag] = st.facts.get(flag, 0) + 1
                st.facts[flag + "_line"] = base + blob.count("\n", 0, j) + 1
                st.nccl = True
        changed = False
        if hits:
            for idx in sorted(hits):
                changed |= self._match_line(source, st, lines, idx, base + idx + 1, hits[idx])
        if st.retrying:
            changed |= self._clear_retries(source, st, batch, base)
        if st.retried_errors:
            changed |= self._clear_retried_errors(st, batch, base)
        st.tail = (st.tail + lines)[-TAIL:] if len(lines) < TAIL else lines[-TAIL:]
        return changed

    def _clear_retries(self, source: str, st: SourceState, batch: ClassifiedBatch, base: int) -> bool:
        """A retry (a hub download, a Ray node reaching the head) whose success shows later in the same
        source is no finding: look ahead in this batch (after the retry's line) and in every later one."""
        changed = False
        for fid, (markers, lineno) in list(st.retrying.items()):
            start = batch.starts[min(lineno - base, len(batch.lines))] if lineno > base else 0
            if not any(batch.blob.find(m, start) >= 0 for m in markers):
                continue
            del st.retrying[fid]
            if fid not in st.final_ids and self._findings.pop((fid, st.station or source), None) is not None:
                self.version += 1
                changed = True
        return changed

    def _clear_retried_errors(self, st: SourceState, batch: ClassifiedBatch, base: int) -> bool:
        """An error line that said it retries, followed by a line saying the run went on: no candidate."""
        first = min(st.retried_errors)
        start = batch.starts[min(first - base, len(batch.lines))] if first > base else 0
        if not any(batch.blob.find(m, start) >= 0 for m in RUN_WENT_ON):
            return False
        gone = set(st.retried_errors)
        st.candidates = [c for c in st.candidates if c.ev.line not in gone]
        st.retried_errors.clear()
        self.version += 1
        return True

    def feed_kernel(self, station: str, lines: list[str]) -> bool:
        """The station's kernel log (``journalctl -k`` / ``dmesg`` since its container started): the lines
        ``console.probes.kernel_log`` picks (Xid, mlx5 errors and link changes, memory registration, the OOM
        killer) are matched against the catalogue like log lines; the findings are the station's, their
        evidence names the kernel log (no line numbers: it is no container log line)."""
        from console.probes.kernel_log import parse_kernel_line

        return self.feed_kernel_events(station, [ev for ln in lines if (ev := parse_kernel_line(ln)) is not None])

    def feed_kernel_events(self, station: str, events: list) -> bool:
        """``feed_kernel`` for events already parsed (the health channel's ``KernelEvents``)."""
        key = f"{station}\x00kernel"
        if key not in self._sources:
            self._sources[key] = SourceState(station=station, label=f"{station} kernel log", kernel=True)
        return self.feed(key, [ev.text for ev in events])

    def _match_line(self, source: str, st: SourceState, lines: list[str], idx: int, lineno: int,
                    anchors: list[str]) -> bool:
        text, ts = clean(lines[idx])
        if _CODE_LINE.search(text):  # source code quoted in a traceback frame, not the error itself
            return False
        repeated = 1
        if text.endswith("cluster]"):
            rep = cat.RAY_REPEATED.search(text)
            if rep:
                repeated = int(rep.group("n"))
                text = text[:rep.start()]
        sigs: set[cat.Signature] = set()
        probes: list[tuple[str, re.Pattern[str]]] = []
        generic = False
        for a in anchors:
            s, p, g = _ANCHOR_TABLE[a]
            sigs.update(s)
            probes.extend(p)
            generic |= g
        changed = self._probe(source, st, text, lineno, probes, lines, idx) if probes else False
        done: set[str] = set()
        matched = False
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
            matched = True
            if sig.role is not None:
                changed |= self._record_role(source, st, sig, hit if isinstance(hit, cat.Hit) else None, m, text,
                                             lineno, ts)
                continue
            hit = self._phase_hit(st, sig, hit if isinstance(hit, cat.Hit) else None, lines, idx)
            f = self._findings.get((sig.id, source))
            if f is not None and len(f.evidence) >= MAX_EVIDENCE:
                ev = None  # already enough evidence: count it, skip the text work
            else:
                if context is None:
                    context = self._context(st, lines, idx) if _EXCEPTION.search(text) else ()
                ev = Evidence(source, lineno, shorten(redact(text)), context)
            rank = self._rank_of(sig, hit)
            st.matched.append((lineno, rank))
            if sig.retried:
                st.retrying[sig.id] = (sig.retried, lineno)
            else:
                st.final_ids.add(sig.id)
            if st.kernel and ev is not None:
                ev = Evidence(st.label or source, None, ev.text, ev.context)
            changed |= self._record(st.station or source, sig, hit, ev, None if st.kernel else lineno, ts, repeated)
        if matched:
            st.open_traceback = None
        elif generic and not st.kernel:
            changed |= self._generic(source, st, lines, idx, lineno, text, ts)
        return changed

    # ------------------------------------------------------------ context

    def _probe(self, source: str, st: SourceState, text: str, lineno: int,
               probes: list[tuple[str, re.Pattern[str]]], lines: list[str], idx: int) -> bool:
        changed = False
        for fact, pat in probes:
            m = pat.search(text)
            if m is None and fact == "cap_range":  # PyTorch prints the range on the lines that follow
                m = pat.search("\n".join(lines[idx + 1:idx + 4]))
            if not m:
                continue
            if fact == "network":
                kind = _network_kind(m.group("v"))
                changed |= kind not in st.networks
                st.networks.add(kind)
            elif fact == "via":
                kinds = {_network_kind(m.group("v"))} | ({"gdr"} if m.group("gdr") else set())
                changed |= not kinds <= st.via
                st.via |= kinds
            elif fact == "via_local":
                st.via.add("local")
            elif fact == "nnodes":
                n = int(m.group("v"))
                changed |= n > st.nnodes
                st.nnodes = max(st.nnodes, n)
            elif fact == "version":
                changed |= self._note_version(source, text, m.group("v"), lineno)
            elif fact == "load_start":
                st.load_start = lineno
            elif fact == "load_end":
                st.load_end = lineno
            elif fact == "cap_range":
                st.cap_hi = (int(m.group("hi")), int(m.group("him")))
                changed = True
            elif fact == "cap_list":
                st.cap_list = tuple(int(x) for x in re.findall(r"sm_(\d+)", m.group("v")))
                changed = True
            elif fact == "gdr_on":
                st.gdr_on = True
            else:
                changed |= context.note(st, fact, m)
        if changed:
            self.version += 1
        return changed

    def _note_version(self, source: str, text: str, version: str, lineno: int) -> bool:
        host_m = cat.NCCL_HOST.search(text)
        ray_m = cat.RAY_IP.search(text) if host_m is None else None
        host = host_m.group("host") if host_m else (ray_m.group("ip") if ray_m else "")
        key = (source, host)
        if key in self._versions and self._versions[key][0] == version:
            return False
        self._seq += 1
        self._versions[key] = (version, Evidence(source, lineno, shorten(redact(text))), None, self._seq)
        return True

    def _record_role(self, source: str, st: SourceState, sig: cat.Signature, hit: cat.Hit | None,
                     m: re.Match[str] | None, text: str, lineno: int, ts: str | None) -> bool:
        role = sig.role or ""
        st.role_counts[role] = st.role_counts.get(role, 0) + 1
        if role == "gdr-disabled" and "NET/Socket" in text:
            return False  # "GPU Direct RDMA Disabled" for a socket "HCA": the socket fallback says it all
        kept = st.roles.setdefault(role, [])
        self.version += 1
        if len(kept) >= MAX_EVIDENCE:
            return False
        self._seq += 1
        values = {k: v for k, v in m.groupdict().items() if v is not None} if m else {}
        kept.append(Contextual(sig, hit, Evidence(source, lineno, shorten(redact(text))), ts, self._seq, values))
        return len(kept) == 1  # more evidence of a known role changes counts, not the findings

    def _phase_hit(self, st: SourceState, sig: cat.Signature, hit: cat.Hit | None, lines: list[str],
                   idx: int) -> cat.Hit | None:
        """An OOM while the weights load means they do not fit: another fix than an OOM at run time."""
        if sig.id != "cuda-oom" or (hit is not None and hit.cause):
            return hit
        loading = st.load_start > st.load_end
        if not loading:
            frames = self._context(st, lines, idx)
            loading = bool(_LOAD_FRAMES.search(lines[idx])) or any(_LOAD_FRAMES.search(f) for f in frames)
        if loading:
            return cat.Hit(cause="GPU memory ran out while loading the weights", fix=cat.OOM_LOAD_FIX)
        # the run-time fix names the knobs of the engine that runs (vLLM's unless the log shows another)
        return cat.Hit(cause="GPU memory ran out while the engine was running (after the weights loaded)",
                       fix=cat.OOM_HOLDERS + context.fix_for(
                           "cuda-oom", st.stack, "lower --gpu-memory-utilization (more room outside the KV cache "
                           "for activations and CUDA graphs), --max-num-seqs / --max-num-batched-tokens, or "
                           "--max-model-len"))

    # ------------------------------------------------------------ errors no entry explains

    def _generic(self, source: str, st: SourceState, lines: list[str], idx: int, lineno: int, text: str,
                 ts: str | None) -> bool:
        """An error line no entry explains, as a candidate of ``unrecognised-error`` (its traceback's
        first frames with it when it is an exception line); a traceback header is kept open until
        its exception line comes."""
        if cat.TRACEBACK in text:
            self._open_traceback(source, st, lineno, text, ts)
            return False
        msg = message_of(text)
        ex = cat.EXCEPTION_LINE.search(msg)
        if ex:
            summary: str | None = _exception_summary(ex)
            st.open_traceback = None
        else:
            summary = _error_summary(text, msg)
        if not summary:
            return False
        if len(st.candidates) >= MAX_CANDIDATES:
            st.role_counts["unrecognised"] = st.role_counts.get("unrecognised", 0) + 1
            return False
        context = self._context(st, lines, idx, first=True) if ex else ()
        self._seq += 1
        self.version += 1
        if RETRY_LINE.search(text):
            st.retried_errors.append(lineno)
        st.candidates.append(Candidate(Evidence(source, lineno, shorten(redact(text)), context),
                                        shorten(redact(summary), 200), ts, self._seq))
        return True

    def _open_traceback(self, source: str, st: SourceState, lineno: int, text: str, ts: str | None) -> None:
        """The first traceback header stays the open one until an exception line closes it."""
        if st.open_traceback is None:
            self._seq += 1
            st.open_traceback = Candidate(Evidence(source, lineno, shorten(redact(text))),
                                           "a traceback without its exception line", ts, self._seq)

    def note_exit(self, source: str, code: int | None, name: str = "the container", oom_killed: bool = False) -> bool:
        """The container stopped with ``code``: a non-zero exit no finding explains is not silence."""
        if code is None or code in (0, 130, 143):  # clean, Ctrl-C, SIGTERM (docker stop)
            if source in self._exits:
                del self._exits[source]
                self.version += 1
            return False
        why = (" (killed by the OOM killer: the host ran out of memory)" if oom_killed else
               " (SIGKILL: the host OOM killer, or `docker stop` past its timeout)" if code == 137 else "")
        if source in self._exits and self._exits[source].summary.endswith(f"code {code}{why}"):
            return False
        self._seq += 1
        self.version += 1
        self._exits[source] = Candidate(Evidence(source, None, f"{name} exited with code {code}{why}"),
                                         f"{name} exited with code {code}{why}", None, self._seq)
        self._sources.setdefault(source, SourceState())
        return True

    # ------------------------------------------------------------ bookkeeping

    def _record(self, source: str, sig: cat.Signature, hit: cat.Hit | None, ev: Evidence | None,
                lineno: int | None, ts: str | None, repeated: int = 1) -> bool:
        spec = cat.SPECS[sig.id]
        severity = (hit and hit.severity) or sig.severity or spec.severity
        rank = self._rank_of(sig, hit)
        cause = (hit and hit.cause) or sig.cause or spec.cause
        fix = (hit and hit.fix) or sig.fix or spec.fix
        self._seq += 1
        self.version += 1
        key = (sig.id, source)
        f = self._findings.get(key)
        if f is None:
            self._findings[key] = Finding(sig.id, severity, source, cause, fix, [ev] if ev else [], repeated,
                                          lineno, rank, ts, self._seq, next=spec.next, _cause_rank=rank)
            return True
        f.count += repeated
        if ev is not None and len(f.evidence) < MAX_EVIDENCE:
            f.evidence.append(ev)
        changed = False
        new_sev = _worse(f.severity, severity)
        if new_sev != f.severity:
            f.severity, changed = new_sev, True
        if rank < f._cause_rank:  # the most root-ward evidence names the cause
            f._cause_rank, f.rank, f.cause, f.remedy, changed = rank, rank, cause, fix, True
        return changed

    @staticmethod
    def _window(st: SourceState, lines: list[str], idx: int, n: int) -> list[str]:
        if idx >= n:
            return lines[idx - n:idx]
        return st.tail[len(st.tail) - (n - idx):] + lines[:idx] if st.tail else lines[:idx]

    def _context(self, st: SourceState, lines: list[str], idx: int, first: bool = False) -> tuple[str, ...]:
        """Traceback frames above an exception line (the exception is the evidence, frames context):
        the last frames (nearest the error), or with ``first`` the lines where the traceback starts."""
        window = self._window(st, lines, idx, 200)
        for j in range(len(window) - 1, -1, -1):
            if cat.TRACEBACK in window[j]:
                frames = [shorten(redact(clean(x)[0]), 200) for x in window[j + 1:]]
                frames = [x for x in frames if x.strip() and not _FRAME_NOISE.match(x.split("] ", 1)[-1])]
                return tuple(frames[:FIRST_FRAMES] if first else frames[-MAX_FRAMES:])
        return ()

    def finish(self) -> bool:
        """End of input (files, stdin): NCCL init that started but never completed is a hang; a
        traceback whose exception line never came is an error of its own."""
        changed = False
        for source, st in self._sources.items():
            start, done = st.facts.get("init_start_line", 0), st.facts.get("init_complete_line", 0)
            if start > done and st.count - start >= HANG_AFTER_LINES:  # the last init never completed
                sig = cat.Signature("nccl-hang", (), cause="NCCL communicator init started but never reached "
                                                           "Init COMPLETE (the peers never connected)")
                ev = Evidence(source, st.facts.get("init_start_line"),
                              "NCCL init started (Init START) but no 'Init COMPLETE' followed before the log ended")
                changed |= self._record(source, sig, None, ev, ev.line, None)
            if st.open_traceback is not None and len(st.candidates) < MAX_CANDIDATES \
                    and (st.count - (st.open_traceback.ev.line or 0) >= OPEN_TRACEBACK_LINES
                         or any('File "' in x for x in st.tail[-(st.count - (st.open_traceback.ev.line or 0)):])):
                st.candidates.append(st.open_traceback)
                st.open_traceback = None
                self.version += 1
                changed = True
        return changed

    def add_check_results(self, results: Iterable[CheckResultLike]) -> None:
        """Replace the check-derived findings with these results (failures and warnings only)."""
        for key in [k for k, f in self._findings.items() if f.origin == "check"]:
            del self._findings[key]
        for r in results:
            if r.status not in ("fail", "warn"):
                continue
            self._seq += 1
            sev = "error" if r.status == CheckStatus.FAIL else "warning"
            rank = cat.CHECK_RANKS.get(r.id, cat.R_SETUP)
            spec = cat.SPECS.get(r.id)
            f = Finding(r.id, sev, r.station, r.summary or (spec.cause if spec else r.id),
                        r.fix or (spec.fix if spec else cat.LINK_CHECK_FIX),
                        [Evidence("check", None, shorten(redact(r.evidence or r.summary or "")))],
                        1, None, rank, None, self._seq, origin="check", next="checks", _cause_rank=rank)
            self._findings[f.key] = f
        self.version += 1

    def note_gpu_errors(self, station: str, words: str, fix: str) -> bool:
        """A GPU in error on ``station`` (nvidia-smi's words from the station's state; '' when
        none) is a finding while it lasts, so the panel never says "No findings" beside a red GPU row.
        The ``gpu-errors`` check's finding, when the checks ran, stands in its place (it has the Xid)."""
        key = ("gpu-errors", station)
        old = self._findings.get(key)
        if not words:
            if old is None or old.origin != "state":
                return False
            del self._findings[key]
        else:
            cause = f"a GPU in error: nvidia-smi says {words}"
            if old is not None and (old.origin == "check" or old.cause == cause):
                return False
            self._seq += 1
            self._findings[key] = Finding("gpu-errors", "error", station, cause, fix,
                                          [Evidence("nvidia-smi", None, shorten(redact(words)))], 1, None,
                                          cat.R_ROOT, None, self._seq, origin="state", next="checks",
                                          _cause_rank=cat.R_ROOT)
        self.version += 1
        return True

    # ------------------------------------------------------------ results

    def _all(self) -> list[Finding]:
        out = dict(self._findings)

        def merge(f: Finding) -> None:
            old = out.get(f.key)
            if old is None:
                out[f.key] = f
                return
            merged = Finding(f.id, _worse(old.severity, f.severity), f.station, old.cause, old.remedy,
                             (old.evidence + [e for e in f.evidence if e not in old.evidence])[:MAX_EVIDENCE],
                             old.count + f.count, old.first_seen_line, min(old.rank, f.rank), old.first_ts,
                             old.seq, next=old.next or f.next)
            if f.rank < old.rank:
                merged.cause, merged.remedy = f.cause, f.remedy
            out[f.key] = merged

        for source, st in self._sources.items():
            for f in self._contextual(source, st):
                merge(f)
        for f in self._version_mismatch():
            merge(f)
        for source, st in self._sources.items():
            f = self._unrecognised(source, st)
            if f is not None:
                out[f.key] = f
        for (fid, station), f in list(out.items()):
            oom = out.get(("host-oom-kill", station))  # the kernel log turns "often the OOM killer" into evidence
            if fid == "worker-died" and oom is not None and oom.evidence:
                out[(fid, station)] = dataclasses.replace(
                    f, cause=f"a worker process died: the host's OOM killer killed it ({oom.evidence[0].text[:160]})",
                    remedy=cat.SPECS["host-oom-kill"].fix, evidence=list(f.evidence))
            unknown = out.get(("unrecognised-error", station))  # "the real cause is earlier": name it
            if fid in cat.CONSEQUENCE_IDS and unknown is not None:
                what = unknown.cause.split(": ", 1)[-1]
                out[(fid, station)] = dataclasses.replace(
                    f, cause=f"the engine died after an error the catalogue does not know: {what}",
                    evidence=list(f.evidence))
        return list(out.values())

    def ranked(self) -> list[Finding]:
        """Errors and warnings first, then root-ward rank, severity, and first appearance."""
        if self._ranked_at == self.version:
            return list(self._ranked)
        out = sorted(self._all(), key=functools.cmp_to_key(compare))
        top = next((f for f in out if f.severity != "info"), None)
        for f in out:  # a symptom points at the top-ranked finding nearer the root
            f.explained_by = None
            if top is not None and f is not top and f.rank >= cat.R_SYMPTOM and top.rank < f.rank:
                f.explained_by = f"{top.id}@{top.station}"
        self._ranked, self._ranked_at = out, self.version
        return list(out)

    def findings(self) -> list[Finding]:
        return self.ranked()

    def lines_seen(self, source: str) -> int:
        st = self._sources.get(source)
        return st.count if st else 0


def diagnose_lines(source: str, lines: Iterable[str], gpudirect_expected: bool | None = None,
                   batch: int = 4096, nodes: int | None = None) -> list[Finding]:
    """One-shot diagnosis of a whole log (file or stdin), ranked."""
    d = Diagnoser(gpudirect_expected, nodes)
    buf: list[str] = []
    for line in lines:
        buf.append(line.rstrip("\n"))
        if len(buf) >= batch:
            d.feed(source, buf)
            buf = []
    d.feed(source, buf)
    d.finish()
    return d.ranked()
