"""One verdict line over the hang evidence of every station (``evidence.capture``), strongest evidence
first (shared/reference/hangs.md: RAS read twice, py-spy per rank, the flight recorder, GPU util vs
power, the kernel log and the RoCE counters), and one line per kind of evidence."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from console.config import Config
from console.doctor.hang_model import Finding
from console.doctor.next_steps import Kind, next_step
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
           stacks: pyspy.HangSummary) -> tuple[str, dict[str, str], Kind]:
    """(verdict, findings, kind): every source read into its finding, then the first rule that speaks
    (strongest evidence first); none speaks: no verdict, with the strongest finding said."""
    read = _readings(config, evs, interval_s, stacks)
    if not any(e.running for e in evs.values()):
        return _nothing_running(evs), read.findings, "nothing-running"
    scene = _scene(config, evs, stacks, read)
    for rule in _RULES:
        said = rule(scene)
        if said is not None:
            return said[0], read.findings, said[1]
    return _no_verdict(scene), read.findings, "unknown"


_PTRACE_DENIED = "permission denied — launch with --cap-add SYS_PTRACE"


@dataclasses.dataclass(frozen=True)
class _Readings:
    """Every source judged once: the findings' lines and what the verdict's rules read of them."""

    ras: ncclras.RasVerdict
    frv: fr.FrVerdict | None
    counters: str  # the counters' finding, said in the verdict too
    network: bool  # the counters implicate the network path
    kbad: list[str]  # the stations whose kernel log has errors since the start
    denied: list[str]  # the stations py-spy was refused on
    findings: dict[str, str]


def _readings(config: Config, evs: dict[str, StationEvidence], interval_s: float,
              stacks: pyspy.HangSummary) -> _Readings:
    ras = _ras(config, evs, interval_s)
    frv = _fr(evs)
    counters, network = _counters(evs)
    kernel, kbad = _kernel(evs)
    denied = [n for n, e in evs.items() if e.pyspy.get("status") == "permission-denied"]
    findings = {
        "ras": ras.text,
        "flight_recorder": _fr_finding(evs, frv),
        "pyspy": _pyspy_finding(stacks, denied),
        "counters": counters,
        "gpus": _gpus(evs),
        "kernel": kernel,
    }
    return _Readings(ras, frv, counters, network, kbad, denied, findings)


def _fr_finding(evs: dict[str, StationEvidence], frv: fr.FrVerdict | None) -> str:
    """The flight recorder's comparison, else why no station's dump was read."""
    if frv:
        return frv.text
    return "; ".join(f"{n}: {e.flight_recorder.get('note')}" for n, e in evs.items()
                     if e.flight_recorder.get("note")) or "no flight recorder dump"


def _pyspy_finding(stacks: pyspy.HangSummary, denied: list[str]) -> str:
    """The stacks compared, naming the stations py-spy was refused on (their stacks are not in it)."""
    return stacks.text + (f" ({', '.join(denied)}: {_PTRACE_DENIED})" if denied else "")


def _nothing_running(evs: dict[str, StationEvidence]) -> str:
    states = ", ".join(f"{n}: {e.error or e.container.get('state', 'absent')}" for n, e in evs.items())
    return f"nothing to capture: no engine container runs on any station ({states})"


@dataclasses.dataclass(frozen=True)
class _Scene:
    """What the verdict's rules read: the sources judged once, and where every station's engine waits."""

    config: Config
    evs: dict[str, StationEvidence]
    stacks: pyspy.HangSummary
    read: _Readings
    down: list[str]  # the stations whose engine container does not run
    where: dict[str, list[pyspy.WaitPoint]]  # per station, where each of its engine processes is
    coll: dict[str, pyspy.WaitPoint | None]  # per station, the collective one of its processes waits in
    seq: str  # " SeqNum N", the flight recorder's last collective, or ""
    behind_live: list[str]  # live stations in no collective: while another is gone or waits, they fell behind

    def line(self, head: str, with_counters: bool = True) -> str:
        """The verdict's line: its head, the kernel log's errors, and the counters (always when they
        implicate the network: a rule that names the cause leaves them out otherwise)."""
        tail = [f"{', '.join(self.read.kbad)}'s kernel log has errors since the start"] if self.read.kbad else []
        if self.read.network or with_counters:
            tail.append(self.read.counters)
        return "; ".join([head, *tail])


def _scene(config: Config, evs: dict[str, StationEvidence], stacks: pyspy.HangSummary,
           read: _Readings) -> _Scene:
    running = [n for n, e in evs.items() if e.running]
    where, coll = _waits(evs)
    return _Scene(config, evs, stacks, read,
                  down=[n for n in evs if n not in running],
                  where=where,
                  coll=coll,
                  seq=_last_seq(read.frv),
                  behind_live=[n for n in running if where.get(n) and not coll.get(n)])


def _waits(evs: dict[str, StationEvidence]) -> tuple[dict[str, list[pyspy.WaitPoint]],
                                                     dict[str, pyspy.WaitPoint | None]]:
    """Per station, where each engine process is (its stack), and the collective one of them waits in."""
    where = {n: [pyspy.wait_point(d) for d in e.dumps] for n, e in evs.items()}
    return where, {n: next((w for w in ws if w.kind == "collective"), None) for n, ws in where.items()}


def _last_seq(frv: fr.FrVerdict | None) -> str:
    """" SeqNum N" of the last collective the flight recorder saw, said after the collective's name."""
    return f" SeqNum {max(frv.seq.values())}" if frv and frv.seq else ""


_Said = tuple[str, Kind]  # a rule's verdict line and its kind


def _rank_gone(s: _Scene) -> _Said | None:
    """RAS misses a rank, or a container is down while another waits or fell behind: a rank is gone."""
    if not (s.read.ras.kind == "missing-ranks" or (s.down and (any(s.coll.values()) or s.behind_live))):
        return None
    gone = ", ".join(f"{n} ({_state(s.evs[n])})" for n in s.down) or _missing(s.config, s.evs, s.read.ras)
    return s.line(_gone_head(s, gone), False), "rank-gone"


def _gone_head(s: _Scene, gone: str) -> str:
    """A live rank that fell behind is the cause and the gone one its consequence; else the gone one
    while another waits; else RAS's own line."""
    if s.behind_live:
        cause = "; ".join(f"{n} {_where(s.evs[n])}" for n in s.behind_live)
        return (f"{', '.join(s.behind_live)} fell behind (the cause: {cause}); {gone} "
                f"{'is' if len(s.down) <= 1 else 'are'} the consequence (a rank waiting for it gave up or "
                "was ended)")
    if s.down and any(s.coll.values()):
        waiting = next(n for n, w in s.coll.items() if w)
        return f"{gone} gone while {waiting} waits in {s.coll[waiting].name or s.coll[waiting].label()}{s.seq}"
    return s.read.ras.text


def _out_of_step(s: _Scene) -> _Said | None:
    """RAS counts the ranks at different operations: the ones not with the others are the cause."""
    ras = s.read.ras
    if ras.kind != "out-of-step":
        return None
    rep = next((e.ras_reports[-1] for e in s.evs.values() if e.ras_reports), None)
    names = rank_names(s.config, rep) if rep is not None else {}  # a half-kept capture: ranks stay numbers
    detail = _behind_where(s, names) + _ahead_wait(s)
    return (s.line(f"ranks out of step: {ras.spread}" + (f" ({'; '.join(detail)})" if detail else "")
                   + _odd_ones(s, names), False), "out-of-step")


def _behind_where(s: _Scene, names: dict[int, str]) -> list[str]:
    """Where each rank RAS counts behind is, for those whose stack shows them outside a collective."""
    out = []
    for r in sorted(s.read.ras.behind):
        n = names.get(r)
        if n in s.where and s.where[n] and not s.coll.get(n):
            out.append(f"{n} {_where(s.evs[n])}")
    return out


def _ahead_wait(s: _Scene) -> list[str]:
    """The stations whose stacks wait in a collective (the others wait for the ones behind)."""
    ahead = [n for n, w in s.coll.items() if w]
    if not ahead:
        return []
    return [f"{', '.join(ahead)} wait{'s' if len(ahead) == 1 else ''} in "
            f"{s.coll[ahead[0]].name or 'a collective'}{s.seq}"]


def _odd_ones(s: _Scene, names: dict[int, str]) -> str:
    """The ranks not with the majority (else those RAS counts behind), named as the cause; "" if none."""
    _groups, odd = ncclras.roll_call(s.read.ras.ops)
    odd = odd or sorted(s.read.ras.behind)
    who = ", ".join(names.get(r, f"rank {r}") for r in odd)
    if not who:
        return ""
    return f"; not with the others: {who} (the cause; the others wait for {'it' if len(odd) == 1 else 'them'})"


def _moving(s: _Scene) -> _Said | None:
    """RAS counts the operations advancing: not a hang."""
    return (s.line(s.read.ras.text, False), "moving") if s.read.ras.kind == "moving" else None


def _never_entered(s: _Scene) -> _Said | None:
    """The flight recorder shows a rank that never entered the collective the others wait in."""
    frv = s.read.frv
    if frv is None or frv.kind != "rank-missing":
        return None
    miss = ", ".join(frv.missing)
    inside = ", ".join(n for n in frv.seq if n not in frv.missing)
    return s.line(f"{miss} never entered {next(iter(frv.missing.values()))} ({inside} waits in it)"), "out-of-step"


#: a worker still loading its model (vLLM's and SGLang's loaders): no collective runs yet
_LOADING_FUNCS = ("load_weights", "load_model", "weights_iterator", "download_weights")


def _loading_frame(e: StationEvidence) -> pyspy.Frame | None:
    """The loader frame of a station's engine that is still loading its weights, or None."""
    for d in e.dumps:
        for f in (d.main.frames if d.main else ()):
            if any(w in f.function for w in _LOADING_FUNCS):
                return f
    return None


def _starting_up(s: _Scene) -> _Said | None:
    """No rank waits in a collective and one still loads its weights: a start-up, during which RAS's
    counts stand still because no collective runs yet. Saying "every rank stuck" there is false."""
    if any(s.coll.values()):
        return None
    loading = {n: f for n, e in s.evs.items() if (f := _loading_frame(e)) is not None}
    if not loading:
        return None
    where = "; ".join(f"{n} at {f.function} ({f.file.rsplit('/', 1)[-1]}{f':{f.line}' if f.line else ''})"
                      for n, f in loading.items())
    ras = s.read.ras
    still = (f"; RAS counts every rank at {ras.collective} op {ras.at}: no collective runs while weights load"
             if ras.kind == "frozen-equal" else "")
    return (s.line(f"still starting, not an NCCL hang yet: {', '.join(loading)} loading the model's weights "
                   f"({where}){still}", False), "unknown")


def _all_stuck(s: _Scene) -> _Said | None:
    """Every rank in the same collective (by the stacks, or RAS's equal frozen counts): none to blame."""
    ras = s.read.ras
    if not (s.stacks.verdict == "same-collective" or ras.kind == "frozen-equal"):
        return None
    names = [n for n, w in s.coll.items() if w]
    what = (s.coll[names[0]].name if names and s.coll[names[0]].name else "the same collective") + s.seq
    equal = f"; RAS: every rank at {ras.collective} op {ras.at}" if ras.kind == "frozen-equal" else ""
    stacks_said = f" ({', '.join(names)} in it by the stacks)" if names else ""
    return (s.line(f"every rank stuck in {what}{stacks_said}{equal}: no rank is behind, none to blame"),
            _stuck_kind(s.read))


def _stuck_kind(read: _Readings) -> Kind:
    """A collective every rank is stuck in: the network when its counters say so, else a kernel error
    when a log has one, else the collective itself."""
    if read.network:
        return "network"
    return "kernel" if read.kbad else "stuck-collective"


def _one_elsewhere(s: _Scene) -> _Said | None:
    """The stacks show the others waiting in a collective and one rank elsewhere."""
    return (s.line(s.stacks.text), "out-of-step") if s.stacks.verdict == "one-elsewhere" else None


def _idle(s: _Scene) -> _Said | None:
    """Every engine process idle in its loop: not an NCCL hang."""
    if s.stacks.verdict != "idle":
        return None
    return (s.line("no rank waits in a collective: every engine process is idle in its loop (not an NCCL hang)",
                   False), "idle")


#: the verdict's rules, strongest evidence first: the first that speaks is the verdict
_RULES: tuple[Callable[[_Scene], _Said | None], ...] = (
    _rank_gone, _out_of_step, _moving, _never_entered, _starting_up, _all_stuck, _one_elsewhere, _idle)


def _no_verdict(s: _Scene) -> str:
    """No rule spoke: the strongest finding that read something, and the stations py-spy was refused on."""
    strongest = next((t for k, t in s.read.findings.items() if k in ("ras", "pyspy", "flight_recorder")
                      and not t.startswith(("RAS not read", "no stack dump", "no flight"))), None)
    denied = s.read.denied
    return s.line("no verdict from the stacks and counters" + (f": {strongest}" if strongest else "")
                  + (f" ({', '.join(denied)}: py-spy: {_PTRACE_DENIED})" if denied else ""), False)


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
