"""Hang evidence from every station at the same moment: ``py-spy dump --native`` of every engine
process, a flight recorder dump (asked for through its pipe: nothing is stopped), the NCCL RAS report
read twice, GPU util/power/memory twice, the kernel log since the container started, the RDMA and NIC
counters twice, the last log lines, and every engine thread's kernel-side state (``/proc/PID/task``:
state, wait channel, kernel stack where readable) -- then one verdict line over all of it, and the
ranks RAS found behind (the stragglers, with the read they come from).

Every station's reads run concurrently (one transport per station, every command bounded). The
sources read twice are the critical path: the counters and the GPUs are one command a read (the
counter sample, its tools run at once station-side) and the RAS report its own; each second read
starts ``interval_s`` after its first read started, the one deliberate wait. The rails are listed
while the container is inspected, and the sources read once (py-spy, flight recorder, threads,
kernel log, log tail) start when the station's first reads are back, so that they run during the
interval instead of slowing the first reads (on the simulator each tool is a Python process).
The CLI (``hang-report``) and the evidence screen call ``capture``, the doctor's hang rung ``collect``
(over its run's context); ``verdict.judgement`` judges once for all three. The parses of py-spy, the
flight recorder, RAS, GPUs, the kernel log and the log tail, and the judgement, run in threads (the
counter sample's small tables are parsed in ``counter_sample.sample``)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Config, Station
from console.doctor import facts
from console.doctor.context import DoctorContext, DoctorOptions
from console.doctor.counter_sample import sample as sample_counters
from console.doctor.hang_model import Finding, TwoReads
from console.probes import ParseError, ncclras, proc_tasks, pyspy
from console.probes import activity as act
from console.probes import flight_recorder as fr
from console.probes import kernel_log as kl
from console.probes import nvidia_smi as smi
from console.probes.bounded import digits
from console.probes.docker import parse_time
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.remote.transport import Transport
from console.sanitize import one_line
from console.station.checks import StationDown, ToolMissing
from console.vocabulary import ContainerState

LOG_LINES = 200
PTRACE_HINT = "py-spy: permission denied — launch with --cap-add SYS_PTRACE"
FR_HINT = f"launch with {rc.FLIGHT_RECORDER_ON_TEXT} (a dump can then be asked for without stopping anything)"


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
    tasks: dict[str, Any] = field(default_factory=lambda: {"status": "not-read", "processes": []})
    raw: dict[str, str] = field(default_factory=dict)  # what the tools printed (the archive's files)
    dumps: list[pyspy.ProcessDump] = field(default_factory=list)
    fr_dumps: list[fr.FrDump] = field(default_factory=list)
    ras_reports: list[ncclras.RasReport] = field(default_factory=list)
    ras_reads: TwoReads[ncclras.RasReport] = field(default_factory=TwoReads)
    counter_reads: TwoReads[dict] = field(default_factory=TwoReads)
    read_at: dict[str, float] = field(default_factory=dict)  # source -> wall time its (last) read came back

    @property
    def running(self) -> bool:
        return self.container.get("state") == ContainerState.RUNNING

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error, "container": self.container, "pyspy": self.pyspy,
                "flight_recorder": self.flight_recorder, "ras": self.ras, "gpus": self.gpus, "kernel": self.kernel,
                "counters": self.counters, "log_lines": len(self.logs), "tasks": self.tasks}


@dataclass
class HangEvidence:
    stations: dict[str, StationEvidence]
    verdict: str
    findings: dict[str, str]  # pyspy | flight_recorder | ras | counters | gpus | kernel -> one line each
    captured_at: float
    capture_s: float
    interval_s: float
    captured: bool  # False: nothing to capture (no engine container running anywhere)
    covers: dict[str, Finding] = field(default_factory=dict)  # finding key -> the stations it speaks for
    next_step: str = ""
    kind: str = "unknown"  # the verdict's kind (next_steps.Kind): the doctor's row status reads it
    stacks: pyspy.HangSummary | None = None  # the stacks compared across stations, as the verdict read them
    stragglers: dict[str, Any] = field(default_factory=lambda: {"status": "not-read", "ranks": []})

    def stale_reads(self, now: float) -> dict[str, float]:
        """``"station source"`` -> age of each read older than the interval + 2 s at ``now``: evidence
        that old is not the station's present (the screen says so instead of showing it as current)."""
        limit = self.interval_s + 2.0
        return {f"{n} {src}": now - t for n, e in self.stations.items() for src, t in e.read_at.items()
                if now - t > limit}

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "captured": self.captured, "findings": self.findings,
                "stragglers": self.stragglers,
                "finding_stations": {k: {"covers": list(f.stations), "not_read": list(f.not_read)}
                                     for k, f in self.covers.items()},
                "next_step": self.next_step, "kind": self.kind,
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
        if line.startswith("=== FR-SYMLINK "):
            errors.append(f"{one_line(line[15:], 200)}: a symlink, not followed")
            continue
        if m := _FR_BLOCK.match(line.strip()):
            path = m.group(1)
            rank = digits(mm.group(1)) if (mm := re.search(r"(\d{1,9})$", path)) else None
            try:
                data = base64.b64decode((lines[i + 1] if i + 1 < len(lines) else "").strip(), validate=False)
                d = fr.parse_dump(data, rank)
                dumps.append(d)
                last, pend = d.last(), d.pending()
                files.append({"file": path, "rank": rank, "last": _entry(last), "pending": _entry(pend)})
            except (ParseError, ValueError) as exc:
                errors.append(one_line(f"{path}: {exc}", 300))
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


def _ras_read(ev: StationEvidence, text: str, n: int, at: float | None = None) -> None:
    ev.raw[f"ras-{n}.txt"] = text
    why = ncclras.unavailable(text)
    try:
        rep = ncclras.parse_ras(text.replace("NO-NCCLRAS-CLIENT\n", ""))
    except ParseError as exc:
        rep, why = None, why or str(exc)
    if rep is None and n == 2:
        ev.ras_reads.why_not = f"the second read gave no report ({one_line(why or text.strip()[-200:], 200)})"
    if rep is not None:
        ev.ras_reports.append(rep)
        if n == 1:
            ev.ras_reads.first, ev.ras_reads.first_at = rep, at
        else:
            ev.ras_reads.second, ev.ras_reads.second_at = rep, at
        ev.ras = {"status": "ok", "read_count": ev.ras_reads.state, "format": rep.format, "nccl_version": rep.nccl_version, "reads": ev.ras.get("reads", [])
                  + [{r: {"ops": x.ops, "counts": x.counts, "missing": x.unresponsive, "dead": x.dead}
                      for r, x in rep.ranks().items()}],
                  "via": "socket (no ncclras client in the container)" if "NO-NCCLRAS-CLIENT" in text else "ncclras"}
    elif not ev.ras_reports:
        ev.ras = {"status": "unavailable", "note": why or one_line(text.strip()[-300:], 300) or "no output"}


def _gpus(ev: StationEvidence, text: str) -> None:
    try:
        rows = smi.parse_gpus(text)
    except Exception as exc:  # noqa: BLE001 - a bad nvidia-smi answer is this source's line
        ev.gpus.setdefault("errors", []).append(one_line(str(exc), 300))
        return
    ev.gpus["samples"].append([{"index": g.index, "name": g.name, "util_pct": g.util_pct, "power_w": g.power_w,
                                "memory_used_mib": g.memory_used_mib, "memory_total_mib": g.memory_total_mib}
                               for g in rows])


class _Clock:
    """The capture's one deadline: every read gets what is left of it, never more."""

    def __init__(self, deadline_s: float) -> None:
        self.end = time.monotonic() + deadline_s
        self.deadline_s = deadline_s

    def left(self) -> float:
        return self.end - time.monotonic()

    async def run(self, coro, limit: float | None = None):
        left = self.left()
        if left <= 0:
            coro.close()
            raise TimeoutError
        return await asyncio.wait_for(coro, min(left, limit) if limit else left)


def _why(exc: BaseException, clock: _Clock, limit: float | None = None) -> str:
    if isinstance(exc, TimeoutError):
        if clock.left() <= 0.05:
            return f"cut by the deadline ({clock.deadline_s:g} s)"
        return f"no answer within {limit:g} s" if limit else "timed out"
    return one_line(f"{exc.__class__.__name__}: {exc}", 300)


async def _text(ctx: DoctorContext, st: Station, cmd: str, tag: str, clock: _Clock, limit: float | None = None) -> str:
    res = await clock.run(ctx.run(st.name, cmd, timeout=limit, tag=tag), limit)
    return res.stdout + res.stderr


async def _station(ctx: DoctorContext, st: Station, ev: StationEvidence, interval_s: float, clock: _Clock,
                   firsts: _FirstReads) -> None:
    """Every read of one station, each source its own task: one tool that hangs or fails is that
    tool's line, the others still come back; a source read twice reads again ``interval_s`` after
    its first read started."""
    # the rails (which counters to read) do not depend on the container: asked for now, read while
    # the container is inspected, so that the first counter read starts with the other first reads
    rails_t = asyncio.ensure_future(facts.rails(ctx, st))
    rails_t.add_done_callback(lambda t: t.cancelled() or t.exception())  # its failure is said below
    try:
        c = await clock.run(facts.container(ctx, st, fresh="evidence:"))
    except (StationDown, ToolMissing) as exc:
        ev.error = one_line(str(exc), 300)
        rails_t.cancel()
        firsts.one()
        return
    except Exception as exc:  # noqa: BLE001 - a timeout or a bad answer: this station's one line
        ev.error = _why(exc, clock)
        rails_t.cancel()
        firsts.one()
        return
    rt = c.runtime
    ev.container = {"name": c.name, "state": rt.state if rt else ContainerState.ABSENT, "exit_code": rt.exit_code if rt else None,
                    "started_at": rt.started_at if rt else None, "note": c.note}
    since = (parse_time(rt.started_at or "") if rt else None) or time.time() - 3600

    async def guarded(part: str, job, on_error) -> None:
        try:
            await job()
            ev.read_at[part] = time.time()
        except StationDown as exc:
            ev.error = ev.error or one_line(str(exc), 300)
            on_error(f"not read: the station went away ({one_line(str(exc), 200)})")
        except Exception as exc:  # noqa: BLE001 - one source's failure is that source's line
            on_error(f"not read: {_why(exc, clock, LIMITS.get(part))}")

    # The sources read twice are the capture's critical path (first read, the interval, second read);
    # the sources read once start when the station's first reads are back (at most one interval
    # later) and are read during the interval, instead of starving the first reads of the CPU.
    waiting = {"counters", "ras"} if c.running else {"counters"}
    firsts_back = asyncio.Event()

    def first_back(part: str) -> None:
        waiting.discard(part)
        if not waiting:
            firsts_back.set()

    async def after_firsts() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(firsts_back.wait(), max(0.0, min(interval_s, clock.left())))

    async def pyspy_job() -> None:
        await after_firsts()
        text = await _text(ctx, st, rc.pyspy_dump_engines(c.name, native=True), "evidence:", clock, LIMITS["pyspy"])
        await asyncio.to_thread(_pyspy, ev, text)

    async def fr_job() -> None:
        await after_firsts()
        text = await _text(ctx, st, rc.flight_recorder_dump(c.name), "evidence:", clock, LIMITS["fr"])
        await asyncio.to_thread(_flight_recorder, ev, text)

    async def ras_job() -> None:
        t0 = time.monotonic()
        try:
            text = await _text(ctx, st, rc.ncclras_report(c.name), "evidence:", clock, LIMITS["ras"])
            await asyncio.to_thread(_ras_read, ev, text, 1, (t0 + time.monotonic()) / 2)
        finally:
            first_back("ras")
        if ev.ras_reads.first is None:
            return
        try:
            await clock.run(_until(t0 + interval_s))
            t0 = time.monotonic()
            text = await _text(ctx, st, rc.ncclras_report(c.name), "evidence2:", clock, LIMITS["ras"])
        except Exception as exc:  # noqa: BLE001 - the first read stands; the second's absence is said
            ev.ras_reads.why_not = f"no second read: {_why(exc, clock, LIMITS['ras'])}"
            ev.ras["read_count"] = ev.ras_reads.state
            ev.ras["second_read"] = ev.ras_reads.why_not
            return
        await asyncio.to_thread(_ras_read, ev, text, 2, (t0 + time.monotonic()) / 2)
        if ev.ras_reads.why_not:
            ev.ras["second_read"] = ev.ras_reads.why_not

    async def kernel_job() -> None:
        await after_firsts()
        ktext = await _text(ctx, st, rc.kernel_log_since(since), "evidence:", clock)
        await asyncio.to_thread(_kernel, ev, ktext, since)

    async def counters_job() -> None:
        """The counters and the GPUs, both in each of the two samples (one command a read, its tools
        run at once): the GPUs' own line when a sample gave them nothing, the counters' on failure."""
        async def read(tag: str) -> dict:
            try:
                s = await clock.run(sample_counters(ctx, st, rails, tag))
            except Exception as exc:  # noqa: BLE001 - the GPUs' line; the counters' is guarded's
                gpus_failed(f"not read: {_why(exc, clock)}")
                raise
            if s["gpu_query"] is None:
                gpus_failed(s["gpu_error"])
            else:
                await asyncio.to_thread(_gpus, ev, s["gpu_query"])
                ev.read_at["gpus"] = time.time()
            return s

        rails_why = None
        try:
            try:
                rails = list(await clock.run(asyncio.shield(rails_t)))
            except Exception as exc:  # noqa: BLE001 - no rails known: the GPUs are still read
                rails, rails_why = [], f"not read: the rails could not be listed ({_why(exc, clock)})"
            t0 = time.monotonic()
            s1 = await read("evidence1:")
            if not rails_why:
                ev.counter_reads.first, ev.counter_reads.first_at = s1, (t0 + time.monotonic()) / 2
        finally:
            firsts.one()
            first_back("counters")
        await clock.run(_until(t0 + interval_s))
        t1 = time.monotonic()
        s2 = await read("evidence2:")
        if rails_why:
            ev.counters = {"status": "not-read", "note": rails_why}
            return
        ev.counter_reads.second, ev.counter_reads.second_at = s2, (t1 + time.monotonic()) / 2
        await asyncio.to_thread(_counters, ev, interval_s)

    async def tasks_job() -> None:
        await after_firsts()
        t0 = time.time()
        text = await _text(ctx, st, rc.engine_tasks(c.name), "evidence:", clock, LIMITS["tasks"])
        ev.raw["tasks.txt"] = text[-TASKS_MAX_CHARS:]
        ev.tasks = await asyncio.to_thread(proc_tasks.tasks_json, text[-TASKS_MAX_CHARS:]) | {"read_at": t0}

    async def logs_job() -> None:
        await after_firsts()
        text = await _text(ctx, st, rc.log_tail(c.name, LOG_LINES), "evidence:", clock)
        ev.logs = await asyncio.to_thread(_log_lines, text)

    def set_part(part: str):
        def put(note: str) -> None:
            if part == "kernel":
                ev.kernel = {"status": "not-read", "note": note, "events": []}
            elif part == "counters":
                if ev.counter_reads.first is not None:
                    ev.counter_reads.why_not = note
                ev.counters = {"status": "not-read", "note": note}
            elif part == "gpus":
                ev.gpus.setdefault("errors", []).append(note)
            elif part == "ras":
                if ev.ras_reads.first is None:
                    ev.ras = {"status": "not-read", "note": note}
            elif part == "tasks":
                ev.tasks = {"status": "not-read", "note": note, "processes": []}
            elif part == "logs":
                ev.logs = [f"({note})"]
            else:
                setattr(ev, part, {"status": "not-read", "note": note})
        return put

    gpus_failed = set_part("gpus")
    jobs: dict[str, Any] = {"kernel": kernel_job, "counters": counters_job}
    if c.running:
        jobs.update(pyspy=pyspy_job, flight_recorder=fr_job, ras=ras_job, tasks=tasks_job)
    else:
        why = f"the container {c.name} is {ev.container['state']}"
        for part in ("pyspy", "flight_recorder", "ras"):
            setattr(ev, part, {"status": "not-running", "note": why})
        ev.tasks = {"status": "not-running", "note": why, "processes": []}
    if rt is not None:
        jobs["logs"] = logs_job
    async with asyncio.TaskGroup() as tg:
        for part, job in jobs.items():
            tg.create_task(guarded(part, job, set_part(part)))


async def _until(t: float) -> None:
    """Sleep until monotonic ``t``: a second read starts ``interval`` after its first read started,
    whatever that first read took (the interval between the reads is the only wait)."""
    await asyncio.sleep(max(0.0, t - time.monotonic()))


def _kernel(ev: StationEvidence, text: str, since: float) -> None:
    """The kernel log's newest part parsed (a pure step, run off the loop)."""
    text = text[-KERNEL_MAX_CHARS:]
    events = kl.parse_kernel_log(text, since=since)
    bad = kl.unreadable(text)
    ev.kernel = {"status": "unreadable" if bad and not events else "ok", "note": bad or "", "since": since,
                 "events": [{"kind": e.kind, "severity": e.severity, "xid": e.xid, "text": one_line(e.text, 300)}
                            for e in events[:500]]}
    ev.raw["kernel.txt"] = text[-200_000:]


def _log_lines(text: str) -> list[str]:
    return [one_line(x, 2000) for x in text[-LOGS_MAX_CHARS:].splitlines()[-LOG_LINES:]]


LIMITS = {"pyspy": 60.0, "fr": 30.0, "ras": 40.0, "tasks": 35.0}
TASKS_MAX_CHARS = 4 * 1024 * 1024
KERNEL_MAX_CHARS = 4 * 1024 * 1024  # the kernel log since the container started, its newest part
LOGS_MAX_CHARS = 2 * 1024 * 1024


def _counters(ev: StationEvidence, interval_s: float) -> None:
    """Traffic and retries between the two counter reads, as a rate over the time measured between them."""
    s1, s2 = ev.counter_reads.first, ev.counter_reads.second
    if s1 is None or s2 is None or not (s1["rdma"] or s1["nic"]):
        ev.counters = {"status": "unreadable", "note": "no RDMA or NIC counter could be read"}
        return
    rising: dict[str, int] = {}
    moved = 0
    for dev, a in s1["rdma"].items():
        rising.update({f"{dev} {k}": v for k, v in act.growth(a, s2["rdma"].get(dev, {}), act.RETRY_COUNTERS).items()})
    for dev, a in s1["nic"].items():
        moved += sum(act.growth(a, s2["nic"].get(dev, {}), act.TRAFFIC_COUNTERS).values())
    elapsed = ev.counter_reads.elapsed_s or interval_s
    ev.counters = {"status": "ok", "interval_s": round(elapsed, 3), "nominal_interval_s": interval_s,
                   "rdma_bytes_moved": moved, "retries_rising": rising, "frozen": moved == 0 and not rising,
                   "read_count": ev.counter_reads.state}
    ev.raw["counters.txt"] = "\n\n".join(s1["ev"] + ["(second read)"] + s2["ev"])


# ------------------------------------------------------------------ the capture


async def capture(config: Config, transports: dict[str, Transport] | None = None, interval_s: float = 3.0,
                  deadline_s: float = 90.0, progress: Callable[[str], None] | None = None) -> HangEvidence:
    """Evidence from every station at once; ``deadline_s`` bounds the whole capture (what is not back
    by then is said as cut by the deadline, and what came back is kept)."""
    own = transports is None
    if transports is None:
        transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                      for s in config.stations}
    ctx = DoctorContext(config, transports, DoctorOptions(counter_interval_s=interval_s))
    try:
        return await collect(ctx, interval_s, deadline_s, progress)
    finally:
        await asyncio.shield(ctx.close())
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)


async def collect(ctx: DoctorContext, interval_s: float = 3.0, deadline_s: float = 90.0,
                  progress: Callable[[str], None] | None = None) -> HangEvidence:
    """The capture over a context the caller owns (the doctor's hang rung shares its run's transports
    and facts; ``capture`` makes its own): every station read at once, then judged once, off the loop."""
    from console.doctor.verdict import judgement

    t0, at = time.monotonic(), time.time()
    clock = _Clock(deadline_s)
    evs = {s.name: StationEvidence(s.name) for s in ctx.stations}
    say = progress or (lambda text: None)
    firsts = _FirstReads(len(evs), lambda: say(f"counters: first sample taken on every station; second "
                                                   f"{interval_s:g} s after each station's first"))
    say(f"reading every station at once (py-spy, flight recorder, RAS, GPUs, kernel log, counters, logs); "
        f"RAS, counters and GPUs again {interval_s:g} s after their first read")
    async with asyncio.TaskGroup() as tg:
        for s in ctx.stations:
            tg.create_task(_station(ctx, s, evs[s.name], interval_s, clock, firsts))
    j = await asyncio.to_thread(judgement, ctx.config, evs, interval_s)
    captured = any(e.running for e in evs.values())  # a live engine process to take evidence from
    return HangEvidence(evs, j.verdict, j.findings, at, time.monotonic() - t0, interval_s, captured, j.covers,
                        j.next_step, j.kind, j.stacks,
                        stragglers=await asyncio.to_thread(stragglers, ctx.config, evs, interval_s))


class _FirstReads:
    """Says once when every station's first counter read is back (or will not come): the doctor's
    progress line between the two reads."""

    def __init__(self, n: int, done: Callable[[], None]) -> None:
        self.left, self._done = n, done

    def one(self) -> None:
        self.left -= 1
        if self.left == 0:
            self._done()


def stragglers(config: Config, evs: dict[str, StationEvidence], interval_s: float) -> dict[str, Any]:
    """The ranks NCCL RAS found behind the most advanced (and those missing from the job), named by
    station, from the best reads the capture has (two reads when a station gave two); the read's
    station and age come with it, and "not read" with why when RAS gave nothing."""
    from console.doctor.verdict import rank_names, ras_verdict

    order = sorted(evs.values(), key=lambda e: (e.ras_reads.state != "two-reads", config.station(e.name).rank))
    best = next((e for e in order if e.ras_reads.state != "not-read"), None)
    if best is None:
        why = "; ".join(f"{e.name}: {e.ras.get('note')}" for e in evs.values() if e.ras.get("note")) or "no report"
        return {"status": "not-read", "note": f"not read: {one_line(why, 300)}", "ranks": []}
    reads = best.ras_reads
    last = reads.second or reads.first
    assert last is not None
    names = rank_names(config, last)
    v = ras_verdict(config, evs, interval_s)
    at = reads.second_at or reads.first_at
    return {"status": "ok", "kind": v.kind, "text": v.text, "read_on": best.name, "reads": reads.state,
            "age_s": None if at is None else round(max(0.0, time.monotonic() - at), 1),
            "ranks": [{"rank": r, "station": names.get(r), "behind": n} for r, n in sorted(v.behind.items())],
            "missing": [{"rank": r, "station": names.get(r), "dead": r in v.dead} for r in v.missing]}
