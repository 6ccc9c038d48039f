"""The console's shared words: one home for every state vocabulary, its groups and its plain text.

Each vocabulary is a ``StrEnum``: a member *is* its string (``EnginePhase.READY == "ready"``), so
JSON contracts, config values and log-derived strings keep their exact spelling, while code that
compares or groups states names the member and a typo is an ``AttributeError`` instead of a silent
miss. The groups (which phases mean "still loading", which connection states mean "down") are
defined here once; screens add colours, never meanings. This module imports nothing of the
console's, so every layer can use it.
"""

from __future__ import annotations

from enum import StrEnum


class ConnState(StrEnum):
    """What the console knows about a station's connection (``watch --json`` ``state``).

    ``live`` only while samples arrive; ``stale`` when they stopped (values kept, with their age);
    ``unreachable`` once declared dead or refused; the host-key states wait for the operator;
    ``error`` is an unexpected failure of the console's own service for that station."""

    CONNECTING = "connecting"
    LIVE = "live"
    STALE = "stale"
    UNREACHABLE = "unreachable"
    HOST_KEY_UNKNOWN = "host-key-unknown"
    HOST_KEY_CHANGED = "host-key-changed"
    ERROR = "error"


#: The host-key states: the station waits for the operator's decision (T).
HOST_KEY_STATES = frozenset({ConnState.HOST_KEY_UNKNOWN, ConnState.HOST_KEY_CHANGED})
#: Down: no connection at all (the pane is marked unreachable, its values dimmed).
DOWN_STATES = frozenset({ConnState.UNREACHABLE, ConnState.ERROR, *HOST_KEY_STATES})
#: Not live and worth an error line (``watch``: the state's detail is the error).
NOT_LIVE_STATES = frozenset({ConnState.STALE, *DOWN_STATES})
#: States in which the station's container log is being read (the diagnosis sees it).
LOG_READ_STATES = frozenset({ConnState.CONNECTING, ConnState.LIVE, ConnState.STALE})


class EnginePhase(StrEnum):
    """The engine's start-up phase, read from its container log (``status``/``watch`` ``phase``)."""

    STARTING = "starting"
    CONNECTING = "connecting"  # NCCL lines seen: the ranks are finding each other
    LOADING = "loading"
    LOADED = "loaded"
    KV_CACHE = "kv-cache"
    GRAPHS = "graphs"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


#: Phases in which the engine is coming up by itself (the API refusing connections is expected).
LOADING_PHASES = frozenset({EnginePhase.STARTING, EnginePhase.CONNECTING, EnginePhase.LOADING,
                            EnginePhase.LOADED, EnginePhase.KV_CACHE, EnginePhase.GRAPHS})
#: Phases after which the engine will not come up without someone doing something.
ENDED_PHASES = frozenset({EnginePhase.FAILED, EnginePhase.STOPPED})

class ContainerState(StrEnum):
    """A container's state as ``docker inspect`` says it (``.State.Status``), plus two of ours:
    ``absent`` (no such container) and ``unknown`` (a word this console does not know, e.g. from a
    newer docker: shown as docker said nothing we understand, never a crash, never a guess)."""

    CREATED = "created"
    RUNNING = "running"
    PAUSED = "paused"
    RESTARTING = "restarting"
    REMOVING = "removing"
    EXITED = "exited"
    DEAD = "dead"
    ABSENT = "absent"
    UNKNOWN = "unknown"

    @classmethod
    def parse(cls, word: str | None) -> ContainerState:
        """docker's word (any case) -> its member; anything else -> ``UNKNOWN``."""
        try:
            return cls(str(word or "").strip().lower())
        except ValueError:
            return cls.UNKNOWN


#: Docker container states in which an engine can be coming up or serving; in any other (created and
#: never started, exited, dead, absent) the engine is stopped, whatever its last log line said.
CONTAINER_UP_STATES = frozenset({ContainerState.RUNNING, ContainerState.RESTARTING})
#: The states of a container whose process ended (its exit code is the engine's).
CONTAINER_ENDED_STATES = frozenset({ContainerState.EXITED, ContainerState.DEAD})

# (the start-up phases in the operator's words: console.catalogue.milestones.phase_text)


class NcclTransport(StrEnum):
    """Which transport NCCL chose (``launch --json`` ``transport``): IB/RoCE with GPUDirect RDMA,
    IB/RoCE without it, the TCP socket fallback, or no evidence yet."""

    GDRDMA = "gdrdma"
    RDMA = "rdma"
    SOCKET = "socket"
    UNKNOWN = "unknown"


#: Worse wins when stations disagree: the pair is only as good as its worst link.
TRANSPORT_RANK: dict[NcclTransport, int] = {NcclTransport.UNKNOWN: 0, NcclTransport.GDRDMA: 1,
                                             NcclTransport.RDMA: 2, NcclTransport.SOCKET: 3}
#: The transport in the operator's words (the launch verdict, status, watch).
TRANSPORT_TEXT: dict[NcclTransport, str] = {
    NcclTransport.GDRDMA: "GPUDirect RDMA", NcclTransport.RDMA: "RDMA (no GPUDirect)",
    NcclTransport.SOCKET: "TCP sockets (fallback)", NcclTransport.UNKNOWN: "not seen"}
#: The same, short enough for a pane's status line.
TRANSPORT_SHORT: dict[NcclTransport, str] = {
    NcclTransport.GDRDMA: "GPUDirect RDMA", NcclTransport.RDMA: "RDMA (no GDR)",
    NcclTransport.SOCKET: "TCP socket fallback", NcclTransport.UNKNOWN: "—"}
#: The same in a table column (the fleet view's NCCL column).
TRANSPORT_TINY: dict[NcclTransport, str] = {
    NcclTransport.GDRDMA: "GPUDirect", NcclTransport.RDMA: "RDMA", NcclTransport.SOCKET: "TCP socket",
    NcclTransport.UNKNOWN: "—"}
#: The same as the launch's verdict says it (what was read, and where).
TRANSPORT_VERDICT: dict[NcclTransport, str] = {
    NcclTransport.GDRDMA: "NCCL over RDMA with GPUDirect (NET/IB .../GDRDMA)",
    NcclTransport.RDMA: "NCCL over RDMA without GPUDirect (NET/IB, no GDRDMA)",
    NcclTransport.SOCKET: "NCCL fell back to TCP sockets (NET/Socket)",
    NcclTransport.UNKNOWN: "no NCCL transport lines seen (is NCCL_DEBUG=INFO set?)"}


def worse_transport(a: NcclTransport | str, b: NcclTransport | str) -> NcclTransport:
    """Combine two stations' verdicts: the worse one."""
    a, b = NcclTransport(a), NcclTransport(b)
    return a if TRANSPORT_RANK[a] >= TRANSPORT_RANK[b] else b


class CheckStatus(StrEnum):
    """A check's or a workbench rung's outcome (``check --json``/``doctor --json`` ``status``)."""

    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"


class StepStatus(StrEnum):
    """One step of a launch, stop or restart (``launch --json`` ``steps[].status``)."""

    RUNNING = "running"
    OK = "ok"
    WARN = "warn"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


class ActionOutcome(StrEnum):
    """How a launch, stop or restart ended (``launch --json`` ``result``)."""

    OK = "ok"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Progress truth
class Progress(StrEnum):
    """Whether anything moves (``watch --json``/``status --json`` ``progress``), beside the
    connection's state: tokens or start-up lines coming (``progressing``), nothing asked of the
    engine (``idle``), a start-up phase that stopped while the GPUs stay busy (``stuck``), requests
    running and the generation-token counter frozen (``wedged``), or no way to tell (``unknown``,
    always with the reason)."""

    PROGRESSING = "progressing"
    IDLE = "idle"
    STUCK = "stuck"
    WEDGED = "wedged"
    UNKNOWN = "unknown"
    OUT_OF_STEP = "out-of-step"  # NCCL RAS: the ranks stopped at different collectives (the ones behind named)
    PEER_DOWN = "peer-down"  # this engine runs but a rank of its job is gone: the service cannot serve


#: The states that raise the dashboard's banner: something should move and nothing does.
PROGRESS_ALARMS = frozenset({Progress.STUCK, Progress.WEDGED, Progress.OUT_OF_STEP, Progress.PEER_DOWN})
#: Worst first: the service's word when its stations disagree (out of step names the cause: before
#: the death it leads to, before the frozen counter it explains).
PROGRESS_SEVERITY: dict[Progress, int] = {Progress.OUT_OF_STEP: 6, Progress.PEER_DOWN: 5, Progress.WEDGED: 4,
                                          Progress.STUCK: 3, Progress.UNKNOWN: 2, Progress.PROGRESSING: 1,
                                          Progress.IDLE: 0}


class RasState(StrEnum):
    """The continuous NCCL RAS watch (``watch --json``/``status --json`` ``ras``): collective counts
    advancing or in step (``healthy``), a spread or a busy freeze seen once (``suspect``), a spread
    frozen over two reads, every rank frozen in one collective with its GPUs busy, or a rank missing
    from the job (``stuck``), or no way to tell (``unknown``, always with the reason)."""

    HEALTHY = "healthy"
    UNKNOWN = "unknown"
    SUSPECT = "suspect"
    STUCK = "stuck"
