"""The diagnoser's decisions made from the whole context rather than one line.

Transport findings (socket fallback, missing verbs, GPUDirect off) only mean something once it is known
what NCCL chose and how many nodes the run spans; an architecture line only once the build's list is
known; NCCL versions only across processes; an error no entry explains only once nothing near it is
explained. ``Diagnoser`` (``console.diagnosis.engine``) inherits these from ``Decisions``; they read its
per-source state and never touch the hot path.
"""

from __future__ import annotations

import re

from console import catalogue as cat
from console.diagnosis import context
from console.diagnosis.findings import Candidate, Contextual, Evidence, Finding, SourceState

MAX_EVIDENCE = 5  # evidence lines kept per finding (the count says how many matched)
EXPLAIN_WINDOW = 50  # a specific finding this many lines around an error line explains it
OPEN_TRACEBACK_LINES = 50  # a traceback with no exception line after this many lines is itself evidence

# How specific an unexplained error line is (the headline is the most specific): a wrapper that only
# says something failed < an exit or a traceback without its line < a plain error line or a bare exception type
# < an exception with its message < a line with an error code (CUDA "Error 802", NCCL's ncclSystemError, errno)
_WRAPPER = re.compile(r"WorkerProc failed to start|Worker failed with error|[Ff]ailed to start(?: the engine)?\.?$|"
                      r"[Ss]ee (?:the )?root cause above|initiali[sz]ation failed\.?$|ActorDiedError|RayTaskError|"
                      r"Call to \w+ method failed|a traceback without its exception line|"
                      r"terminate called after throwing|please check the error log")
_ERROR_CODE = re.compile(r"\bError \d{2,4}\b|CUDA error|\bcuda\w*?Error\w|CUDA_ERROR_\w|NCCL error|\bnccl[A-Z]\w*?Error|"
                         r"ncclInvalidUsage|Test (?:NCCL|CUDA) failure|\[Errno \d+\]|\berrno \d+|status 0x[0-9a-f]+|error code:? -?\d+")


def _specificity(summary: str) -> int:
    if _WRAPPER.search(summary):
        return 0
    if _ERROR_CODE.search(summary):
        return 4
    if summary.startswith(("a process exited", "the container exited", "container ")):
        return 1
    ex = cat.EXCEPTION_LINE.match(summary)
    return 3 if ex and ex.group("msg") else 2


class Decisions:
    """Context decisions of ``Diagnoser`` (see the module docstring)."""

    gpudirect_expected: bool | None
    nodes: int | None
    _sources: dict[str, SourceState]
    _versions: dict[tuple[str, str], tuple[str, Evidence, str | None, int]]
    _exits: dict[str, Candidate]

    def _rank_of(self, sig: cat.Signature, hit: cat.Hit | None) -> int:
        spec = cat.SPECS[sig.id]
        return hit.rank if hit and hit.rank is not None else (sig.rank if sig.rank is not None else spec.rank)

    def _multi_node(self, st: SourceState) -> bool | None:
        """True when this source's NCCL crosses stations, False when it provably does not, else None."""
        return context.multi_node(st, self.nodes, sum(1 for s in self._sources.values() if s.nccl))

    def _from_roles(self, source: str, items: list[Contextual], count: int, severity: str | None = None,
                    cause: str | None = None, fix: str | None = None, rank: int | None = None,
                    lead: Contextual | None = None) -> Finding:
        """A finding from contextual evidence: ``lead`` (default: the first item) names the signature,
        the evidence is in log order."""
        items = sorted(items, key=lambda c: c.seq)
        first = items[0]
        sig = (lead or first).sig
        hit = (lead or first).hit
        spec = cat.SPECS[sig.id]
        return Finding(sig.id, severity or (hit and hit.severity) or sig.severity or spec.severity, source,
                       cause or (hit and hit.cause) or sig.cause or spec.cause,
                       fix or (hit and hit.fix) or sig.fix or spec.fix,
                       [c.ev for c in items][:MAX_EVIDENCE], max(count, len(items)), first.ev.line,
                       rank if rank is not None else self._rank_of(sig, hit), first.ts, first.seq, next=spec.next)

    def _contextual(self, source: str, st: SourceState) -> list[Finding]:
        """The findings only context decides: the transport ones unless the run provably stays on one
        station, then a GPU architecture the build lacks."""
        multi = self._multi_node(st)
        found = self._transport(source, st, multi) if multi is not False else []
        cap = st.roles.get("capability")
        found.append(self._capability(source, st, cap) if cap else None)
        return [f for f in found if f is not None]

    def _transport(self, source: str, st: SourceState, multi: bool | None) -> list[Finding | None]:
        """Socket fallback, missing verbs, GPUDirect off: none of them matters where NCCL uses IB for it."""
        uses_ib = "ib" in st.networks or "ib" in st.via
        return [self._socket_fallback(source, st, uses_ib), self._verbs_missing(source, st, multi, uses_ib),
                self._gdr_disabled(source, st, uses_ib)]

    def _socket_fallback(self, source: str, st: SourceState, uses_ib: bool) -> Finding | None:
        """Channels over sockets say it best, then "Using network Socket" (unless IB channels showed),
        then IB disabled; the interface NCCL announced goes with each as context."""
        roles, counts = st.roles, st.role_counts
        channel, network = roles.get("socket-channel"), roles.get("socket-network")
        announce = roles.get("socket-announce", [])  # the interface it uses: context for a real fallback
        n_announce = counts.get("socket-announce", 0)
        if channel:
            return self._from_roles(source, channel + (network or []) + announce,
                                    counts.get("socket-channel", 0) + counts.get("socket-network", 0)
                                    + n_announce, lead=channel[0])
        if network and "ib" not in st.via:
            cause = None
            if "ib" in st.networks:
                cause = "some NCCL communicators chose TCP sockets (Using network Socket) while others use IB"
            return self._from_roles(source, network + announce, counts.get("socket-network", 0) + n_announce,
                                    cause=cause, rank=cat.R_FALLBACK, lead=network[0])
        if roles.get("ib-disabled") and not uses_ib:
            return self._from_roles(source, roles["ib-disabled"] + announce,
                                    counts.get("ib-disabled", 0) + n_announce, lead=roles["ib-disabled"][0])
        return None

    def _verbs_missing(self, source: str, st: SourceState, multi: bool | None, uses_ib: bool) -> Finding | None:
        """No verbs library is an error across stations, a warning where that is not known."""
        if not (st.roles.get("verbs-missing") and not uses_ib):
            return None
        sev = "error" if multi else "warning"
        cause = None if multi else (cat.SPECS["nccl-ib-missing"].cause
                                    + " (this matters only if the stations talk over RDMA)")
        return self._from_roles(source, st.roles["verbs-missing"], st.role_counts.get("verbs-missing", 0),
                                severity=sev, cause=cause)

    def _gdr_disabled(self, source: str, st: SourceState, uses_ib: bool) -> Finding | None:
        """GPUDirect off says nothing over sockets alone or where GDR channels showed; it warns only
        where the profile promises GPUDirect."""
        gdr = st.roles.get("gdr-disabled")
        socket_only = "socket" in st.networks and not uses_ib
        if gdr and not socket_only and "gdr" not in st.via:
            return self._from_roles(source, gdr, st.role_counts.get("gdr-disabled", 0),
                                    severity="warning" if self.gpudirect_expected else "info")
        return None

    def _capability(self, source: str, st: SourceState, items: list[Contextual]) -> Finding | None:
        found: tuple[int, int] | None = None
        for c in items:
            if "major" in c.values:
                found = (int(c.values["major"]), int(c.values["minor"]))
            elif "cap" in c.values:
                n = int(c.values["cap"])
                found = (n // 10, n % 10)
        if found is None:
            return None
        major, minor = found
        sm = major * 10 + minor
        if st.cap_list:
            ok_family = any(x // 10 == major and x <= sm for x in st.cap_list)
            limit = f"the build supports {', '.join(f'sm_{x}' for x in st.cap_list)}"
        elif st.cap_hi:
            hi, him = st.cap_hi
            if (major, minor) <= (hi, him):
                return None
            ok_family = major == hi
            limit = f"the build supports up to {hi}.{him}"
        else:
            return None
        if ok_family:
            return self._from_roles(
                source, items, len(items), severity="info", rank=cat.R_PLACEMENT,
                cause=f"PyTorch was built without sm_{sm} ({limit}); the same family's kernels run on it, so this is "
                      "normal (GB10 with an sm_120 build) unless a kernel is missing later",
                fix="nothing unless 'no kernel image' or a ptxas error follows; then use an image built for sm_"
                    f"{sm}")
        return self._from_roles(
            source, items, len(items), severity="error",
            cause=f"this GPU (sm_{sm}) is newer than the PyTorch in the image ({limit}): its kernels cannot run")

    def _version_mismatch(self) -> list[Finding]:
        if len({v for v, *_ in self._versions.values()}) < 2:
            return []
        seen: dict[str, tuple[str, Evidence, int]] = {}
        for (source, _host), (version, ev, _x, seq) in sorted(self._versions.items(), key=lambda kv: kv[1][3]):
            seen.setdefault(version, (source, ev, seq))
        parts = [f"{v} on {src}" for v, (src, _ev, _s) in seen.items()]
        sources = {src for src, _ev, _s in seen.values()}
        where = "the stations" if len(sources) > 1 else f"the processes of {next(iter(sources))}"
        versions = list(seen.values())
        station = versions[1][0]
        cause = f"{where} run different NCCL versions ({', '.join(parts)})"
        return [Finding("nccl-version-mismatch", "error", station, cause, cat.SPECS["nccl-version-mismatch"].fix,
                        [ev for _src, ev, _s in versions][:MAX_EVIDENCE], len(self._versions), versions[1][1].line,
                        cat.R_SETUP + 1, None, versions[1][2], next="checks")]

    def _explained(self, st: SourceState, line: int | None) -> bool:
        if line is None:
            return any(rank < cat.R_DEAD for _ln, rank in st.matched)
        return any(abs(ln - line) <= EXPLAIN_WINDOW and rank < cat.R_DEAD for ln, rank in st.matched)

    def _unrecognised(self, source: str, st: SourceState) -> Finding | None:
        pending = list(st.candidates)
        if st.open_traceback is not None and st.count - (st.open_traceback.ev.line or 0) >= OPEN_TRACEBACK_LINES:
            pending.append(st.open_traceback)
        if source in self._exits:
            pending.append(self._exits[source])
        left = [c for c in pending if not self._explained(st, c.ev.line)]
        if not left:
            return None
        # the headline is the most specific line (an error code, an exception with its message), never a
        # wrapper ("WorkerProc failed to start."); among equals the first in the log
        best = max(range(len(left)), key=lambda i: (_specificity(left[i].summary), -i))
        left = [left[best]] + left[:best] + left[best + 1:]
        first = left[0]
        spec = cat.SPECS["unrecognised-error"]
        count = len(left) + st.role_counts.get("unrecognised", 0)
        return Finding("unrecognised-error", spec.severity, source, f"{spec.cause}: {first.summary}", spec.fix,
                       [c.ev for c in left][:MAX_EVIDENCE], count, first.ev.line, spec.rank, first.ts, first.seq,
                       next=spec.next)
