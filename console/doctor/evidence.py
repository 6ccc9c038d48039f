"""Hang evidence from every station at the same moment: ``py-spy dump --native`` of every engine
process, a flight recorder dump (asked for through its pipe: nothing is stopped), the NCCL RAS report
read twice, GPU util/power/memory twice, the kernel log since the container started, the RDMA and NIC
counters twice, and the last log lines -- then one verdict line over all of it.

Every station's reads run concurrently (``DoctorContext.per_station``: one transport per station,
every command bounded); the second reads come ``interval_s`` later, again on all stations at once.
The CLI (``hang-report``) and the evidence screen both call ``capture``; ``verdict.py`` judges."""

from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Config, Station
from console.doctor import facts
from console.doctor.context import DoctorContext, DoctorOptions
from console.doctor.rungs.hang import _sample as sample_counters
from console.probes import ParseError, ncclras, pyspy
from console.probes import activity as act
from console.probes import flight_recorder as fr
from console.probes import kernel_log as kl
from console.probes import nvidia_smi as smi
from console.probes.docker import parse_time
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.remote.transport import Transport
from console.sanitize import one_line
from console.station.checks import StationDown, ToolMissing

LOG_LINES = 200
PTRACE_HINT = "py-spy: permission denied — launch with --cap-add SYS_PTRACE"
FR_HINT = ("launch with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 and TORCH_NCCL_DEBUG_INFO_PIPE_FILE=/tmp/fr_pipe_ "
           "(a dump can then be asked for without stopping anything)")


@dataclass
class StationEvidence:
    name: str
    error: str | None = None  # the station could not be read at all
    container: dict[str, Any] = field(default_factory=dict)
    pyspy: dict[str, Any] = field(default_factory=lambda: {"status": "not-read"})
    flight_recorder: dict[str, Any] = field(default_factory=lambda: {"status": "not-read"})
    ras: dict[str, Any] = field(default_factory=lambda: {"status": "not-read"})
    gpus: dict[str, Any] = field(default_factory=lambda: {"samples": []})
    kernel: dict[str, Any] = field(default_factory=lambda: {"status": "not-read", "events": []})
    counters: dict[str, Any] = field(default_factory=lambda: {"status": "not-read"})
    logs: list[str] = field(default_factory=list)
    raw: dict[str, str] = field(default_factory=dict)  # what the tools printed (the archive's files)
    dumps: list[pyspy.ProcessDump] = field(default_factory=list)
    fr_dumps: list[fr.FrDump] = field(default_factory=list)
    ras_reports: list[ncclras.RasReport] = field(default_factory=list)

    @property
    def running(self) -> bool:
        return self.container.get("state") == "running"

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "container": self.container, "pyspy": self.pyspy,
                "flight_recorder": self.flight_recorder, "ras": self.ras, "gpus": self.gpus, "kernel": self.kernel,
                "counters": self.counters, "log_lines": len(self.logs)}


@dataclass
class HangEvidence:
    stations: dict[str, StationEvidence]
    verdict: str
    findings: dict[str, str]  # pyspy | flight_recorder | ras | counters | gpus | kernel -> one line each
    captured_at: float
    capture_s: float
    interval_s: float
    captured: bool  # False: nothing to capture (no engine container running anywhere)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "captured": self.captured, "findings": self.findings,
                "captured_at": self.captured_at, "capture_s": round(self.capture_s, 2), "interval_s": self.interval_s,
                "stations": {n: s.to_dict() for n, s in self.stations.items()}}


# ------------------------------------------------------------------ the reads


def _pyspy(ev: StationEvidence, text: str) -> None:
    ev.raw["pyspy.txt"] = text
    low = text.lower()
    if "NO-ENGINE-PROCESS" in text:
        ev.pyspy = {"status": "no-process", "note": "no engine process in the container", "processes": []}
        return
    try:
        dumps = pyspy.parse_pyspy(text)
    except ParseError:
        dumps = []
    ev.dumps = [d for d in dumps if d.threads]
    denied = "permission denied" in low or "operation not permitted" in low
    procs = []
    for d in dumps:
        w = pyspy.wait_point(d)
        procs.append({"pid": d.pid, "cmdline": one_line(d.cmdline, 200), "error": one_line(d.error, 200) if d.error else None,
                      "wait": {"kind": w.kind, "where": one_line(w.label(), 200)},
                      "frames": [str(f) for f in (d.main.frames[:12] if d.main else ())]})
    if ev.dumps:
        status, note = "ok", ""
    elif denied:
        status, note = "permission-denied", PTRACE_HINT
    elif "NO-PY-SPY" in text:
        status, note = "missing", "py-spy is on neither the station nor in the container (pip install py-spy)"
    else:
        status, note = "error", one_line(text.strip()[-300:], 300) or "py-spy printed nothing"
    ev.pyspy = {"status": status, "note": note, "processes": procs}


_FR_BLOCK = re.compile(r"^=== FR (\S+)(?: (\d+))?$")


def _flight_recorder(ev: StationEvidence, text: str) -> None:
    lines = text.splitlines()
    off = "NO-FR-BUFFER" in text
    nopipe = "NO-FR-PIPE" in text
    dumps, errors, files = [], [], []
    for i, line in enumerate(lines):
        if m := _FR_BLOCK.match(line.strip()):
            path = m.group(1)
            rank = int(mm.group(1)) if (mm := re.search(r"(\d+)$", path)) else None
            try:
                data = base64.b64decode((lines[i + 1] if i + 1 < len(lines) else "").strip(), validate=False)
                d = fr.parse_dump(data, rank)
                dumps.append(d)
                last, pend = d.last(), d.pending()
                files.append({"file": path, "rank": rank, "last": _entry(last), "pending": _entry(pend)})
            except (ParseError, ValueError) as exc:
                errors.append(f"{path}: {exc}")
    ev.fr_dumps = dumps
    ev.raw["flight_recorder.txt"] = "\n".join(ln for ln in lines if not ln or ln.startswith(("===", "NO-")) or len(ln) < 200)
    if dumps:
        status, note = "ok", ""
    elif off:
        status, note = "not-enabled", "the flight recorder is off in this launch: " + FR_HINT
    elif nopipe:
        status, note = "no-dump", "no dump pipe and no dump file: " + FR_HINT
    else:
        status, note = "error", "; ".join(errors) or one_line(text.strip()[-300:], 300) or "no dump came back"
    ev.flight_recorder = {"status": status, "note": note, "dumps": files, "errors": errors}


def _entry(e: fr.FrEntry | None) -> dict[str, Any] | None:
    return None if e is None else {"op": e.op, "seq": e.seq, "state": e.state, "pg": e.pg_name}


def _ras_read(ev: StationEvidence, text: str, n: int) -> None:
    ev.raw[f"ras-{n}.txt"] = text
    why = ncclras.unavailable(text)
    try:
        rep = ncclras.parse_ras(text.replace("NO-NCCLRAS-CLIENT\n", ""))
    except ParseError:
        rep = None
    if rep is not None:
        ev.ras_reports.append(rep)
        ev.ras = {"status": "ok", "format": rep.format, "nccl_version": rep.nccl_version, "reads": ev.ras.get("reads", [])
                  + [{r: {"ops": x.ops, "counts": x.counts, "missing": x.unresponsive, "dead": x.dead}
                      for r, x in rep.ranks().items()}],
                  "via": "socket (no ncclras client in the container)" if "NO-NCCLRAS-CLIENT" in text else "ncclras"}
    elif not ev.ras_reports:
        ev.ras = {"status": "unavailable", "note": why or one_line(text.strip()[-300:], 300) or "no output"}


def _gpus(ev: StationEvidence, text: str) -> None:
    try:
        rows = smi.parse_gpus(text)
    except ParseError as exc:
        ev.gpus.setdefault("errors", []).append(str(exc))
        return
    ev.gpus["samples"].append([{"index": g.index, "name": g.name, "util_pct": g.util_pct, "power_w": g.power_w,
                                "memory_used_mib": g.memory_used_mib, "memory_total_mib": g.memory_total_mib}
                               for g in rows])


async def _first(ctx: DoctorContext, st: Station, ev: StationEvidence) -> dict:
    """Every first read of one station, all at once (the capture's 'same moment')."""
    gpus = asyncio.ensure_future(ctx.run(st.name, rc.gpu_query(), tag="evidence:"))  # needs nothing else
    try:
        c, rails = await asyncio.gather(facts.container(ctx, st, fresh="evidence:"), facts.rails(ctx, st))
    except BaseException:
        gpus.cancel()
        raise
    rails = list(rails)
    rt = c.runtime
    ev.container = {"name": c.name, "state": rt.state if rt else "absent", "exit_code": rt.exit_code if rt else None,
                    "started_at": rt.started_at if rt else None, "note": c.note}
    since = (parse_time(rt.started_at or "") if rt else None) or time.time() - 3600

    async def run(cmd: str, timeout: float | None = None) -> str:
        try:
            res = await ctx.run(st.name, cmd, timeout=timeout, tag="evidence:")
            return res.stdout + res.stderr
        except ToolMissing as exc:
            return f"NOT-FOUND {exc}"

    async def gpu_text() -> str:
        res = await gpus
        return res.stdout + res.stderr

    jobs: dict[str, Any] = {"kernel": run(rc.kernel_log_since(since)), "gpus": gpu_text(),
                            "counters": sample_counters(ctx, st, rails, "evidence1:")}
    if c.running:
        jobs.update(pyspy=run(rc.pyspy_dump_engines(c.name, native=True), 60.0),
                    fr=run(rc.flight_recorder_dump(c.name), 30.0), ras=run(rc.ncclras_report(c.name), 40.0))
    if rt is not None:
        jobs["logs"] = run(rc.log_tail(c.name, LOG_LINES))
    got = dict(zip(jobs, await asyncio.gather(*jobs.values(), return_exceptions=True), strict=True))
    for k, v in got.items():
        if isinstance(v, StationDown):
            raise v
        if isinstance(v, BaseException):
            got[k] = f"(failed: {v.__class__.__name__}: {v})"
    if "pyspy" in got:
        _pyspy(ev, got["pyspy"])
        _flight_recorder(ev, got["fr"])
        _ras_read(ev, got["ras"], 1)
    else:
        why = f"the container {c.name} is {ev.container['state']}"
        for part in ("pyspy", "flight_recorder", "ras"):
            setattr(ev, part, {"status": "not-running", "note": why})
    _gpus(ev, got["gpus"])
    ktext = got["kernel"]
    events = kl.parse_kernel_log(ktext, since=since)
    bad = kl.unreadable(ktext)
    ev.kernel = {"status": "unreadable" if bad and not events else "ok", "note": bad or "", "since": since,
                 "events": [{"kind": e.kind, "severity": e.severity, "text": one_line(e.text, 300)} for e in events]}
    ev.raw["kernel.txt"] = ktext[-200_000:]
    if "logs" in got:
        ev.logs = got["logs"].splitlines()[-LOG_LINES:]
    return {"rails": rails, "s1": got["counters"], "container": c}


async def _second(ctx: DoctorContext, st: Station, ev: StationEvidence, first: dict) -> None:
    c = first["container"]
    jobs = {"counters": sample_counters(ctx, st, first["rails"], "evidence2:"),
            "gpus": ctx.run(st.name, rc.gpu_query(), tag="evidence2:")}
    if c.running:
        jobs["ras"] = ctx.run(st.name, rc.ncclras_report(c.name), timeout=40.0, tag="evidence2:")
    got = dict(zip(jobs, await asyncio.gather(*jobs.values(), return_exceptions=True), strict=True))
    if not isinstance(got["gpus"], BaseException):
        _gpus(ev, got["gpus"].stdout)
    if "ras" in got and not isinstance(got["ras"], BaseException):
        _ras_read(ev, got["ras"].stdout + got["ras"].stderr, 2)
    s1, s2 = first["s1"], got["counters"]
    if isinstance(s1, BaseException) or isinstance(s2, BaseException) or not (s1["rdma"] or s1["nic"]):
        ev.counters = {"status": "unreadable", "note": "no RDMA or NIC counter could be read"}
        return
    rising: dict[str, int] = {}
    moved = 0
    for dev, a in s1["rdma"].items():
        rising.update({f"{dev} {k}": v for k, v in act.growth(a, s2["rdma"].get(dev, {}), act.RETRY_COUNTERS).items()})
    for dev, a in s1["nic"].items():
        moved += sum(act.growth(a, s2["nic"].get(dev, {}), act.TRAFFIC_COUNTERS).values())
    ev.counters = {"status": "ok", "interval_s": ctx.options.counter_interval_s, "rdma_bytes_moved": moved,
                   "retries_rising": rising, "frozen": moved == 0 and not rising}
    ev.raw["counters.txt"] = "\n\n".join(s1["ev"] + ["(second read)"] + s2["ev"])


# ------------------------------------------------------------------ the capture


async def capture(config: Config, transports: dict[str, Transport] | None = None, interval_s: float = 3.0,
                  deadline_s: float = 90.0, progress: Callable[[str], None] | None = None) -> HangEvidence:
    """Evidence from every station; a station that does not answer within ``deadline_s`` is recorded
    as such, never waited for past it."""
    from console.doctor.verdict import judge

    own = transports is None
    if transports is None:
        transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                      for s in config.stations}
    ctx = DoctorContext(config, transports, DoctorOptions(counter_interval_s=interval_s))
    t0, at = time.monotonic(), time.time()
    evs = {s.name: StationEvidence(s.name) for s in ctx.stations}
    say = progress or (lambda text: None)

    async def bounded(coro, st: Station):
        try:
            return await asyncio.wait_for(coro, max(1.0, deadline_s - (time.monotonic() - t0)))
        except TimeoutError:
            evs[st.name].error = f"no answer within {deadline_s:g} s"
        except (StationDown, ToolMissing) as exc:
            evs[st.name].error = str(exc)
        return None

    try:
        say("reading every station (py-spy, flight recorder, RAS, GPUs, kernel log, counters, logs)")
        firsts = await asyncio.gather(*(bounded(_first(ctx, s, evs[s.name]), s) for s in ctx.stations))
        say(f"second reads in {interval_s:g} s (RAS, counters, GPUs)")
        await asyncio.sleep(interval_s)
        await asyncio.gather(*(bounded(_second(ctx, s, evs[s.name], f), s)
                               for s, f in zip(ctx.stations, firsts, strict=True) if f is not None))
    finally:
        await asyncio.shield(ctx.close())
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)
    verdict, findings = judge(config, evs, interval_s)
    captured = any(e.running for e in evs.values())  # a live engine process to take evidence from
    return HangEvidence(evs, verdict, findings, at, time.monotonic() - t0, interval_s, captured)
