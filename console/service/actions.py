"""Launch, stop and restart the distributed service as ordered, cancellable steps that prove themselves.

The order is the one NVIDIA's tutorial does by hand: workers (rank > 0) start first and the head
last, because the head waits for every worker and times out without them; the head stops first.
Waits follow each station's container log (``docker logs -f``), never a fixed sleep; a fatal line on
any station, or a container that exits, ends the wait at once with that line as evidence.

* Ready means a reply: after the engine's ready line and ``/health`` 200 the head must stream the
  first token of a real chat completion (retried on 408/429/5xx within the launch timeout).
* A start-up timeline per station (container started ... first token) is built from the logs'
  own timestamps and saved per launch (``console.service.history``) for the next comparison.
* Before a launch the fit estimate (``console.service.fit``) says whether the weights and one max-length
  request fit; after it the engine's logged KV figure is shown beside the estimate.
* A stop is verified on every station (``console.service.stop_verify``): container gone, API port closed,
  no compute process left, memory back to its pre-launch baseline. Restart verifies before it
  starts again; a launch over a running service needs ``replace``.
* ``launch_script`` (config): the operator's own script starts each container instead of our
  ``docker run``, with the same following, readiness, timeline and verified stop.

The same class backs the CLI and the TUI; progress goes to an ``on_event`` callback, and
cancelling the task leaves a stated state.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import inspect
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from console.config import Config, Station
from console.diagnosis import catalogue
from console.diagnosis.classify import ClassifiedBatch, classify
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes.engine_log import TIMELINE_LABELS, EngineLogTracker, TimelineEvent
from console.probes.nccl_transport import transport_of_lines, worse
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.remote.transport import CommandResult, Transport, TransportError
from console.sanitize import clean as sanitize
from console.sanitize import one_line
from console.service import engines, fit, stop_verify
from console.service import history as launch_history
from console.service.fit_inputs import FitReport, MemoryReading, gather_fit, read_memory
from console.vocabulary import TRANSPORT_VERDICT, ActionOutcome, StepStatus

STATUSES = tuple(StepStatus)
RESULTS = tuple(ActionOutcome)

# Finding ids that end a start-up, and the one that only says "the engine died, root cause above" (the
# cause is another line, often on another station: a worker that died on B makes A print it; it is
# reported only when no cause shows up within CONSEQUENCE_GRACE_S). Both come from the diagnosis catalogue.
FATAL_IDS = catalogue.FATAL_IDS
CONSEQUENCE_IDS = catalogue.CONSEQUENCE_IDS
CONSEQUENCE_GRACE_S = 3.0
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) (.*)$")


class ActionFailed(Exception):
    def __init__(self, detail: str, evidence: list[tuple[str, str]] | None = None, service_up: bool = False):
        super().__init__(detail)
        self.detail = detail
        self.evidence = evidence or []
        self.service_up = service_up  # the service runs (e.g. on sockets): never stopped for this


class ReadOnlyError(Exception):
    """Actions are disabled (--read-only)."""


def require_writable(read_only: bool) -> None:
    if read_only:
        raise ReadOnlyError("read-only mode: launch, stop and restart are disabled (--read-only)")


@dataclass
class Step:
    station: str  # a station name, or "all"
    action: str
    status: StepStatus = StepStatus.RUNNING
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"station": self.station, "action": self.action, "status": self.status,
                "started_at": _iso(self.started_at), "finished_at": _iso(self.finished_at),
                "detail": self.detail}


@dataclass
class ActionEvent:
    kind: str  # step | log | note | timeline
    station: str
    text: str
    step: Step | None = None
    timeline: TimelineEvent | None = None


@dataclass
class ActionResult:
    action: str
    steps: list[Step] = field(default_factory=list)
    result: ActionOutcome = ActionOutcome.OK
    transport: str = "unknown"
    summary: str = ""
    evidence: list[tuple[str, str]] = field(default_factory=list)  # (station, line)
    timeline: dict[str, list[TimelineEvent]] = field(default_factory=dict)
    verified: dict[str, stop_verify.StopVerdict] = field(default_factory=dict)
    fit: FitReport | None = None
    notes: list[str] = field(default_factory=list)  # timeline vs last launches, estimate vs logged KV

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": [s.to_json() for s in self.steps], "result": self.result,
                               "transport": self.transport}
        if self.action in ("launch", "restart"):
            out["timeline"] = {n: [e.to_json() for e in evs] for n, evs in self.timeline.items()}
        if self.action in ("stop", "restart") or self.verified:
            out["verified"] = {n: v.to_json() for n, v in self.verified.items()}
        return out

    @property
    def exit_code(self) -> int:
        return 0 if self.result == "ok" else 1


@dataclass(frozen=True)
class PlannedCommand:
    station: str
    what: str
    preview: str  # secrets as ***


@dataclass(frozen=True)
class ScriptInfo:
    """The operator's launch script on one station, as the preview shows it."""

    path: str
    size: int
    sha256: str
    text: str  # sanitized for display

    def first_lines(self, n: int = 12) -> str:
        lines = self.text.splitlines()
        more = f"\n... ({len(lines) - n} more lines)" if len(lines) > n else ""
        return "\n".join(lines[:n]) + more


@dataclass
class ActionPlan:
    """What the operator confirms: the commands in order, and what they act on."""

    action: str
    commands: list[PlannedCommand]
    specs: dict[str, engines.LaunchSpec] | None = None
    states: dict[str, docker_probe.ContainerInfo] = field(default_factory=dict)
    running: str | None = None  # "a healthy service is running on A and B; launch replaces it"
    fit: FitReport | None = None
    scripts: dict[str, ScriptInfo] = field(default_factory=dict)


FailureDecision = bool | Callable[[ActionResult], Awaitable[bool] | bool]


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_docker_time(value: str) -> float | None:
    """RFC3339 with up to nanoseconds (docker's StartedAt) -> Unix seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", value.strip())
    if not m or m.group(1).startswith("0001"):
        return None
    tz = m.group(3) or "Z"
    base = dt.datetime.fromisoformat(m.group(1) + ("+00:00" if tz == "Z" else tz)).timestamp()
    return base + (float("0." + m.group(2)) if m.group(2) else 0.0)


def split_stamp(line: str) -> tuple[str | None, str]:
    m = _STAMP.match(line)
    return (m.group(1), m.group(2)) if m else (None, line)


def most_telling(finding_ids: list[str]) -> int:
    """Index of the fatal finding to report: the first cause, else the first consequence."""
    for i, fid in enumerate(finding_ids):
        if fid not in CONSEQUENCE_IDS:
            return i
    return 0


class _Follower:
    """``docker logs -f`` of one station's container: lines, the markers seen, fatal lines, and the
    start-up timeline (the tracker survives a restarted stream). Each line is read through the one
    classifier (``console.diagnosis.classify``): markers, timeline, fatal finding, progress lines."""

    def __init__(self, station: Station, transport: Transport, cmd: str, ready: str, started: str,
                 changed: asyncio.Event, emit: Callable[[ActionEvent], None], tracker: EngineLogTracker):
        self.station, self.transport, self.cmd = station, transport, cmd
        self.ready_marker, self.started_marker = ready, started
        self.lines: list[str] = []
        self.ready = self.started = self.ended = False
        self.fatal: tuple[str, str] | None = None  # (finding id, line)
        self.fatal_fix: str | None = None
        self.fatal_context: list[str] = []
        self.error: str | None = None
        self.restarts = 0
        self.tracker = tracker
        self._changed, self._emit = changed, emit
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async for raw in self.transport.stream(self.cmd):
                ts, text = split_stamp(raw)
                self.lines.append(text)
                batch = classify([text])
                line = batch.line(0)
                self._timeline(batch, parse_docker_time(ts) if ts else None)
                if line.holds(self.started_marker):
                    self.started = True
                    self._changed.set()
                if self.station.is_head and line.holds(self.ready_marker):
                    self.ready = True
                    self._changed.set()
                if self.fatal is None or self.fatal[0] in CONSEQUENCE_IDS:
                    try:
                        hit = line.fatal
                    except Exception:  # a bug in the catalogue must not break a launch
                        hit = None
                    if hit and (self.fatal is None or hit[0] not in CONSEQUENCE_IDS):
                        self.fatal, self.fatal_fix = (hit[0], text), hit[1]
                        self.fatal_context = self.lines[-5:]
                        self._changed.set()
                if line.progress:
                    self._emit(ActionEvent("log", self.station.name, text))
        except TransportError as exc:
            self.error = str(exc)
        finally:
            self.ended = True
            self._changed.set()

    def _timeline(self, batch: ClassifiedBatch, at: float | None) -> None:
        before = {e.event: e for e in self.tracker.progress.timeline}
        if not self.tracker.feed_classified(batch, at):
            return
        for ev in self.tracker.progress.timeline:
            if before.get(ev.event) != ev:
                self._emit(ActionEvent("timeline", self.station.name, timeline_text(ev), timeline=ev))

    async def close(self) -> None:
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(BaseException):
            await self.task


def timeline_text(ev: TimelineEvent) -> str:
    return TIMELINE_LABELS.get(ev.event, ev.event) + (f": {ev.detail}" if ev.detail else "")


class ServiceActions:
    """launch / stop / restart for one config. Create one per action run; ``close()`` after."""

    def __init__(self, cfg: Config, *, transports: dict[str, Transport] | None = None,
                 on_event: Callable[[ActionEvent], None] | None = None,
                 ready_timeout_s: float | None = None, start_timeout_s: float = 120.0,
                 health_timeout_s: float = 60.0, stop_timeout_s: int = 30,
                 api_key: str | None | bool = False, verify_timeout_s: float = 30.0,
                 history: launch_history.LaunchHistory | None = None):
        self.cfg = cfg
        self._own_transports = transports is None
        self.transports: dict[str, Transport] = transports or {
            s.name: make_transport(s, cfg.connect_timeout_s, cfg.command_timeout_s) for s in cfg.stations}
        self.on_event = on_event or (lambda ev: None)
        self.ready_timeout_s = ready_timeout_s or max(600.0, 2.5 * cfg.profile.gpu.cold_load_s)
        self.start_timeout_s = start_timeout_s
        self.health_timeout_s = health_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.verify_timeout_s = verify_timeout_s
        self.history = history or launch_history.LaunchHistory()
        self._api_key = cfg.api_key() if api_key is False else (api_key or None)
        self._followers: dict[str, _Follower] = {}
        self._trackers: dict[str, EngineLogTracker] = {}
        self._events: dict[str, list[TimelineEvent]] = {}  # events not from a log (container, port, health, token)
        self._baseline: dict[str, dict[str, Any]] = {}
        self._scripts: dict[str, ScriptInfo] = {}
        self._fit: FitReport | None = None
        self._last_readings: dict[str, MemoryReading] = {}
        self._consequence_at: float | None = None
        self._ready_deadline = float("inf")
        self._changed = asyncio.Event()
        self._started: list[Station] = []  # containers this run started, in start order
        self._unreached: dict[str, str] = {}
        self._stopped: list[str] = []  # stations this run stopped (in stop / restart)
        self._cancel_requested = self._cancelling = False
        self._res = ActionResult("none")

    # ------------------------------------------------------------ plumbing

    @property
    def order_start(self) -> list[Station]:
        return list(self.cfg.workers) + [self.cfg.head]

    @property
    def order_stop(self) -> list[Station]:
        return [self.cfg.head] + list(self.cfg.workers)

    @property
    def scripted(self) -> list[Station]:
        """Stations whose container the operator's launch script starts."""
        return [s for s in self.cfg.stations if self.cfg.launch_script_for(s)]

    def _emit(self, ev: ActionEvent) -> None:
        with contextlib.suppress(Exception):
            self.on_event(ev)

    def note(self, station: str, text: str) -> None:
        self._emit(ActionEvent("note", station, text))

    @contextlib.asynccontextmanager
    async def step(self, station: str, action: str) -> AsyncIterator[Step]:
        self._check_cancel()
        st = Step(station, action)
        self._res.steps.append(st)
        self._emit(ActionEvent("step", station, f"{action}...", st))
        try:
            yield st
        except ActionFailed as exc:
            st.status, st.detail = "failed", st.detail or exc.detail
            raise
        except asyncio.CancelledError:
            st.status, st.detail = "cancelled", st.detail or "cancelled by the operator"
            raise
        except TransportError as exc:
            st.status, st.detail = "failed", str(exc)
            raise ActionFailed(str(exc)) from None
        else:
            if st.status == "running":
                st.status = "ok"
        finally:
            st.finished_at = time.time()
            self._emit(ActionEvent("step", station, f"{action}: {st.status}"
                                   + (f" ({st.detail})" if st.detail else ""), st))

    def _skip(self, station: str, action: str, detail: str) -> None:
        now = time.time()
        st = Step(station, action, "skipped", now, now, detail)
        self._res.steps.append(st)
        self._emit(ActionEvent("step", station, f"{action}: skipped ({detail})", st))

    async def _run(self, s: Station, cmd: str, timeout: float | None = None, input: str | None = None
                   ) -> CommandResult:
        return await self.transports[s.name].run(cmd, timeout=timeout, input=input)

    async def container_state(self, s: Station) -> docker_probe.ContainerInfo:
        r = await self._run(s, rc.docker_inspect(s.container))
        try:
            return docker_probe.parse_inspect(s.container, r.stdout + r.stderr, r.exit_status)
        except ParseError as exc:
            raise ActionFailed(f"{s.name}: {exc}") from None

    async def _states(self, tolerate: bool = False) -> dict[str, docker_probe.ContainerInfo]:
        """Every station's container; with ``tolerate`` an unreachable station is left out (its
        step failed) instead of failing the whole action before anything is done."""
        async def one(s: Station) -> docker_probe.ContainerInfo:
            async with self.step(s.name, "inspect") as st:
                info = await self.container_state(s)
                st.detail = f"{s.container}: {info.state}"
                return info

        infos = await asyncio.gather(*(one(s) for s in self.cfg.stations), return_exceptions=True)
        out = {}
        for s, x in zip(self.cfg.stations, infos, strict=True):
            if isinstance(x, ActionFailed) and tolerate:
                self._unreached[s.name] = x.detail
            elif isinstance(x, BaseException):
                raise x
            else:
                out[s.name] = x
        return out

    async def close(self) -> None:
        for f in list(self._followers.values()):
            await f.close()
        self._followers.clear()
        if self._own_transports:
            for t in self.transports.values():
                with contextlib.suppress(Exception):
                    await t.close()

    def _record_event(self, station: str, event: str, at: float | None = None, detail: str = "",
                      values: tuple[tuple[str, float], ...] = ()) -> TimelineEvent:
        ev = TimelineEvent(event, time.time() if at is None else at, detail, values)
        self._events.setdefault(station, []).append(ev)
        self._emit(ActionEvent("timeline", station, timeline_text(ev), timeline=ev))
        return ev

    def timeline(self) -> dict[str, list[TimelineEvent]]:
        """Per station, in time order: our own events plus the log's (this run only)."""
        out = {}
        for s in self.cfg.stations:
            evs = list(self._events.get(s.name, []))
            tr = self._trackers.get(s.name)
            if tr is not None:
                evs += list(tr.progress.timeline)
            if evs:
                out[s.name] = sorted(evs, key=lambda e: e.at)
        return out

    # ------------------------------------------------------------ plan (preview)

    async def resolve(self, stations: list[Station] | None = None) -> dict[str, engines.StationRuntime]:
        """GPU UUIDs and the image digest per station; the image must be the same everywhere."""
        async def one(s: Station) -> engines.StationRuntime:
            async with self.step(s.name, "resolve") as st:
                r = await self._run(s, rc.gpu_list())
                if not r.ok:
                    raise ActionFailed(f"nvidia-smi failed on {s.name}: {_last(r.stderr or r.stdout)}")
                gpus = []
                for row in r.stdout.splitlines():
                    parts = [p.strip() for p in row.split(",")]
                    if len(parts) >= 3 and parts[0].isdigit():
                        gpus.append((int(parts[0]), parts[1], ",".join(parts[2:])))
                try:
                    uuids = engines.pick_gpus(s, self.cfg.profile, gpus, len(self.cfg.stations))
                except engines.EngineConfigError as exc:
                    raise ActionFailed(str(exc)) from None
                image = await self._image_digest(s)
                st.detail = f"GPU {', '.join(uuids)}; image {image} (registry digest)"
                return engines.StationRuntime(uuids, image)

        todo = self.cfg.stations if stations is None else stations
        out = await asyncio.gather(*(one(s) for s in todo), return_exceptions=True)
        for x in out:
            if isinstance(x, BaseException):
                raise x
        rts = {s.name: x for s, x in zip(todo, out, strict=True)}  # type: ignore[misc]
        images = {rt.image for rt in rts.values()}  # type: ignore[union-attr]
        if len(images) > 1:
            raise ActionFailed("the image differs between stations: " + "; ".join(
                f"{n}: {rt.image}" for n, rt in rts.items()))  # type: ignore[union-attr]
        return rts  # type: ignore[return-value]

    async def _image_digest(self, s: Station) -> str:
        image = str(self.cfg.overrides.get("image") or self.cfg.profile.image)
        if "@sha256:" in image:
            return image
        r = await self._run(s, rc.image_digests(image))
        if not r.ok:
            raise ActionFailed(f"image {image} is not on {s.name} ({_last(r.stderr)}): docker pull it there first")
        try:
            digests = [d for d in json.loads(r.stdout.strip() or "[]") if "@sha256:" in d]
        except (json.JSONDecodeError, TypeError):
            digests = []
        if not digests:
            raise ActionFailed(f"image {image} on {s.name} has no repo digest (built locally?): "
                               "pin it by digest in overrides.image")
        repo = image.rsplit(":", 1)[0] if ":" in image.split("/")[-1] else image
        return next((d for d in digests if d.split("@")[0] == repo), digests[0])

    async def plan_launch(self) -> dict[str, engines.LaunchSpec]:
        """The ``docker run`` per station that the console starts itself (not the scripted ones)."""
        own = [s for s in self.order_start if not self.cfg.launch_script_for(s)]
        if not own:
            return {}
        rts = await self.resolve(own)
        try:
            return {s.name: engines.build_launch(self.cfg, s, rts[s.name], api_key_set=bool(self._api_key))
                    for s in own}
        except engines.EngineConfigError as exc:
            raise ActionFailed(str(exc)) from None

    async def read_scripts(self) -> dict[str, ScriptInfo]:
        """The operator's launch script on each scripted station: size, sha256, text."""
        async def one(s: Station) -> ScriptInfo:
            path = self.cfg.launch_script_for(s) or ""
            async with self.step(s.name, "script") as st:
                r = await self._run(s, rc.script_info(path))
                lines = r.stdout.splitlines()
                if not r.ok or len(lines) < 2 or not lines[0].strip().isdigit():
                    raise ActionFailed(f"{s.name}: cannot read the launch script {path} "
                                       f"({_last(r.stderr or r.stdout)})")
                info = ScriptInfo(path, int(lines[0].strip()), lines[1].strip(), sanitize("\n".join(lines[2:])))
                st.detail = f"{path}: {info.size:,} bytes, sha256 {info.sha256[:16]}"
                return info

        out = await asyncio.gather(*(one(s) for s in self.scripted), return_exceptions=True)
        for x in out:
            if isinstance(x, BaseException):
                raise x
        self._scripts = {s.name: x for s, x in zip(self.scripted, out, strict=True)}  # type: ignore[misc]
        return self._scripts

    async def estimate_fit(self, assume_idle: bool = False) -> FitReport:
        """The fit estimate on every station (the launch's gate and ``dgx-console plan``)."""
        async def run(s: Station, cmd: str) -> CommandResult:
            return await self._run(s, cmd)

        scripts = {n: i.text for n, i in self._scripts.items()}
        self._fit = await gather_fit(run, self.cfg, scripts, assume_idle=assume_idle)
        return self._fit

    async def service_running(self, states: dict[str, docker_probe.ContainerInfo]) -> str | None:
        """What is running, in words (None when nothing runs): the launch must not pass over it."""
        running = [n for n, i in states.items() if i.state == "running"]
        if not running:
            return None
        names = _and(running)
        if len(running) < len(states):
            return f"a service is partly running (on {names}); launch replaces it"
        from console.serving.client import ApiClient

        async with ApiClient(self.cfg.api_url(), None, timeout=min(3.0, self.cfg.api.timeout_s)) as client:
            h = await client.health()
        if h.ok:
            return f"a healthy service is running on {names}; launch replaces it"
        return f"a service is running on {names} (not answering /health: {one_line(h.error or '', 120)}); " \
               "launch replaces it"

    async def plan(self, action: str, fit_gate: bool = True) -> ActionPlan:
        """Everything the confirmation shows, read from the stations now."""
        states = await self._states() if action in ("launch", "restart") else {}
        p = ActionPlan(action, [], states=states)
        if action == "launch":
            p.running = await self.service_running(states)
            if self.scripted:
                p.scripts = await self.read_scripts()
            p.specs = await self.plan_launch()
            if fit_gate:
                with contextlib.suppress(ActionFailed, TransportError):
                    p.fit = await self.estimate_fit(assume_idle=p.running is not None)
        p.commands = self.preview(action, p.specs, states, p.scripts)
        return p

    def preview(self, action: str, specs: dict[str, engines.LaunchSpec] | None = None,
                states: dict[str, docker_probe.ContainerInfo] | None = None,
                scripts: dict[str, ScriptInfo] | None = None) -> list[PlannedCommand]:
        """The commands an action runs, in order, each line true for the ``states`` it describes
        (launch needs ``specs`` from ``plan_launch`` for the stations it starts itself)."""
        out: list[PlannedCommand] = []
        states = states or {}
        scripts = scripts if scripts is not None else self._scripts
        running = [s for s in self.order_stop if states.get(s.name) and states[s.name].state == "running"]
        if action == "launch":
            for s in running:
                out.append(PlannedCommand(s.name, "stop the running container (head first) and check it stopped "
                                          "clean", rc.docker_stop(s.container, self.stop_timeout_s)))
            for s in self.order_start:
                info = states.get(s.name)
                prev = prev_name(s.container)
                keep = f"{rc.docker_rm(prev)}; {rc.docker_rename(s.container, prev)}"
                if info is None:
                    out.append(PlannedCommand(s.name, f"if a container {s.container} exists, keep it and its log "
                                              f"as {prev}", keep))
                elif info.state == "running":
                    out.append(PlannedCommand(s.name, f"keep the container just stopped and its log as {prev}", keep))
                elif info.state == "exited":
                    code = f", exit code {info.exit_code}" if info.exit_code is not None else ""
                    out.append(PlannedCommand(s.name, f"keep the stopped container ({s.container}{code}) and its "
                                              f"log as {prev}", keep))
                elif info.state == "created":
                    out.append(PlannedCommand(s.name, f"keep the container {s.container} (created, never started) "
                                              f"as {prev}", keep))
                elif info.state != "absent":
                    out.append(PlannedCommand(s.name, f"keep the {info.state} container {s.container} as {prev}", keep))
                role = "head (API server)" if s.is_head else "worker"
                script = scripts.get(s.name)
                path = self.cfg.launch_script_for(s)
                if path:
                    what = f"start {role}: run the launch script {path}"
                    if script is not None:
                        what += f" ({script.size:,} bytes, sha256 {script.sha256[:16]}...), first lines:"
                        prev_text = script.first_lines()
                    else:
                        prev_text = f"bash {path}"
                    out.append(PlannedCommand(s.name, what, prev_text))
                else:
                    assert specs is not None and s.name in specs
                    out.append(PlannedCommand(s.name, "start " + role, specs[s.name].preview()))
        elif action in ("stop", "restart"):
            for s in self.order_stop:
                out.append(PlannedCommand(s.name, "stop", rc.docker_stop(s.container, self.stop_timeout_s)))
            out.append(PlannedCommand("all", "verify the stop", "container not running, API port closed, no compute "
                                      "process left, memory back to its pre-launch baseline"))
        if action == "restart":
            for s in self.order_start:
                out.append(PlannedCommand(s.name, "start", rc.docker_start(s.container)))
        return out

    # ------------------------------------------------------------ actions

    async def launch(self, *, skip_checks: bool = False, specs: dict[str, engines.LaunchSpec] | None = None,
                     on_failure: FailureDecision = True, on_cancel: str = "stop", replace: bool = False,
                     skip_fit: bool = False, drop_caches: bool = False) -> ActionResult:
        async def body() -> None:
            states = await self._states()
            running = await self.service_running(states)
            if running and not replace:
                raise ActionFailed(f"{running}: add --replace to stop it first (nothing was changed)")
            await self._preflight(skip_checks)
            if self.scripted and not self._scripts:
                await self.read_scripts()
            plan = specs if specs is not None else await self.plan_launch()
            if running:  # replace: stop it (head first), prove it stopped, then start fresh
                self.note("all", running)
                await self._stop_all(states)
                verdicts = await self._verify_stopped(list(self.cfg.stations), states, self.history.last_baseline(
                    launch_history.config_key(self.cfg)))
                bad = [v for v in verdicts.values() if not v.clean]
                if bad:
                    raise ActionFailed("the running service did not stop clean, so it was not replaced: "
                                       + "; ".join(v.summary() for v in bad),
                                       [(v.station, f["cause"]) for v in bad for f in v.findings])
                states = await self._states()
            if drop_caches:
                await self._drop_caches()
            await self._fit_gate(skip_fit)
            for s in self.order_start:
                if self.cfg.launch_script_for(s):
                    await self._start_script(s, states[s.name])
                else:
                    await self._start_fresh(s, plan[s.name], states[s.name])
                if not s.is_head:
                    await self._wait_started(s)
            await self._verify()

        return await self._guard("launch", body, on_failure, on_cancel)

    async def stop(self) -> ActionResult:
        async def body() -> None:
            states = await self._states(tolerate=True)
            base = self.history.last_baseline(launch_history.config_key(self.cfg))
            reachable = [s for s in self.cfg.stations if s.name in states]
            if self._unreached:  # stop what can be stopped (head first), then say what could not be
                await self._stop_all(states)
                await self._verify_stopped(reachable, states, base)
                raise ActionFailed("could not reach " + "; ".join(self._unreached.values()) + " (stopped: "
                                   + (", ".join(n for n, i in states.items() if i.state == "running") or "none")
                                   + ")")
            was = [s.name for s in self.order_stop if states[s.name].state == "running"]
            if not was:
                self._skip("all", "stop", "already stopped (" + ", ".join(
                    f"{n}: {i.state}" for n, i in states.items()) + ")")
            failed = await self._stop_all(states)
            verdicts = await self._verify_stopped(reachable, states, base)
            bad = [v for v in verdicts.values() if not v.clean]
            if bad or failed:
                raise ActionFailed("not clean after the stop: " + "; ".join(
                    [v.summary() for v in bad] + [f for f in failed if not any(f.startswith(v.station) for v in bad)]),
                    [(v.station, f["cause"]) for v in bad for f in v.findings])
            self._res.summary = ("stopped " + ", ".join(was) + " (head first); " if was else "already stopped; ") \
                + "verified clean on " + ", ".join(verdicts)

        return await self._guard("stop", body, False, "keep")

    async def restart(self, *, on_failure: FailureDecision = True, on_cancel: str = "stop") -> ActionResult:
        async def body() -> None:
            states = await self._states()
            absent = [n for n, i in states.items() if i.state == "absent"]
            if absent:
                raise ActionFailed("no container on " + ", ".join(absent) + ": use launch")
            failed = await self._stop_all(states)
            verdicts = await self._verify_stopped(list(self.cfg.stations), states, self.history.last_baseline(
                launch_history.config_key(self.cfg)))
            bad = [v for v in verdicts.values() if not v.clean]
            if bad or failed:
                raise ActionFailed("not restarted: the stop did not come back clean: "
                                   + "; ".join([v.summary() for v in bad] + failed),
                                   [(v.station, f["cause"]) for v in bad for f in v.findings])
            self._baseline = {n: m.to_baseline() for n, m in self._last_readings.items()}
            for s in self.order_start:
                await self._docker_start(s)
                if not s.is_head:
                    await self._wait_started(s)
            await self._verify()

        return await self._guard("restart", body, on_failure, on_cancel)

    async def _guard(self, action: str, body: Callable[[], Awaitable[None]], on_failure: FailureDecision,
                     on_cancel: str) -> ActionResult:
        self._res = res = ActionResult(action, steps=list(self._res.steps))  # keeps plan_launch's steps
        self._consequence_at = None
        try:
            await body()
            if res.result == "ok" and not res.summary:
                res.summary = f"{action}: done"
        except ActionFailed as exc:
            res.result, res.summary = "failed", exc.detail
            res.evidence = exc.evidence
            await self._close_followers()
            if self._started and not exc.service_up:
                stop = on_failure if isinstance(on_failure, bool) else on_failure(res)
                if inspect.isawaitable(stop):
                    stop = await stop
                if stop:
                    await self._cleanup("after the failure")
                else:
                    res.summary += "; left running: " + ", ".join(s.name for s in self._started)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and hasattr(task, "uncancel"):
                task.uncancel()  # the cancel is handled here: the clean-up below must be able to await
            res.result = "cancelled"
            await self._close_followers()
            if self._started and on_cancel == "stop":
                await self._cleanup("after the cancel")
                res.summary = "cancelled; stopped what this run had started: " + ", ".join(
                    s.name for s in self._started) + " (nothing left running)"
            elif self._started:
                res.summary = "cancelled; left running: " + ", ".join(s.name for s in self._started)
            elif self._stopped:
                res.summary = "cancelled; stopped so far: " + ", ".join(self._stopped) + " (the rest as it was)"
            else:
                res.summary = "cancelled before anything was started or stopped"
        finally:
            await self._close_followers()
            if res.transport == "unknown" and self._followers:  # best effort on failure: what NCCL chose
                seen = [transport_of_lines(f.lines) for f in self._followers.values()]
                known = [t for t in seen if t != "unknown"]
                if known:
                    res.transport = functools.reduce(worse, known)
            res.timeline = self.timeline()
            res.fit = self._fit
            if action in ("launch", "restart") and self._started:
                self._save_history(action, res)
        return res

    def _save_history(self, action: str, res: ActionResult) -> None:
        """Keep this start-up (and the baseline before it); compare with the last ones."""
        key = launch_history.config_key(self.cfg)
        previous = self.history.previous_durations(key)
        now = {n: launch_history.durations(evs) for n, evs in res.timeline.items()}
        if res.result == "ok":
            res.notes += launch_history.compare({n: d for n, d in now.items() if d}, previous)
        err = self.history.append(launch_history.make_record(self.cfg, action, res.result, res.timeline,
                                                             self._baseline))
        if err:
            res.notes.append(err)
        for line in res.notes:
            self.note("all", line)

    async def _cleanup(self, why: str) -> None:
        states = {}
        for s in self._started:
            with contextlib.suppress(ActionFailed, TransportError):
                states[s.name] = await self.container_state(s)
        for s in [st for st in self.order_stop if st in self._started]:
            info = states.get(s.name)
            if info is not None and info.state != "running":
                self._skip(s.name, "stop", f"{why}: already {info.state}")
                continue
            with contextlib.suppress(ActionFailed):
                await self._stop_one(s, why)

    async def _close_followers(self) -> None:
        for f in list(self._followers.values()):
            await f.close()

    # ------------------------------------------------------------ pieces

    async def _preflight(self, skip: bool) -> None:
        if skip:
            self._skip("all", "checks", "--skip-checks")
            return
        try:
            from console.station.checks import run_checks  # written in parallel; optional
        except ImportError:
            self._skip("all", "checks", "preflight checks are not available in this build")
            return
        async with self.step("all", "checks") as st:
            try:
                out = run_checks(self.cfg)
                if inspect.isawaitable(out):
                    out = await out
            except (asyncio.CancelledError, ActionFailed):
                raise
            except Exception as exc:  # noqa: BLE001 - any failure of the gate blocks the launch
                raise ActionFailed(f"preflight checks could not run: {exc} (use --skip-checks to launch anyway)"
                                   ) from None
            results = list(out or [])
            failed = [c for c in results if getattr(c, "status", "") == "fail"]
            if failed:
                ev = [(getattr(c, "station", "") or "all",
                       f"{getattr(c, 'id', '?')}: {_first(getattr(c, 'summary', '') or getattr(c, 'evidence', ''))}")
                      for c in failed]
                raise ActionFailed("preflight failed: " + ", ".join(
                    f"{getattr(c, 'id', '?')}@{getattr(c, 'station', '') or 'all'}" for c in failed)
                    + " (fix them, or --skip-checks)", ev)
            warned = [c for c in results if getattr(c, "status", "") == "warn"]
            st.detail = f"{len(results)} checks, {len(warned)} warnings"
            if warned:
                st.status = "warn"

    async def _fit_gate(self, skip: bool) -> None:
        """The estimate before the load; it also records the memory baseline a later stop checks
        against. Does not fit: the launch stops here, minutes before the engine would say so."""
        async with self.step("all", "fit") as st:
            report = await self.estimate_fit()
            self._baseline = {n: m.to_baseline() for n, m in report.memory.items() if not m.error}
            errors = [w for w in report.warnings() if w.severity == "error"]
            lines = [f"{f.station}: weights {f.weights_gib:.1f} GiB/GPU, KV ~{f.kv_gib:.1f} GiB = {f.kv_tokens:,} "
                     f"tokens ({f.concurrency:.1f} x {f.settings.max_model_len:,})" for f in report.fits]
            st.detail = "; ".join(lines)
            for w in report.warnings():
                if w.severity != "info" or w.id == "kv-concurrency":
                    self.note(w.station, w.text + (f" (fix: {w.fix})" if w.fix and w.severity != "info" else ""))
            if errors and not skip:
                drop = " --drop-caches," if any(w.id == "free-memory-at-startup" for w in errors) else ""
                unknown = all(w.id in ("model-config", "memory-unknown") for w in errors)
                raise ActionFailed(("the estimate could not be made: " if unknown else
                                    "the estimate says it does not fit: ") + "; ".join(w.text for w in errors)
                                   + f" (fix it,{drop} or --skip-fit to launch anyway)",
                                   [(w.station, f"{w.id}: {w.fix}") for w in errors])
            if errors:
                st.status, st.detail = "warn", "does not fit (launching anyway, --skip-fit): " + st.detail
            elif any(w.severity == "warning" for w in report.warnings()):
                st.status = "warn"

    async def _drop_caches(self) -> None:
        """Drop the page cache on every station before the estimate (unified memory: vLLM counts
        the cache as used and refuses to start below its share)."""
        async def one(s: Station) -> None:
            async with self.step(s.name, "drop-caches") as st:
                r = await self._run(s, rc.drop_caches())
                if not r.ok:
                    raise ActionFailed(f"{s.name}: dropping the page cache needs root or passwordless sudo "
                                       f"({one_line(_last(r.stderr or r.stdout), 160)})")
                st.detail = "sync; vm.drop_caches=3"

        out = await asyncio.gather(*(one(s) for s in self.cfg.stations), return_exceptions=True)
        for x in out:
            if isinstance(x, BaseException):
                raise x

    async def _keep_prev(self, s: Station, info: docker_probe.ContainerInfo) -> None:
        """Keep the last run's container and log for the diagnosis: rename, not remove."""
        if info.state == "absent":
            return
        prev = prev_name(s.container)
        r = await self._run(s, rc.docker_rm(prev))
        if not r.ok and "no such container" not in (r.stderr + r.stdout).lower():
            raise ActionFailed(f"docker rm {prev} failed on {s.name}: {_last(r.stderr)}")
        r = await self._run(s, rc.docker_rename(s.container, prev))
        if not r.ok:
            raise ActionFailed(f"docker rename failed on {s.name}: {_last(r.stderr)}")

    async def _start_fresh(self, s: Station, spec: engines.LaunchSpec, info: docker_probe.ContainerInfo) -> None:
        async with self.step(s.name, "run") as st:
            await self._keep_prev(s, info)
            try:  # secret values travel on stdin, by name only (never in an argv on the station)
                key_input = engines.secret_input(self.cfg, spec, self._api_key)
            except engines.EngineConfigError as exc:
                raise ActionFailed(str(exc)) from None
            r = await self._run(s, spec.command(), timeout=max(120.0, self.cfg.command_timeout_s), input=key_input)
            if not r.ok:
                raise ActionFailed(f"docker run failed on {s.name} (exit {r.exit_status}): {_last(r.stderr)}",
                                   [(s.name, ln) for ln in r.stderr.strip().splitlines()[-3:]])
            self._started.append(s)
            await self._follow_new_run(s, st)

    async def _start_script(self, s: Station, info: docker_probe.ContainerInfo) -> None:
        """Run the operator's launch script detached; it starts the container the config names."""
        path = self.cfg.launch_script_for(s) or ""
        log = f"~/.cache/dgx-console/launch-{s.container}.log"
        async with self.step(s.name, "script") as st:
            await self._keep_prev(s, info)
            r = await self._run(s, rc.run_launch_script(path, log))
            words = r.stdout.split()
            if not r.ok or not words or not words[-1].isdigit():
                raise ActionFailed(f"{s.name}: the launch script {path} did not start ({_last(r.stderr or r.stdout)})")
            pid = int(words[-1])
            deadline = time.monotonic() + self.start_timeout_s
            while True:
                self._check_cancel()
                cur = await self.container_state(s)
                if cur.state == "running":
                    break
                alive = "alive" in (await self._run(s, rc.pid_alive(pid))).stdout
                if not alive:
                    cur = await self.container_state(s)
                    if cur.state == "absent":
                        tail = (await self._run(s, rc.tail_file(log))).stdout
                        raise ActionFailed(f"{s.name}: the launch script {path} ended without starting "
                                           f"{s.container}: {one_line(_last(tail), 200)}",
                                           [(s.name, sanitize(ln)) for ln in tail.strip().splitlines()[-5:]])
                    break  # it started and already exited: the log says why
                if time.monotonic() > deadline:
                    raise ActionFailed(f"{s.name}: no container {s.container} within {self.start_timeout_s:g} s of "
                                       f"running {path} (the config's container name must match the script's)")
                await asyncio.sleep(0.5)
            self._started.append(s)
            await self._follow_new_run(s, st)
            st.detail = f"{path} (pid {pid}): {st.detail}"

    async def _docker_start(self, s: Station) -> None:
        async with self.step(s.name, "start") as st:
            r = await self._run(s, rc.docker_start(s.container))
            if not r.ok:
                raise ActionFailed(f"docker start failed on {s.name}: {_last(r.stderr)}")
            self._started.append(s)
            await self._follow_new_run(s, st)

    async def _follow_new_run(self, s: Station, st: Step) -> None:
        info = await self.container_state(s)
        started = parse_docker_time(info.started_at or "")
        if started is None:
            raise ActionFailed(f"{s.name}: container has no start time ({info.state})")
        since = f"{started - 0.001:.6f}"
        cmd = rc.docker_logs_since(s.container, since)
        old = self._followers.pop(s.name, None)
        if old:
            await old.close()
        self._trackers[s.name] = tracker = EngineLogTracker(self.cfg.profile.engine, head=s.is_head)
        self._events.pop(s.name, None)
        self._record_event(s.name, "container-started", started, f"{s.container} {info.state}")
        self._followers[s.name] = _Follower(
            s, self.transports[s.name], cmd, engines.ready_marker(self.cfg),
            engines.started_marker(self.cfg, s), self._changed, self._emit, tracker)
        st.detail = f"{s.container} {info.state} since {info.started_at}"
        if info.state != "running":
            await self._wait(lambda: False, 5.0, f"{s.name} to report why it stopped")

    async def _wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Until ``done()``; a fatal line or an ended log stream on any station fails at once."""
        deadline = time.monotonic() + timeout
        while True:
            self._raise_if_fatal()
            if done():
                return
            for name, f in self._followers.items():
                if f.ended:
                    await asyncio.sleep(0)
                    if f.fatal:
                        break
                    st = self.cfg.station(name)
                    info = await self.container_state(st)
                    if f.error:
                        raise ActionFailed(f"lost the log stream of {name}: {f.error}")
                    if info.state != "running":
                        raise ActionFailed(f"{name}: the container exited (code {info.exit_code}) while waiting for "
                                           f"{what}", [(name, ln) for ln in f.lines[-5:]])
                    self._restart_follower(st)
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ActionFailed(f"timed out after {timeout:g} s waiting for {what}")
                self._changed.clear()
                # asyncio.wait, not wait_for: on 3.11 wait_for can swallow a cancel that races its timeout
                waiter = asyncio.ensure_future(self._changed.wait())
                try:
                    await asyncio.wait({waiter}, timeout=max(0.05, min(left, 5.0, self._grace_left())))
                finally:
                    waiter.cancel()

    def request_cancel(self, task: asyncio.Task | None = None) -> None:
        """Cancel from outside (Ctrl+C, a key): a flag checked at every step and every wake-up of a
        wait (woken at once). ``task``: also cancel it, for a hard stop of a command in flight."""
        self._cancel_requested = True
        self._changed.set()
        if task is not None and not task.done():
            task.cancel()

    def _check_cancel(self) -> None:
        if self._cancel_requested and not self._cancelling:
            self._cancelling = True  # once: the clean-up that follows must run
            raise asyncio.CancelledError()

    def _raise_if_fatal(self) -> None:
        """Fail on the most telling fatal line: a cause on any station beats a consequence."""
        self._check_cancel()
        found = [(name, f) for name, f in self._followers.items() if f.fatal]
        if not found:
            return
        i = most_telling([f.fatal[0] for _, f in found])  # type: ignore[index]
        name, f = found[i]
        if f.fatal[0] in CONSEQUENCE_IDS:  # type: ignore[index]
            if self._consequence_at is None:
                self._consequence_at = time.monotonic()
            if self._grace_left() > 0:
                return
        fid, line = f.fatal  # type: ignore[misc]
        fix = f" (fix: {f.fatal_fix})" if f.fatal_fix else ""
        raise ActionFailed(f"{name}: {fid}: {line.strip()[:300]}{fix}", [(name, ln) for ln in f.fatal_context])

    def _grace_left(self) -> float:
        """Seconds a consequence-only failure still waits for its cause (inf when none is pending)."""
        if self._consequence_at is None:
            return float("inf")
        return CONSEQUENCE_GRACE_S - (time.monotonic() - self._consequence_at)

    def _restart_follower(self, s: Station) -> None:
        """The log stream ended but the container runs (a dropped channel): follow again, a few times."""
        old = self._followers[s.name]
        if old.restarts >= 3:
            raise ActionFailed(f"the log stream of {s.name} keeps ending: {_last(chr(10).join(old.lines))}")
        f = _Follower(s, self.transports[s.name], old.cmd, old.ready_marker, old.started_marker,
                      self._changed, lambda ev: None, old.tracker)  # lines already shown are not re-emitted
        f.started, f.ready, f.restarts = old.started, old.ready, old.restarts + 1
        self._followers[s.name] = f

    async def _wait_started(self, s: Station) -> None:
        async with self.step(s.name, "started") as st:
            f = self._followers[s.name]
            if not f.started_marker:
                st.detail = "container running (it joins the cluster once the head is up)"
                return
            try:
                await self._wait(lambda: f.started, self.start_timeout_s, f"{s.name}'s engine process to start")
            except ActionFailed as exc:
                if not exc.detail.startswith("timed out") or not f.lines:
                    raise
                # Another engine version may word its first line differently: it prints and runs.
                st.status = "warn"
                st.detail = f"no {f.started_marker!r} line in {self.start_timeout_s:g} s, but it runs and logs"
                return
            st.detail = f"engine process up ({f.started_marker!r} seen)"

    async def _verify(self) -> None:
        head = self.cfg.head
        self._ready_deadline = time.monotonic() + self.ready_timeout_s
        async with self.step(head.name, "ready") as st:
            f = self._followers[head.name]
            t0 = time.monotonic()
            await self._wait(lambda: f.ready, self.ready_timeout_s, f"{head.name} to print {f.ready_marker!r}")
            st.detail = f"{f.ready_marker!r} after {time.monotonic() - t0:.1f} s"
        await self._health()
        await self._first_token()
        await self._transport()
        self._compare_kv()
        self._res.summary = (f"serving {self.cfg.profile.served_model_name} at {self.cfg.api_url()} "
                             f"({len(self.cfg.stations)} stations)")

    async def _health(self) -> None:
        from console.serving.client import ApiClient

        head = self.cfg.head.name
        async with self.step(head, "health") as st:
            url = self.cfg.api_url()
            deadline = time.monotonic() + self.health_timeout_s
            port_seen = False
            async with ApiClient(url, None, timeout=min(5.0, self.cfg.api.timeout_s)) as client:
                delay = 0.2
                while True:
                    h = await client.health()
                    if not port_seen and (h.ok or h.status is not None):  # an HTTP answer: the port is open
                        port_seen = True
                        self._record_event(head, "port-open", detail=url)
                    if h.ok:
                        self._record_event(head, "health-ok", detail=f"GET {url}/health -> 200")
                        st.detail = f"GET {url}/health -> 200"
                        return
                    if time.monotonic() + delay > deadline:
                        raise ActionFailed(f"GET {url}/health never returned 200 within "
                                           f"{self.health_timeout_s:g} s: {h.error}")
                    # the server binds its port just after the ready line: a short, bounded retry
                    self._raise_if_fatal()
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)

    async def _first_token(self) -> None:
        """Ready means a reply (console.serving.readiness): the first streamed token, retried on
        busy answers until the launch timeout."""
        from console.serving.client import ApiClient
        from console.serving.readiness import NotReady, first_token, served_model

        head = self.cfg.head.name
        async with self.step(head, "first-token") as st:
            async with ApiClient(self.cfg.api_url(), self._api_key,
                                 timeout=min(10.0, max(5.0, self.cfg.api.timeout_s)), stream_timeout=60.0) as client:
                model = await served_model(client, self.cfg.profile.served_model_name)

                def retrying(tries: int, err: Exception, delay: float) -> None:
                    st.detail = f"try {tries}: {one_line(str(err), 120)}; retrying in {delay:g} s"

                try:
                    tok = await first_token(client, model, self._ready_deadline, retrying, self._raise_if_fatal)
                except NotReady as exc:
                    raise ActionFailed(f"{head} {one_line(exc.detail, 300)}") from None
            self._record_event(head, "first-token", tok.at, f"{tok.ttft_ms:.0f} ms after the request ({model})",
                               (("ttft_ms", round(tok.ttft_ms, 1)),))
            st.detail = f"first token {tok.ttft_ms:.0f} ms after the request" + (
                f" (try {tok.tries})" if tok.tries > 1 else "")

    def _compare_kv(self) -> None:
        """After the load: the engine's own KV figure beside the estimate."""
        if self._fit is None:
            return
        for f in self._fit.fits:
            tr = self._trackers.get(f.station)
            ev = next((e for e in tr.progress.timeline if e.event == "kv-cache"), None) if tr else None
            if ev is None:
                continue
            gib = ev.value("gib") if ev.value("gib") is not None else (
                (ev.value("k") or 0) + (ev.value("v") or 0) or None)
            tokens = ev.value("tokens")
            text = fit.compare_logged(f, gib, int(tokens) if tokens is not None else None)
            if text:
                self._res.notes.append(f"{f.station}: KV cache {text}")

    async def _transport(self) -> None:
        overall = "unknown"
        gdr_expected = self.cfg.profile.link.gpudirect
        for s in self.order_start:
            f = self._followers.get(s.name)
            t = transport_of_lines(f.lines) if f else "unknown"
            overall = worse(overall, t) if overall != "unknown" else t
            async with self.step(s.name, "transport") as st:
                st.detail = TRANSPORT_VERDICT[t]
                if t == "socket":
                    st.status = "failed"
                elif t == "unknown" or (t == "rdma" and gdr_expected):
                    st.status = "warn"
        self._res.transport = overall
        if overall == "socket":
            raise ActionFailed("the service is up but NCCL fell back to TCP sockets (not RDMA): check the "
                               "RDMA devices in the container and NCCL_IB_HCA", service_up=True)

    async def _stop_all(self, states: dict[str, docker_probe.ContainerInfo]) -> list[str]:
        """Head first; a station that will not stop does not keep the others running. Returns what failed."""
        failed = []
        for s in self.order_stop:
            if s.name not in states:
                continue
            if states[s.name].state != "running":
                self._skip(s.name, "stop", f"not running ({states[s.name].state})")
                continue
            try:
                await self._stop_one(s, "")
            except ActionFailed as exc:
                failed.append(exc.detail)
        return failed

    async def _stop_one(self, s: Station, why: str) -> None:
        async with self.step(s.name, "stop") as st:
            r = await self._run(s, rc.docker_stop(s.container, self.stop_timeout_s),
                                timeout=self.stop_timeout_s + self.cfg.command_timeout_s)
            if not r.ok:
                raise ActionFailed(f"{s.name}: docker stop failed: {one_line(_last(r.stderr), 200)}")
            info = await self.container_state(s)
            if info.state == "running":
                raise ActionFailed(f"{s.name}: still running after docker stop")
            self._stopped.append(s.name)
            st.detail = (why + ": " if why else "") + f"{s.container} {info.state}"

    async def _verify_stopped(self, stations: list[Station], states: dict[str, docker_probe.ContainerInfo],
                              baseline: dict[str, dict[str, Any]] | None) -> dict[str, stop_verify.StopVerdict]:
        """Prove the stop on every station: poll until clean or ``verify_timeout_s`` (memory can take
        a few seconds to come back after the container exits)."""
        unified = self.cfg.profile.gpu.unified_memory
        api = self.cfg.api_url().split("://", 1)[-1].rstrip("/")
        self._last_readings = {}

        async def one(s: Station) -> stop_verify.StopVerdict:
            async with self.step(s.name, "verify-stop") as st:
                t0 = time.monotonic()
                base = (baseline or {}).get(s.name)
                while True:
                    info = await self.container_state(s)
                    reading = await read_memory(self._run_cmd, self.cfg, s)
                    port = await port_state(api) if s.is_head else None
                    v = stop_verify.judge(s.name, s.container, info.state, reading, base, unified, port, api,
                                          time.monotonic() - t0)
                    self._last_readings[s.name] = reading
                    if v.clean or info.state == "running" or time.monotonic() - t0 >= self.verify_timeout_s:
                        break
                    st.detail = "waiting: " + v.summary()
                    await asyncio.sleep(min(1.0, max(0.2, self.verify_timeout_s / 20)))
                st.detail = v.summary() + f" ({v.seconds:.1f} s)"
                if not v.clean:
                    st.status = "failed"
                return v

        out = await asyncio.gather(*(one(s) for s in stations), return_exceptions=True)
        verdicts = {}
        for s, x in zip(stations, out, strict=True):
            if isinstance(x, BaseException):
                if isinstance(x, (ActionFailed, TransportError)):
                    x = stop_verify.StopVerdict(s.name, states.get(s.name, docker_probe.ContainerInfo(
                        s.container, "unknown")).state, findings=[{
                            "id": "stop-unverified", "severity": "warning", "station": s.name,
                            "cause": f"{s.name}: the stop could not be verified: {x}", "fix": stop_verify.FIXES[
                                "stop-unverified"], "evidence": []}])
                else:
                    raise x
            verdicts[s.name] = x
        self._res.verified.update(verdicts)
        return verdicts

    async def _run_cmd(self, s: Station, cmd: str) -> CommandResult:
        return await self._run(s, cmd)


async def port_state(hostport: str, timeout: float = 2.0) -> stop_verify.PortState:
    """From the console: does anything still accept a connection on the API's host:port?"""
    host, _, port_s = hostport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    port_s = port_s.split("/", 1)[0]
    if not port_s.isdigit():
        return "unknown"
    try:
        _r, w = await asyncio.wait_for(asyncio.open_connection(host, int(port_s)), timeout)
    except (ConnectionRefusedError, ConnectionResetError):
        return "closed"
    except (TimeoutError, OSError):
        return "unknown"
    w.close()
    with contextlib.suppress(Exception):
        await w.wait_closed()
    return "open"


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]




def prev_name(container: str) -> str:
    return f"{container}-prev"


def _first(text: object) -> str:
    lines = [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]
    return lines[0][:200] if lines else ""


def _last(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "no output"


async def run_action(cfg: Config, action: str, *, skip_checks: bool = False, on_failure: FailureDecision = True,
                     on_cancel: str = "stop", specs: dict[str, engines.LaunchSpec] | None = None,
                     replace: bool = False, skip_fit: bool = False, drop_caches: bool = False,
                     **svc_kw: Any) -> ActionResult:
    """One action with its own transports, closed afterwards (CLI entry)."""
    svc = ServiceActions(cfg, **svc_kw)
    try:
        if action == "launch":
            return await svc.launch(skip_checks=skip_checks, specs=specs, on_failure=on_failure, on_cancel=on_cancel,
                                    replace=replace, skip_fit=skip_fit, drop_caches=drop_caches)
        if action == "stop":
            return await svc.stop()
        if action == "restart":
            return await svc.restart(on_failure=on_failure, on_cancel=on_cancel)
        raise ValueError(f"unknown action {action!r}")
    finally:
        await svc.close()
