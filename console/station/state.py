"""Every fact about one station in one object, and the fleet of them.

The per-station service (``console/station/monitor.py``) posts small messages
(``console/station/messages.py``); ``StationState.apply`` folds each one in and returns the
aspects it changed, so a screen redraws only what moved. The TUI (app -> dashboard -> panes, the
fleet table, the serving panel, the chat and bench screens), ``watch``, ``status`` and the
diagnosis all read these objects; widgets render them and own no station data.

Each source keeps its own time (``at[Aspect.GPUS]``, ``at[Aspect.HOSTMEM]``, ...) and its own
staleness (``stale(aspect, now)``): a value is stale when its own source is late (a periodic
source past ``late_after``) or the whole station is not live, whatever the other sources do. The
station is ``live`` only while its GPU samples are fresh: when they stop while the rest answers the
monitor says ``stale`` and names the late source (``conn.late``), and ``why`` says it in words
("GPU samples stale 12 s: nvidia-smi not answering; SSH fine"). Values derived from several sources are computed
here once: the memory of each GPU (on GB10's unified memory nvidia-smi says ``[N/A]``: the GPU's
share is the sum of its processes, its total the host's memory), its history, the connection
state's groups, ages, whether the engine line shows and the engine's words. What a message changes
(``Aspect``) and how late each source may be are in ``console/station/aspects.py``; the GPU memory
view and its history in ``gpu_memory.py``; the facts the progress judge reads in ``progress_facts.py``.
The container log's last lines are here too (``log``, a bounded ``LogBuffer``): the log view renders
it and the diagnosis numbers its lines by it, so "line N" means one line wherever it is said.

Pure: no widgets, no I/O and no clock of its own: every time comes from a message, or from the
``now`` a reader passes in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import MISSING, Field, dataclass, fields, replace
from typing import TYPE_CHECKING

from console.durations import age as age_words
from console.probes.docker import ContainerInfo
from console.probes.docker import run_started as container_run_started
from console.probes.engine_log import EngineProgress
from console.probes.gpu_health import GpuHealth, HealthFlag
from console.probes.gpu_health import flags as health_flags
from console.probes.gpu_health import worst as worst_flag
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.station.aspects import NOTHING, SOURCE_WORDS, SOURCES, Aspect, health_late_limits, late_limits
from console.station.gpu_memory import GpuMemory, GpuTrace
from console.station.health import XidEvent, xid_event
from console.station.log_buffer import LogBuffer
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuHealthSample,
    GpuSample,
    HostMemSample,
    KernelEvents,
    LogBatch,
    RailsSample,
    RasSample,
    ServingUpdate,
)
from console.station.progress_facts import ProgressFacts
from console.station.rails_live import RailTracker
from console.station.ras_watch import RankHome, RasWatch
from console.station.verdict import NOT_JUDGED, Judgement
from console.vocabulary import (
    CONTAINER_UP_STATES,
    DOWN_STATES,
    ENDED_PHASES,
    HOST_KEY_STATES,
    LOG_READ_STATES,
    NOT_LIVE_STATES,
    ConnState,
    ContainerState,
    EnginePhase,
)

if TYPE_CHECKING:
    from console.config import Config, Station
    from console.probes.kernel_log import KernelEvent
    from console.serving.metrics import ServingSnapshot


#: The kernel log's Xid lines kept per station (the newest).
XIDS_KEPT = 50
KERNEL_SEEN_MAX = 4000  # kernel events remembered per station (an event read twice is taken once)


@dataclass
class Connection:
    """The connection as the service last described it. ``last_sample_at``: wall time of the last
    sample of any stream, as the service said it with a state change (kept when a message carries
    none); ``host_key``: the HostKeyError of a host-key state (fingerprints, key types)."""

    state: ConnState = ConnState.CONNECTING
    detail: str = ""
    host_key: object | None = None
    last_sample_at: float | None = None
    next_try_at: float | None = None
    late: Aspect | None = None  # stale because this one source is late (the rest answers); None: all of it

    @property
    def fingerprint(self) -> str | None:
        return getattr(self.host_key, "fingerprint", None)

    @property
    def live(self) -> bool:
        return self.state == ConnState.LIVE

    @property
    def down(self) -> bool:
        """No connection at all (the pane is marked unreachable, its values dimmed)."""
        return self.state in DOWN_STATES

    @property
    def host_key_pending(self) -> bool:
        """Waiting for the operator's decision on a host key (T)."""
        return self.state in HOST_KEY_STATES

    @property
    def not_live(self) -> bool:
        """Not live and worth an error line (the detail is the error)."""
        return self.state in NOT_LIVE_STATES

    @property
    def logs_readable(self) -> bool:
        """The container log is being read (the diagnosis sees it)."""
        return self.state in LOG_READ_STATES


class StationState:
    """One station: its identity, what each source last said (with its time) and what follows."""

    def __init__(self, name: str, *, rank: int = 0, head: bool = True, container: str = "",
                 gpu_interval_s: float = 1.0, log_lines: int = 5000) -> None:
        self.name, self.rank, self.head, self.container_name = name, rank, head, container
        # the container log's last ``log_lines`` lines, numbered over every line: the one counter the
        # log view shows and the diagnosis's "line N" counts on
        self.log = LogBuffer(log_lines)
        self.late_after = late_limits(gpu_interval_s)  # per periodic source: late (stale) after this
        self.conn = Connection()
        self.gpus: list[GpuReading] = []  # the readings shown (kept, dimmed, when nvidia-smi fails)
        self.gpus_at: float | None = None  # when those readings were taken
        self.gpu_error: str | None = None  # nvidia-smi itself failed (driver, NVML): no GPU could be read
        self.apps: list[ComputeApp] = []
        self.apps_seen = False  # a compute-apps sample came (an empty list is then "no process")
        self.apps_error: str | None = None
        self.host_mem: HostMemory | None = None
        self.host_mem_error: str | None = None
        self.container: ContainerInfo | None = None
        self.engine: EngineProgress | None = None  # derived: what every reader shows (_derive_engine)
        self.engine_read: EngineProgress | None = None  # what the container's log last said
        self.serving: ServingSnapshot | None = None  # the API's last poll (the head's; it has its own ages)
        # what the serving panel may show of it: figures from this container's run only (derived)
        self.serving_shown: ServingSnapshot | None = None
        self._run: str | None = None  # the container run being watched (its started_at)
        self._run_from: float | None = None  # when that run was first seen running (wall time)
        self._run_last: ServingSnapshot | None = None  # the last poll with figures of that run
        self.at: dict[Aspect, float] = {}  # when each source last reported (its own age)
        self.memory: dict[int, GpuMemory] = {}  # by GPU index, derived
        self.traces: dict[int, GpuTrace] = {}  # by GPU index, derived
        self.progress = ProgressFacts()  # what the progress judge reads (console/station/progress.py)
        self.ras = RasWatch()  # the job's RAS watch: Stations gives every station the fleet's one
        # GPU and fabric health
        self.late_after.update(health_late_limits())
        self.health: dict[int, GpuHealth] = {}  # by GPU index: the health stream's last round
        self.health_error: str | None = None
        self.rails = RailTracker()  # expectations set by Stations.for_config (the profile's link)
        self.rails_error: str | None = None
        self.xids: list[XidEvent] = []  # the kernel log's Xid lines (newest last, bounded)
        self.kernel_new: list[KernelEvent] = []  # the events first read with the last KernelEvents
        self._kernel_seen: dict[tuple[float | None, str], None] = {}
        self.kernel_unreadable: str | None = None

    @classmethod
    def for_station(cls, station: Station, gpu_interval_s: float = 1.0, log_lines: int = 5000) -> StationState:
        return cls(station.name, rank=station.rank, head=station.is_head, container=station.container,
                   gpu_interval_s=gpu_interval_s, log_lines=log_lines)

    def __repr__(self) -> str:
        return f"StationState({self.name!r}, {self.conn.state})"

    # ------------------------------------------------------------------ updates

    def apply(self, msg: object) -> frozenset[Aspect]:
        """Fold one message in; the aspects it changed (none for a message of another kind). One
        ``match`` for every message a station takes, each case one handler."""
        self.progress.note(msg)  # the facts the progress judge reads
        match msg:
            case ConnectionState():
                return self._connection(msg)
            case GpuSample():
                return self._gpu_sample(msg)
            case AppsSample():
                return self._apps(msg)
            case HostMemSample():
                return self._host_mem(msg)
            case ContainerUpdate():
                return self._container(msg)
            case EngineUpdate():
                self.engine_read, self.at[Aspect.ENGINE] = msg.progress, msg.at
                self._derive_engine()
                return frozenset({Aspect.ENGINE})
            case LogBatch():
                self.at[Aspect.LOGS] = msg.at
                self.log.extend(msg.lines)
                return frozenset({Aspect.LOGS})
            case ServingUpdate():
                self.serving, self.at[Aspect.SERVING] = msg.snapshot, msg.at
                return frozenset({Aspect.SERVING, *self._derive_serving(), *self._derive_engine()})
            case RasSample():  # a read of the job's RAS report (wherever it ran: it speaks for every rank)
                self.ras.apply(msg)
                return frozenset({Aspect.RAS})
            case GpuHealthSample():
                self.at[Aspect.HEALTH], self.health_error = msg.at, msg.error
                if msg.error is None or msg.gpus:
                    self.health = {h.index: h for h in msg.gpus if h.index >= 0}
                return frozenset({Aspect.HEALTH})
            case RailsSample():
                self.at[Aspect.RAILS], self.rails_error = msg.at, msg.error
                if msg.readings:
                    self.rails.feed(msg.readings, msg.at)
                return frozenset({Aspect.RAILS})
            case KernelEvents():
                return self._kernel(msg)
        return NOTHING

    def _apps(self, msg: AppsSample) -> frozenset[Aspect]:
        self.at[Aspect.APPS], self.apps_error = msg.at, msg.error
        if msg.error is not None:  # the query failed: the last list stays
            return frozenset({Aspect.APPS})
        self.apps, self.apps_seen = msg.apps, True
        return frozenset({Aspect.APPS, *self._derive_memory()})

    def _host_mem(self, msg: HostMemSample) -> frozenset[Aspect]:
        self.at[Aspect.HOSTMEM] = msg.at
        self.host_mem_error = msg.error
        if msg.memory is None:  # the reading failed: the last values stay
            return frozenset({Aspect.HOSTMEM})
        self.host_mem = msg.memory
        unified = any(m.unified for m in self.memory.values())
        return frozenset({Aspect.HOSTMEM, *(self._derive_memory() if unified else ())})

    def _container(self, msg: ContainerUpdate) -> frozenset[Aspect]:
        was_up = self.container is not None and self.container.state in CONTAINER_UP_STATES
        self.progress.down_at = (msg.at if was_up else self.progress.down_at) \
            if msg.info.state not in CONTAINER_UP_STATES else None  # seen to go down (a peer's death)
        self.container, self.at[Aspect.CONTAINER] = msg.info, msg.at
        if msg.info.state == ContainerState.RUNNING and msg.info.started_at != self._run:  # a new run
            if self._run is not None:  # a rank restarted: a new NCCL job, whose reads start over
                self.ras.new_job(self.name)
            self._run, self._run_from, self._run_last = msg.info.started_at, msg.at, None
        return frozenset({Aspect.CONTAINER, *self._derive_serving(), *self._derive_engine()})

    def _derive_engine(self) -> frozenset[Aspect]:
        """The engine's one state, from its log and its container: an engine whose container does not
        run (created and never started, exited) is stopped, whatever its last line said; a failure
        stays a failure. ``status``, ``watch``, the pane and the fleet row all read this."""
        e, c = self.engine_read, self.container
        if e is not None and c is not None and c.state not in CONTAINER_UP_STATES and e.phase not in ENDED_PHASES:
            e = replace(e, phase=EnginePhase.STOPPED, load_pct=None)
        elif e is not None and e.phase == EnginePhase.FAILED and self._serves_since_failure():
            e = replace(e, phase=EnginePhase.READY, fatal=None,
                        notes=[*e.notes, f"serving again after: {(e.fatal or 'a failure')[:200]}"])
        changed = e is not self.engine and (e is None or self.engine is None or e.phase != self.engine.phase)
        self.engine = e
        return frozenset({Aspect.ENGINE}) if changed else NOTHING

    def _serves_since_failure(self) -> bool:
        """The head's API answered healthy from its running container after the failure was read: the
        engine serves, whatever line looked fatal (a failure the engine survived, or one resolved under
        the same run). The log's word alone would keep "failed" beside "API healthy"."""
        snap, c, failed_at = self.serving, self.container, self.at.get(Aspect.ENGINE)
        return (self.head and snap is not None and snap.status == "ok" and snap.updated_at is not None
                and failed_at is not None and snap.updated_at > failed_at
                and c is not None and c.state == ContainerState.RUNNING)

    def _connection(self, msg: ConnectionState) -> frozenset[Aspect]:
        c = self.conn
        before = (c.state, c.detail, c.host_key, c.last_sample_at, c.next_try_at, c.late)
        c.state, c.detail, c.host_key, c.next_try_at = msg.state, msg.detail, msg.host_key, msg.next_try_at
        late = getattr(msg, "late", None)
        c.late = Aspect(late) if late and msg.state == ConnState.STALE else None
        if msg.last_sample_at is not None:
            c.last_sample_at = msg.last_sample_at
        after = (c.state, c.detail, c.host_key, c.last_sample_at, c.next_try_at, c.late)
        return frozenset({Aspect.CONN}) if after != before else NOTHING

    def _gpu_sample(self, msg: GpuSample) -> frozenset[Aspect]:
        self.at[Aspect.GPUS] = msg.at
        self.gpu_error = msg.error
        if msg.error is not None and not msg.gpus:  # nvidia-smi failed as a whole: keep the last readings
            return frozenset({Aspect.GPUS})
        if [g.index for g in self.gpus] != [g.index for g in msg.gpus]:  # other GPUs: their history starts over
            self.traces = {}
        self.gpus, self.gpus_at = msg.gpus, msg.at
        return frozenset({Aspect.GPUS, *self._derive_memory()})

    def _derive_memory(self) -> frozenset[Aspect]:
        """The memory view of every GPU held, and its history entry for the readings' time."""
        if not self.gpus:
            self.memory = {}
            return NOTHING
        memory: dict[int, GpuMemory] = {}
        for g in self.gpus:
            if not g.name:  # nvidia-smi could not read this GPU at all
                memory[g.index] = GpuMemory(None, None)
                continue
            if g.memory_used_mib is None:  # GB10: unified memory, nvidia-smi says [N/A]
                total = self.host_mem.total_mib if self.host_mem else None
                mem = GpuMemory(float(self.process_memory_mib(g.uuid)), total, unified=True)
            else:
                mem = GpuMemory(g.memory_used_mib, g.memory_total_mib)
            memory[g.index] = mem
            if mem.used_mib is not None and self.gpus_at is not None:
                self.traces.setdefault(g.index, GpuTrace()).record(self.gpus_at, mem.used_mib, g.util_pct)
        self.memory = memory
        return frozenset({Aspect.MEMORY})

    def _derive_serving(self) -> frozenset[Aspect]:
        """The API's figures as the panel may show them. Only a running container serves: while the
        head's container is stopped, exited or gone, whatever answers on the port is not its engine,
        so the figures are those of its last poll while it ran (their age grows); a new container
        starts with none until it answers itself. A healthy answer is shown as it is (something
        does serve there, whatever the container says)."""
        snap = self.serving
        if snap is None:
            return NOTHING
        c = self.container
        fresh = snap.updated_at is not None and (self._run_from is None or snap.updated_at >= self._run_from)
        if c is None or c.state == ContainerState.RUNNING or snap.status == "ok":  # (healthy: something does serve there)
            if fresh and c is not None and c.state == ContainerState.RUNNING:
                self._run_last = snap
            shown = snap if fresh or c is None else _cleared(snap)
        else:
            shown = self._run_last or _cleared(snap)
        if shown is self.serving_shown:
            return NOTHING
        self.serving_shown = shown
        return frozenset({Aspect.SERVING})

    @property
    def serving_off(self) -> str | None:
        """Why the API's figures are not live: the head's container is not running ("container
        exited (0)") and the API does not answer healthy; None while it runs, is not known, or
        something answers healthy on the port (then what it says is shown as it is)."""
        c, snap = self.container, self.serving
        if not self.head or c is None or c.state == ContainerState.RUNNING or (snap is not None and snap.status == "ok"):
            return None
        code = f" ({c.exit_code})" if c.state == ContainerState.EXITED and c.exit_code is not None else ""
        return f"container {c.state}{code}"

    # ------------------------------------------------------------------ derived

    def process_memory_mib(self, uuid: str) -> int:
        """What the processes on this GPU hold (0: none, or none read yet)."""
        return sum(a.used_memory_mib for a in self.apps if a.gpu_uuid == uuid and a.used_memory_mib)

    @property
    def unified_gpus(self) -> list[GpuReading]:
        """The GPUs read whose memory nvidia-smi does not report (GB10)."""
        return [g for g in self.gpus if g.name and g.memory_used_mib is None]

    def age(self, aspect: Aspect, now: float) -> float | None:
        """Seconds since ``aspect``'s source last reported (None: never)."""
        at = self.at.get(aspect)
        return None if at is None else max(0.0, now - at)

    def sample_age(self, now: float) -> float | None:
        """Age of the last GPU sample, readings or an error (``watch``'s ``sample_age_s``)."""
        return self.age(Aspect.GPUS, now)

    @property
    def seen_at(self) -> float | None:
        """The newest sample time known: the connection's (said once, when a station turns live,
        stale or down) or the GPU readings' (they keep coming while live)."""
        return max((t for t in (self.conn.last_sample_at, self.gpus_at) if t is not None), default=None)

    @property
    def values_stale(self) -> bool:
        """Every value is on screen from an earlier sample: the station is not live as a whole
        (silent, down), not just one source late (dimmed)."""
        return not self.conn.live and self.conn.last_sample_at is not None and self.conn.late is None

    def late(self, aspect: Aspect, now: float) -> bool:
        """A periodic source has not reported for longer than it may (``late_after``)."""
        limit, at = self.late_after.get(aspect), self.at.get(aspect)
        return limit is not None and at is not None and now - at > limit

    def stale(self, aspect: Aspect, now: float) -> bool:
        """This source's values on screen are old (dimmed, with their age): the whole station is
        not live, or this source is late, whatever the others do. The GPU readings (and the memory
        drawn from them) are old too while nvidia-smi answers only with an error."""
        if self.values_stale:
            return True
        if aspect in (Aspect.GPUS, Aspect.MEMORY):
            if self.conn.late == Aspect.GPUS or (self.gpu_error is not None and self.gpus_at is not None):
                return True
            aspect = Aspect.GPUS
        return self.late(aspect, now)

    def stale_sources(self, now: float) -> list[Aspect]:
        """The sources whose values are old now (``watch --json``'s ``stale_sources``)."""
        return [a for a in SOURCES if self.at.get(a) is not None and self.stale(a, now)]

    def value_age(self, aspect: Aspect, now: float) -> float | None:
        """How old the values shown for ``aspect`` are: the GPU readings' own time (an error answer
        brings none), the event-driven sources' last word from a station that is no longer heard
        (the connection's last sample), else the source's last report."""
        if aspect in (Aspect.GPUS, Aspect.MEMORY):
            return None if self.gpus_at is None else max(0.0, now - self.gpus_at)
        if aspect in (Aspect.CONTAINER, Aspect.ENGINE, Aspect.LOGS) and self.values_stale:
            seen = self.conn.last_sample_at
            return None if seen is None else max(0.0, now - seen)
        return self.age(aspect, now)

    def ages(self, now: float) -> dict[str, float | None]:
        """Every source's age in seconds (None: it never reported), ``watch``/``status`` ``ages_s``."""
        return {str(a): None if (v := self.age(a, now)) is None else round(v, 3) for a in SOURCES}

    def why(self, now: float) -> str | None:
        """The reason the station is not live, in one line (None while live): a late source says
        which and how late ("GPU samples stale 12 s: nvidia-smi not answering; SSH fine")."""
        c = self.conn
        if c.state == ConnState.STALE and c.late is not None:
            late = self.age(c.late, now)
            return f"{SOURCE_WORDS[c.late]} stale {age_words(late)}" + (f": {c.detail}" if c.detail else "")
        return (c.detail or None) if c.not_live else None

    @property
    def engine_shown(self) -> bool:
        """The engine's phase is worth a line: its container runs (or it failed: the why stays)."""
        e, c = self.engine, self.container
        return e is not None and (c is None or c.state == ContainerState.RUNNING or e.phase == EnginePhase.FAILED)

    @property
    def engine_failed(self) -> bool:
        return self.engine is not None and self.engine.phase == EnginePhase.FAILED

    @property
    def engine_label(self) -> str:
        """The engine's phase in words ("" when unknown); a ready worker serves through the head."""
        e = self.engine
        if e is None:
            return ""
        return "serving (worker)" if not self.head and e.phase == EnginePhase.READY else e.label

    def serving_gpus(self, serving_gpu: str | None) -> list[GpuReading]:
        """The GPUs the model runs on: those named ``serving_gpu`` (the profile's GPU), every GPU
        when none is (or when no name is given)."""
        named = [g for g in self.gpus if serving_gpu is not None and g.name == serving_gpu]
        return named or list(self.gpus)

    # ------------------------------------------------------------------ GPU and fabric health

    def _kernel(self, msg: KernelEvents) -> frozenset[Aspect]:
        """Each kernel event once: the health channel's follower reads an hour back when it (re)starts,
        so the same line can come twice. ``kernel_new`` keeps this message's first reads (the live
        diagnosis takes those of the run, ``run_kernel_new``); the Xids among them join ``xids``."""
        self.at[Aspect.KERNEL], self.kernel_unreadable = msg.at, msg.unreadable
        seen = self._kernel_seen
        self.kernel_new = [e for e in msg.events if (e.time, e.text) not in seen]
        for e in self.kernel_new:
            seen[(e.time, e.text)] = None
        while len(seen) > KERNEL_SEEN_MAX:
            del seen[next(iter(seen))]
        new = [xid_event(e, self.health, msg.at) for e in self.kernel_new if e.kind == "xid" and e.xid is not None]
        self.xids = (self.xids + new)[-XIDS_KEPT:]
        return frozenset({Aspect.KERNEL}) if new or msg.unreadable else NOTHING

    def run_started(self) -> float | None:
        """The epoch the container's run started (docker's StartedAt), None with no run: no container,
        or one never started."""
        c = self.container
        if c is None or c.state == ContainerState.ABSENT:
            return None
        return container_run_started(c.started_at)

    def run_kernel_new(self) -> list[KernelEvent]:
        """The kernel events first read with the last message that belong to the container's run:
        what the live diagnosis is fed (none while no run is known: findings belong to a run)."""
        t0 = self.run_started()
        return [] if t0 is None else [e for e in self.kernel_new if _of_run(e.time, t0)]

    def gpu_flags(self, index: int) -> list[HealthFlag]:
        """The health flags of one GPU (empty: nothing to say, or not read)."""
        h = self.health.get(index)
        return health_flags(h) if h is not None else []

    def run_xids(self) -> list[XidEvent]:
        """The Xids since the container started (all of them when it never did)."""
        t0 = self.run_started()  # once, not once an Xid: the pane asks on every redraw
        return [x for x in self.xids if _of_run(x.at, t0)]

    def health_level(self) -> str | None:
        """The worst of the GPU flags, the Xids of this run and the rails: ``error`` | ``warn`` | None."""
        levels = {worst_flag(self.gpu_flags(i)) for i in self.health}
        levels |= {("error" if x.info_severity in ("fatal", "error") else "warn") for x in self.run_xids()}
        levels |= {v.level for v in self.rails.views.values()}
        return "error" if "error" in levels else "warn" if "warn" in levels else None

    # ------------------------------------------------------------------ a GPU in error

    @property
    def gpus_in_error(self) -> list[GpuReading]:
        """The GPUs nvidia-smi printed an error line for in place of a row (a GPU lost, off the bus,
        requiring a reset), from the latest sample; one source for the pane, the fleet and the diagnosis."""
        return [g for g in self.gpus if g.error is not None]

    def gpu_error_words(self) -> str:
        """``GPU 1: Unable to determine the device handle ...`` (each GPU in error), or ''."""
        return "; ".join(f"GPU {g.index}: {g.error}" for g in self.gpus_in_error)


def _of_run(at: float | None, t0: float | None) -> bool:
    """The one rule for "this run's" kernel events (``t0``: the run's start, ``run_started``): at or
    after it, with a second of slack for the two clocks; an undated event, or any event while no run
    is known, counts."""
    return t0 is None or at is None or at >= t0 - 1.0


def _cleared(snap: ServingSnapshot) -> ServingSnapshot:
    """The snapshot without figures (no poll of this container's engine yet): every figure unknown."""
    keep = {"url", "model", "version", "engine", "healthy", "status", "error", "note", "polled_at"}
    return replace(snap, **{f.name: _unknown(f) for f in fields(snap) if f.name not in keep})


def _unknown(f: Field) -> object:
    """A figure's "nothing read": its own default (an empty set of invalid names), else None."""
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


class Stations(Mapping[str, StationState]):
    """Every station's state by name; ``apply`` routes a station message to its station."""

    def __init__(self, states: Iterable[StationState], head: str | None = None) -> None:
        self._states = {s.name: s for s in states}
        self.head_name = head if head is not None else next(
            (s.name for s in sorted(self._states.values(), key=lambda s: s.rank)), None)
        self.ras = RasWatch(RankHome(s.name, s.rank) for s in self._states.values())  # one NCCL job
        # the progress judge's last tick (console/station/progress.py ProgressJudge), read by every reader
        self.judged: Judgement = NOT_JUDGED
        for s in self._states.values():
            s.ras = self.ras

    @classmethod
    def for_config(cls, config: Config, gpu_interval_s: float | None = None) -> Stations:
        """``gpu_interval_s``: the GPU sampling interval (default: the configured refresh)."""
        interval = config.ui.refresh_ms / 1000 if gpu_interval_s is None else gpu_interval_s
        fleet = cls((StationState.for_station(st, interval, config.ui.log_lines) for st in config.stations),
                    head=config.head.name)
        fleet.ras.homes = tuple(RankHome(st.name, st.rank, tuple(a for a in (st.rail_ip, st.host) if a))
                                for st in config.stations)  # RAS names a rank by its node's address
        for st in fleet.values():  # each rail against the profile's link
            st.rails.expected_mbps, st.rails.expected_mtu = config.profile.link.speed_mbps, config.profile.link.mtu
        return fleet

    def __getitem__(self, name: str) -> StationState:
        return self._states[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def state_of(self, msg: object) -> StationState | None:
        """The station a message is about: its ``station``; the API's poll is the head's."""
        if isinstance(msg, ServingUpdate):
            return self.head
        return self._states.get(getattr(msg, "station", None))  # type: ignore[arg-type]

    def apply(self, msg: object) -> frozenset[Aspect]:
        """Apply a message to its station (nothing for a station not configured)."""
        state = self.state_of(msg)
        return state.apply(msg) if state is not None else NOTHING

    @property
    def head(self) -> StationState | None:
        """The API host (the lowest rank)."""
        return self._states.get(self.head_name) if self.head_name is not None else None

    @property
    def head_engine(self) -> EngineProgress | None:
        """The head's engine phase: the API's fate (serving panel, chat, bench)."""
        return self.head.engine if self.head is not None else None

    def by_rank(self) -> list[StationState]:
        return sorted(self._states.values(), key=lambda s: s.rank)

    def unreadable_logs(self) -> dict[str, ConnState]:
        """Stations whose container log cannot be read now, and why (their connection state)."""
        return {name: s.conn.state for name, s in self._states.items() if not s.conn.logs_readable}
