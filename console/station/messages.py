"""Small messages the per-station services post to the UI (toolook-style: the service owns the
I/O, the widgets only render). Samples that supersede older ones define ``can_replace`` so a
slow screen never works through a queue of stale values."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from textual.message import Message

from console.catalogue.classify import ClassifiedBatch
from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading
from console.station.log_buffer import LogMarker as LogMarker  # its home is the log buffer
from console.vocabulary import ConnState

if TYPE_CHECKING:
    from console.serving.metrics import ServingSnapshot


class StationMessage(Message):
    def __init__(self, station: str) -> None:
        super().__init__()
        self.station = station


CONN_STATES: tuple[ConnState, ...] = tuple(ConnState)


class ConnectionState(StationMessage):
    """A station's connection state (``detail``: one line). ``last_sample_at``: wall time of the
    last sample (the age of what is on screen); ``next_try_at``: when the next attempt is due;
    ``host_key``: the HostKeyError for the host-key states (fingerprints and key types); ``late``:
    with ``stale``, the one source that is late while the others answer ("gpus"; None: all of them)."""

    def __init__(self, station: str, state: ConnState, detail: str = "", *, last_sample_at: float | None = None,
                 next_try_at: float | None = None, host_key: object | None = None, late: str | None = None) -> None:
        super().__init__(station)
        self.state, self.detail, self.late = state, detail, late
        self.last_sample_at, self.next_try_at, self.host_key = last_sample_at, next_try_at, host_key

    @property
    def fingerprint(self) -> str | None:
        return getattr(self.host_key, "fingerprint", None)

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ConnectionState) and message.station == self.station


class GpuSample(StationMessage):
    """One round of readings (a broken GPU is a reading in error). ``error``: nvidia-smi itself
    failed (driver, NVML) and no GPU could be read; ``at``: wall time."""

    def __init__(self, station: str, gpus: list[GpuReading], at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.gpus, self.at, self.error = gpus, at, error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuSample) and message.station == self.station


class AppsSample(StationMessage):
    """Per-process GPU memory (the only GPU memory figure on unified-memory GB10). ``error``: the
    query failed (the last list stays)."""

    def __init__(self, station: str, apps: list[ComputeApp], at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.apps, self.at, self.error = apps, at, error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AppsSample) and message.station == self.station


class HostMemSample(StationMessage):
    """Host memory; ``memory`` None with ``error``: the reading failed (the last values stay)."""

    def __init__(self, station: str, memory: HostMemory | None, at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.memory, self.at, self.error = memory, at, error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HostMemSample) and message.station == self.station


class ContainerUpdate(StationMessage):
    """The container as ``docker inspect`` describes it; ``at``: wall time (default: now)."""

    def __init__(self, station: str, info: ContainerInfo, at: float | None = None) -> None:
        super().__init__(station)
        self.info, self.at = info, time.time() if at is None else at


class EngineUpdate(StationMessage):
    """The engine's start-up progress read from its log; ``at``: wall time (default: now)."""

    def __init__(self, station: str, progress: EngineProgress, at: float | None = None) -> None:
        super().__init__(station)
        self.progress, self.at = progress, time.time() if at is None else at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineUpdate) and message.station == self.station


class LogBatch(StationMessage):
    """Lines gathered over ~50 ms: one message per batch, never one per line. A line may be a
    ``LogMarker``. ``at``: wall time of the batch (default: now). ``stamps``: each line's docker
    timestamp (RFC3339, as docker printed it; None for a marker), for a reader that needs the
    line's own time (a launch's timeline and its "this run only" cut); empty when not known."""

    def __init__(self, station: str, lines: list[str], classified: ClassifiedBatch | None = None,
                 at: float | None = None, stamps: list[str | None] | None = None) -> None:
        super().__init__(station)
        self.lines, self.at = lines, time.time() if at is None else at
        self.classified = classified  # the monitor's one scan of these lines (the diagnosis reads it)
        self.stamps: list[str | None] = stamps if stamps is not None else []


class ServingUpdate(Message):
    """A new snapshot of the served API (the head station's; ``console/serving/metrics.py`` polls
    it); a newer one supersedes it in the queue. ``at``: wall time (default: now)."""

    def __init__(self, snapshot: ServingSnapshot, at: float | None = None) -> None:
        super().__init__()
        self.snapshot, self.at = snapshot, time.time() if at is None else at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ServingUpdate)


# GPU and fabric health
class GpuHealthSample(StationMessage):
    """One round of the health stream (console/probes/gpu_health.py); ``error``: the query failed as
    a whole (the last readings stay, dimmed by their age)."""

    def __init__(self, station: str, gpus: list, at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.gpus, self.at, self.error = gpus, at, error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuHealthSample) and message.station == self.station


class RailsSample(StationMessage):
    """One round of the rails loop: ``readings`` by netdev (console/probes/rails.py). Never replaced
    in the queue: each round counts for the flaps and rates."""

    def __init__(self, station: str, readings: dict, at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.readings, self.at, self.error = readings, at, error


class KernelEvents(StationMessage):
    """Kernel log events (console/probes/kernel_log.py: Xid, link flaps, AER) as the follower read
    them; ``unreadable``: why the kernel log cannot be read (permissions), else None."""

    def __init__(self, station: str, events: list, at: float, unreadable: str | None = None) -> None:
        super().__init__(station)
        self.events, self.at, self.unreadable = events, at, unreadable


class RasSample(StationMessage):
    """One read of NCCL's RAS report on ``station`` (the continuous watch, console/station/ras_watch.py):
    ``text`` what the one-shot ``ncclras`` printed (stdout and stderr), ``at`` when it was asked (wall
    time); ``error``: the read itself failed (no channel, a timeout), ``text`` then empty. Never
    replaced in the queue: the watch compares each read with the one before."""

    def __init__(self, station: str, text: str, at: float, error: str | None = None) -> None:
        super().__init__(station)
        self.text, self.at, self.error = text, at, error
