"""A station's state printed: the ``watch`` line and NDJSON object, the ``status --json`` station
object, and the GPU and engine objects they share. Pure functions of a ``StationState`` (and the
``now`` the ages are taken against), so every command that prints a station says what the
dashboard's pane says, from the same state. The keys and values are contracts (DESIGN.md)."""

from __future__ import annotations

from typing import Any

from console.probes.docker import ContainerInfo, parse_time
from console.probes.engine_log import EngineProgress
from console.probes.gpu_health import to_dict as health_to_dict
from console.probes.nvidia_smi import GpuReading
from console.catalogue.xid import meaning as xid_meaning
from console.sanitize import one_line
from console.station.aspects import Aspect
from console.station.health import XidEvent
from console.station.progress import Verdict
from console.station.state import StationState
from console.vocabulary import TRANSPORT_TEXT, Progress


def gpu_dict(g: GpuReading) -> dict[str, Any]:
    """One GPU as ``status --json`` and ``watch --json`` show it (unknown values null)."""
    return {"index": g.index, "name": g.name or None, "uuid": g.uuid or None, "memory_used_mib": g.memory_used_mib,
            "memory_total_mib": g.memory_total_mib, "util_pct": g.util_pct, "temp_c": g.temp_c,
            "power_w": g.power_w, "error": g.error}


FATAL_LINE_CHARS = 480  # as the log parser keeps each fatal line


def fatal_lines(p: EngineProgress | None) -> list[str]:
    """Every fatal line of a failed run (``fatal`` is the first alone: a second rank's OOM or the engine's
    own death is often the line that explains it), each one sanitized onto one line; [] when none."""
    if p is None:
        return []
    return [one_line(x, FATAL_LINE_CHARS) for x in p.fatal_lines or ((p.fatal,) if p.fatal else ())]


def engine_dict(p: EngineProgress | None) -> dict[str, Any] | None:
    """The engine phase as ``status --json`` shows it (None: not read); ``fatal_lines`` beside ``fatal``."""
    if p is None:
        return None
    return {"phase": p.phase, "load_pct": p.load_pct, "transport": p.transport, "fatal": p.fatal,
            "fatal_lines": fatal_lines(p)}


# ---------------------------------------------------------------------- watch


def started_at(c: ContainerInfo | None) -> str | None:
    """When the container last started, as docker said it; None for one that never started (docker's
    zero time ``0001-01-01T00:00:00Z``, not a date) and for what is not a time."""
    if c is None or not c.started_at or parse_time(c.started_at) is None:
        return None
    return c.started_at


def watch_json(state: StationState, now: float) -> dict[str, Any]:
    """One ``watch --json`` object: the station at ``now``. Beside the contract's keys: ``ages_s``
    (every source's age: gpus, apps, hostmem, container, engine, logs, serving; null: never heard),
    ``gpus_age_s`` (how old the GPU readings shown are: they stay while nvidia-smi fails) and
    ``stale_sources`` (the sources whose values are old now, each by its own age)."""
    age = state.sample_age(now)
    c, e = state.container, state.engine
    return {
        "t": round(now, 3),
        "station": state.name,
        "state": state.conn.state,
        "sample_age_s": None if age is None else round(age, 3),
        "gpus": [gpu_dict(g) | {"health": gpu_health_dict(state, g.index)} for g in state.gpus],
        "container": {"name": state.container_name, "state": c.state if c else None,
                      "exit_code": c.exit_code if c else None, "started_at": started_at(c)},
        "engine": {"phase": e.phase if e else None, "load_pct": e.load_pct if e else None,
                   "transport": e.transport if e else None, "fatal": e.fatal if e else None,
                   "fatal_lines": fatal_lines(e) if e else None},
        "error": state.why(now) if state.conn.not_live else state.gpu_error,
        "ages_s": state.ages(now),
        "gpus_age_s": None if (g := state.value_age(Aspect.GPUS, now)) is None else round(g, 3),
        "stale_sources": [str(a) for a in state.stale_sources(now)],
    } | health_keys(state, now)


def watch_line(state: StationState, now: float) -> str:
    """The plain ``watch`` line: state, sample age, GPUs, container, engine, and why when not live."""
    age = state.sample_age(now)
    parts = [f"{state.name:<4} {state.conn.state:<16}", f"age {age:5.1f} s" if age is not None else "age     -"]
    for g in state.gpus:
        if not g.name:
            parts.append(f"GPU{g.index} NO READING")
            continue
        mem = ("n/a" if g.memory_used_mib is None else f"{g.memory_used_mib / 1024:.1f}") + "/" + (
            "n/a" if g.memory_total_mib is None else f"{g.memory_total_mib / 1024:.1f}")
        util = "?" if g.util_pct is None else f"{g.util_pct}%"
        parts.append(f"GPU{g.index} {mem} GiB {util}" + (" ERR" if g.error else ""))
    if state.container:
        parts.append(f"container {state.container.state}")
    if e := state.engine:
        parts.append(f"engine {e.label}  NCCL {TRANSPORT_TEXT.get(e.transport, e.transport)}")
    text = "  ".join(parts)
    if state.conn.not_live and (why := state.why(now)):
        text += f"  ({one_line(why, 160)})"
    elif state.gpu_error:
        text += f"  ({one_line(state.gpu_error, 160)})"
    return text


# ---------------------------------------------------------------------- status


def status_dict(state: StationState, failure: str | None = None) -> dict[str, Any]:
    """One station of ``status --json`` (without ``api``), from a state filled by one-shot reads.

    ``reachable``: the reads answered (the state is live). ``error``: why not, else every
    source's error joined (each unreadable GPU, nvidia-smi, its process query or host memory
    failing), or null.
    ``failure``: a read that cut the round short after the station answered; its words replace
    the others. ``process_memory_mib`` on every GPU read when the processes were (unified memory:
    the only GPU memory figure there is)."""
    reachable = state.conn.live
    gpus = [gpu_dict(g) for g in state.gpus]
    if state.apps_seen and state.unified_gpus:
        for d, g in zip(gpus, state.gpus, strict=True):
            if g.name:
                d["process_memory_mib"] = state.process_memory_mib(g.uuid)
    errors = [f"GPU{g.index}: {g.error}" for g in state.gpus if g.error]
    errors += [e for e in (state.gpu_error, state.apps_error, state.host_mem_error) if e]
    error = failure or (state.conn.detail if not reachable else "; ".join(errors) or None)
    hm = state.host_mem
    c = state.container
    container: dict[str, Any] = {"name": state.container_name, "state": None}
    if c is not None:  # "image_id" is the local ID; "image" the reference it ran
        container = {"name": c.name, "state": c.state, "started_at": started_at(c), "exit_code": c.exit_code,
                     "image": c.image, "image_id": c.image_id}
    out = {"name": state.name, "rank": state.rank, "reachable": reachable, "error": error, "gpus": gpus,
           "host_memory": {"total_mib": hm.total_mib, "available_mib": hm.available_mib} if hm else None,
           "container": container, "engine": engine_dict(state.engine)}
    for d, g in zip(gpus, state.gpus, strict=True):  # additions only
        d["health"] = gpu_health_dict(state, g.index)
    out["rails"] = [v.to_dict(v.at or 0.0) for v in state.rails.views.values()]
    return out


# ---------------------------------------------------------------------- GPU and fabric health
# (additions to watch --json and status --json)


def gpu_health_dict(state: StationState, index: int) -> dict[str, Any] | None:
    """``health`` of one GPU (None: the health stream has not read it)."""
    h = state.health.get(index)
    return None if h is None else health_to_dict(h)


def health_keys(state: StationState, now: float) -> dict[str, Any]:
    """``watch --json``'s station-level additions (``health`` of each GPU sits in its GPU object):
    ``rails`` (each rail: up, speed, MTU, flaps in 10 min, counter rates per second), ``xids`` (this
    run's, with NVIDIA's meaning and action) and ``kernel_log_error``; the sources' ages are in
    ``ages_s`` (``health``, ``rails``)."""
    return {"rails": [v.to_dict(now) for v in state.rails.views.values()],
            "xids": [xid_dict(x) for x in state.run_xids()],
            "kernel_log_error": state.kernel_unreadable}


def xid_dict(x: XidEvent) -> dict[str, Any]:
    info = xid_meaning(x.code)
    return {"code": x.code, "gpu": x.gpu, "bus_id": x.bus_id, "at": x.at, "meaning": info.text if info else None,
            "severity": x.info_severity, "action": info.action if info else None}


# ---------------------------------------------------------------------- progress truth


def progress_json(verdict: Verdict, now: float) -> dict[str, Any]:
    """The progress keys of ``watch --json`` and ``status --json`` (additions): ``progress`` (one of
    progressing, idle, stuck, wedged, out-of-step, peer-down, unknown), ``progress_since_s`` (how long it has held; null: not
    known), ``progress_why`` (the verdict in one line) and ``progress_evidence`` (its lines);
    ``progress_stragglers`` / ``progress_consequence`` (out of step: the stations behind, the stations
    gone after) and ``progress_judged_in_s`` (unknown only until then: a fresh console watching the counter)."""
    return {"progress": str(verdict.state), "progress_since_s": verdict.since_s(now),
            "progress_why": verdict.words, "progress_evidence": list(verdict.evidence),
            # the RAS watch (additions): out of step, the stations behind (the cause) and those gone after
            "progress_stragglers": list(verdict.stragglers), "progress_consequence": list(verdict.consequence),
            "progress_judged_in_s": None if verdict.judged_at is None else round(max(0.0, verdict.judged_at - now), 1)}


def progress_words(verdict: Verdict) -> str:
    """The plain ``watch`` line's tail: the progress state, and why when something is wrong."""
    if verdict.alarm or verdict.state == Progress.UNKNOWN:
        return f"  {verdict.state.upper()}: {one_line(verdict.words, 160)}"
    return f"  {verdict.state}"
