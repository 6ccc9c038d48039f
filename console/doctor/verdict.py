"""One verdict line over the hang evidence of every station (``evidence.capture``), strongest evidence
first (shared/reference/hangs.md: RAS read twice, py-spy per rank, the flight recorder, GPU util vs
power, the kernel log and the RoCE counters), and one line per kind of evidence."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from console.config import Config
from console.doctor.hang_model import Finding
from console.doctor.next_steps import next_step
from console.probes import flight_recorder as fr
from console.probes import ncclras, pyspy
from console.vocabulary import ContainerState

if TYPE_CHECKING:
    from console.doctor.evidence import StationEvidence


def rank_names(config: Config, report: ncclras.RasReport) -> dict[int, str]:
    """RAS rank -> station: by the node address RAS names (rail or SSH address), else by rank number
    when there is one rank per station."""
    by_addr = {a: s.name for s in config.stations for a in (s.rail_ip, s.host) if a}
    ranks = report.ranks()
    out = {r: by_addr[x.host] for r, x in ranks.items() if x.host in by_addr}
    size = report.main().size if report.comms else None
    if size == len(config.stations):
        for s in config.stations:
            out.setdefault(s.rank, s.name)
    return out


def _ras(config: Config, evs: dict[str, StationEvidence], interval_s: float) -> ncclras.RasVerdict:
    """RAS over the station with two reads (else one): one read is judged as one, never as two."""
    order = sorted(evs.values(), key=lambda e: (e.ras_reads.state != "two-reads", config.station(e.name).rank))
    best = next((e for e in order if e.ras_reads.state != "not-read"), None)
    if best is None:
        why = "; ".join(f"{e.name}: {e.ras.get('note')}" for e in evs.values() if e.ras.get("note")) or "no report"
        return ncclras.verdict(None, None, interval_s, why_absent=why)
    reads = best.ras_reads
    last = reads.second or reads.first
    assert last is not None
    names = rank_names(config, last)
    v = ncclras.verdict(reads.first, reads.second, round(reads.elapsed_s or interval_s, 1),
                        lambda r: names.get(r, f"rank {r}"))
    if reads.state == "one-read" and reads.why_not:
        v = dataclasses.replace(v, text=f"{v.text} [{best.name}: {reads.why_not}]")
    return v


ras_verdict = _ras  # the capture's straggler list reads the same verdict


def _fr(evs: dict[str, StationEvidence]) -> fr.FrVerdict | None:
    dumps: dict[str, fr.FrDump] = {}
    for e in evs.values():
        for d in e.fr_dumps:
            dumps[e.name if len(e.fr_dumps) == 1 else f"{e.name} rank {d.rank}"] = d
    return fr.compare(dumps) if dumps else None


def _counters(evs: dict[str, StationEvidence]) -> tuple[str, bool]:
    """(one line, whether the network path is implicated)."""
    read = {n: e.counters for n, e in evs.items() if e.counters.get("status") == "ok"}
    if not read:
        return "RDMA/NIC counters not readable", False
    rising = {n: c["retries_rising"] for n, c in read.items() if c["retries_rising"]}
    if rising:
        what = "; ".join(f"{n}: " + ", ".join(f"{k} +{v}" for k, v in sorted(r.items())) for n, r in rising.items())
        return f"retry counters rising ({what}): the network path", True
    frozen = [n for n, c in read.items() if c["frozen"]]
    if len(frozen) == len(read):
        side = "on both sides" if len(read) == 2 else "on every station"
        return f"RDMA counters frozen {side} (no traffic, no retries): nothing is sent, nothing is lost", False
    moving = ", ".join(f"{n} {_gbps(c)}" for n, c in read.items() if not c["frozen"])
    return f"RDMA traffic flows ({moving}), no retry counter rising", False


def _gbps(c: dict) -> str:
    """The RDMA rate over the time measured between the two counter reads."""
    secs = c.get("interval_s") or 0
    return f"{c['rdma_bytes_moved'] * 8 / secs / 1e9:.1f} Gb/s" if secs > 0 else "traffic (rate unknown)"


def _gpus(evs: dict[str, StationEvidence]) -> str:
    parts = []
    for n, e in evs.items():
        last = e.gpus.get("samples")[-1] if e.gpus.get("samples") else []
        for g in last:
            if g.get("util_pct") is None and g.get("power_w") is None:
                continue
            mem = f", {g['memory_used_mib']:,} MiB" if g.get("memory_used_mib") is not None else ""
            power = f"{g['power_w']:.0f} W" if g.get("power_w") is not None else "power n/a"
            parts.append(f"{n} GPU{g['index']} {g.get('util_pct')} % at {power}{mem}")
    return "; ".join(parts) or "GPU readings not available"


def _kernel(evs: dict[str, StationEvidence]) -> tuple[str, list[str]]:
    """One line over the kernel logs: "clean" only of the logs that were read, naming them."""
    bad, lines, clean = [], [], []
    for n, e in evs.items():
        errs = [x for x in e.kernel.get("events", []) if x["severity"] == "error"]
        if errs:
            bad.append(n)
            lines.append(f"{n}: {errs[0]['text'][:120]}")
        elif e.kernel.get("status") == "unreadable":
            lines.append(f"{n}: not readable ({e.kernel.get('note')})")
        elif e.kernel.get("status") == "ok":
            clean.append(n)
        else:
            lines.append(f"{n}: not read" + (f" ({e.kernel['note']})" if e.kernel.get("note") else ""))
    if not lines:
        return "kernel logs clean since the container started (no Xid, link flap or AER error)", bad
    if clean:
        lines.append(f"{', '.join(clean)}: clean")
    return "kernel log since the start: " + "; ".join(lines), bad


def _covers(evs: dict[str, StationEvidence]) -> dict[str, Finding]:
    """Per finding, the stations whose source was read (and those not)."""
    read = {
        "ras": lambda e: e.ras_reads.state != "not-read",
        "flight_recorder": lambda e: bool(e.fr_dumps),
        "pyspy": lambda e: bool(e.dumps),
        "counters": lambda e: e.counters.get("status") == "ok",
        "gpus": lambda e: bool(e.gpus.get("samples")),
        "kernel": lambda e: e.kernel.get("status") == "ok",
    }
    return {k: Finding(k, "", tuple(n for n, e in evs.items() if f(e)), tuple(n for n, e in evs.items() if not f(e)))
            for k, f in read.items()}


def _pyspy(evs: dict[str, StationEvidence]) -> pyspy.HangSummary:
    dumps = {n: e.dumps for n, e in evs.items() if e.dumps}
    missing = {}
    for n, e in evs.items():
        if e.error:
            missing[n] = f"unreachable: {e.error}"
        elif e.container.get("state") not in (None, ContainerState.RUNNING):
            missing[n] = f"its container {e.container.get('state')} (exit code {e.container.get('exit_code')})"
    return pyspy.summarise(dumps, missing)


@dataclasses.dataclass(frozen=True)
class Judgement:
    """The one judgement of a capture: what ``h``, ``hang-report`` and the doctor's hang rung all say."""

    verdict: str
    findings: dict[str, str]
    covers: dict[str, Finding]  # per finding the stations it speaks for (and those not read)
    next_step: str  # from the one table (``next_steps``)
    kind: str  # the verdict's kind (``next_steps.Kind``)
    stacks: pyspy.HangSummary  # the stacks of every station compared (the pyspy finding's source)


def judgement(config: Config, evs: dict[str, StationEvidence], interval_s: float) -> Judgement:
    """Judge the evidence once (pure; the capture runs it off the loop)."""
    stacks = _pyspy(evs)
    verdict, findings, kind = _judge(config, evs, interval_s, stacks)
    denied = any(e.pyspy.get("status") == "permission-denied" for e in evs.values())
    if kind == "unknown" and denied:
        kind = "no-ptrace"
    return Judgement(verdict, findings, _covers(evs), next_step(kind).text, kind, stacks)


def judge(config: Config, evs: dict[str, StationEvidence], interval_s: float, full: bool = False):
    """(verdict, findings); with ``full`` also (covers, next step): ``judgement`` as a tuple."""
    j = judgement(config, evs, interval_s)
    return (j.verdict, j.findings, j.covers, j.next_step) if full else (j.verdict, j.findings)


def _judge(config: Config, evs: dict[str, StationEvidence], interval_s: float,
           stacks: pyspy.HangSummary) -> tuple[str, dict[str, str], str]:
    ras = _ras(config, evs, interval_s)
    frv = _fr(evs)
    counters, network = _counters(evs)
    kernel, kbad = _kernel(evs)
    denied = [n for n, e in evs.items() if e.pyspy.get("status") == "permission-denied"]
    findings = {
        "ras": ras.text,
        "flight_recorder": frv.text if frv else "; ".join(
            f"{n}: {e.flight_recorder.get('note')}" for n, e in evs.items() if e.flight_recorder.get("note")) or
        "no flight recorder dump",
        "pyspy": stacks.text + (f" ({', '.join(denied)}: permission denied — launch with --cap-add SYS_PTRACE)"
                                if denied else ""),
        "counters": counters,
        "gpus": _gpus(evs),
        "kernel": kernel,
    }
    running = [n for n, e in evs.items() if e.running]
    if not running:
        states = ", ".join(f"{n}: {e.error or e.container.get('state', 'absent')}" for n, e in evs.items())
        return (f"nothing to capture: no engine container runs on any station ({states})", findings,
                "nothing-running")
    tail = []
    if kbad:
        tail.append(f"{', '.join(kbad)}'s kernel log has errors since the start")
    if network:
        tail.append(counters)

    def line(head: str, with_counters: bool = True) -> str:
        extra = tail if network or not with_counters else tail + [counters]
        return "; ".join([head] + extra)

    stuck_kind = "network" if network else "kernel" if kbad else "stuck-collective"
    where = {n: [pyspy.wait_point(d) for d in e.dumps] for n, e in evs.items()}
    coll = {n: next((w for w in ws if w.kind == "collective"), None) for n, ws in where.items()}
    seq = f" SeqNum {max(frv.seq.values())}" if frv and frv.seq else ""
    down = [n for n, e in evs.items() if n not in running]
    # a live rank not in any collective while another is gone or waits: the one that fell behind
    behind_live = [n for n in running if where.get(n) and not coll.get(n)]
    if ras.kind == "missing-ranks" or (down and (any(coll.values()) or behind_live)):
        gone = ", ".join(f"{n} ({_state(evs[n])})" for n in down) or _missing(config, evs, ras)
        if behind_live:
            cause = "; ".join(f"{n} {_where(evs[n])}" for n in behind_live)
            return line(f"{', '.join(behind_live)} fell behind (the cause: {cause}); {gone} "
                        f"{'is' if len(down) <= 1 else 'are'} the consequence (a rank waiting for it gave up or "
                        "was ended)", False), findings, "rank-gone"
        if down and any(coll.values()):
            waiting = next(n for n, w in coll.items() if w)
            return line(f"{gone} gone while {waiting} waits in {coll[waiting].name or coll[waiting].label()}{seq}",
                        False), findings, "rank-gone"
        return line(ras.text, False), findings, "rank-gone"
    if ras.kind == "out-of-step":
        detail = []
        rep = next(e for e in evs.values() if e.ras_reports).ras_reports[-1]
        names = rank_names(config, rep)
        for r in sorted(ras.behind):
            n = names.get(r)
            if n in where and where[n] and not coll.get(n):
                detail.append(f"{n} {_where(evs[n])}")
        ahead = [n for n, w in coll.items() if w]
        if ahead:
            detail.append(f"{', '.join(ahead)} wait{'s' if len(ahead) == 1 else ''} in "
                          f"{coll[ahead[0]].name or 'a collective'}{seq}")
        _groups, odd = ncclras.roll_call(ras.ops)
        odd = odd or sorted(ras.behind)
        who = ", ".join(names.get(r, f"rank {r}") for r in odd)
        cause = f"; not with the others: {who} (the cause; the others wait for {'it' if len(odd) == 1 else 'them'})"
        return (line(f"ranks out of step: {ras.spread}" + (f" ({'; '.join(detail)})" if detail else "")
                     + (cause if who else ""), False), findings, "out-of-step")
    if ras.kind == "moving":
        return line(ras.text, False), findings, "moving"
    if frv and frv.kind == "rank-missing":
        miss = ", ".join(frv.missing)
        inside = ", ".join(n for n in frv.seq if n not in frv.missing)
        return (line(f"{miss} never entered {next(iter(frv.missing.values()))} ({inside} waits in it)"), findings,
                "out-of-step")
    if stacks.verdict == "same-collective" or ras.kind == "frozen-equal":
        names = [n for n, w in coll.items() if w]
        what = (coll[names[0]].name if names and coll[names[0]].name else "the same collective") + seq
        equal = f"; RAS: every rank at {ras.collective} op {ras.at}" if ras.kind == "frozen-equal" else ""
        stacks_said = f" ({', '.join(names)} in it by the stacks)" if names else ""
        return (line(f"every rank stuck in {what}{stacks_said}{equal}: no rank is behind, none to blame"), findings,
                stuck_kind)
    if stacks.verdict == "one-elsewhere":
        return line(stacks.text), findings, "out-of-step"
    if stacks.verdict == "idle":
        return line("no rank waits in a collective: every engine process is idle in its loop (not an NCCL hang)",
                    False), findings, "idle"
    strongest = next((t for k, t in findings.items() if k in ("ras", "pyspy", "flight_recorder")
                      and not t.startswith(("RAS not read", "no stack dump", "no flight"))), None)
    return line("no verdict from the stacks and counters" + (f": {strongest}" if strongest else "")
                + (f" ({', '.join(denied)}: {'py-spy: permission denied — launch with --cap-add SYS_PTRACE'})"
                   if denied else ""), False), findings, "unknown"


def _missing(config: Config, evs: dict[str, StationEvidence], ras: ncclras.RasVerdict) -> str:
    """The ranks RAS says are missing, by station name where one is known (from the verdict's fields)."""
    rep = next((e.ras_reads.second or e.ras_reads.first for e in evs.values() if e.ras_reads.state != "not-read"),
               None)
    names = rank_names(config, rep) if rep is not None else {}
    return ", ".join(f"{names.get(r, f'rank {r}')} ({'dead' if r in ras.dead else 'not answering'} in RAS)"
                     for r in ras.missing) or "a rank (RAS names a dead process)"


def _where(e: StationEvidence) -> str:
    """Where a station's engine is when it is not in a collective: its worker's first Python frame
    (py-spy --native puts C frames above it)."""
    for d in sorted(e.dumps, key=lambda d: "Worker" not in d.cmdline and "scheduler" not in d.cmdline):
        t = d.main
        frame = next((f for f in (t.frames if t else ()) if ".py" in f.file), None)
        if frame is not None:
            kind = pyspy.wait_point(d).kind
            what = "idle in its loop, waiting for work" if kind == "idle" else "elsewhere"
            return f"{what} at {frame.function} ({frame.file.rsplit('/', 1)[-1]}:{frame.line})"
    return "without a stack"


def _state(e: StationEvidence) -> str:
    if e.error:
        return f"unreachable: {e.error}"
    return f"container {e.container.get('state')}, exit code {e.container.get('exit_code')}"
