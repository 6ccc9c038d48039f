"""Small messages the per-station services post to the UI (toolook-style: the service owns the
I/O, the widgets only render). Samples that supersede older ones define ``can_replace`` so a
slow screen never works through a queue of stale values."""

from __future__ import annotations

from textual.message import Message

from console.probes.docker import ContainerInfo
from console.probes.engine_log import EngineProgress
from console.probes.meminfo import HostMemory
from console.probes.nvidia_smi import ComputeApp, GpuReading


class StationMessage(Message):
    def __init__(self, station: str) -> None:
        super().__init__()
        self.station = station


class ConnectionState(StationMessage):
    """connecting | connected | unreachable | hostkey (detail: one line; fingerprint for hostkey)."""

    def __init__(self, station: str, state: str, detail: str = "", fingerprint: str | None = None) -> None:
        super().__init__(station)
        self.state, self.detail, self.fingerprint = state, detail, fingerprint


class GpuSample(StationMessage):
    def __init__(self, station: str, gpus: list[GpuReading], at: float) -> None:
        super().__init__(station)
        self.gpus, self.at = gpus, at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuSample) and message.station == self.station


class AppsSample(StationMessage):
    """Per-process GPU memory (the only GPU memory figure on unified-memory GB10)."""

    def __init__(self, station: str, apps: list[ComputeApp], at: float) -> None:
        super().__init__(station)
        self.apps, self.at = apps, at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AppsSample) and message.station == self.station


class HostMemSample(StationMessage):
    def __init__(self, station: str, memory: HostMemory, at: float) -> None:
        super().__init__(station)
        self.memory, self.at = memory, at

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HostMemSample) and message.station == self.station


class ContainerUpdate(StationMessage):
    def __init__(self, station: str, info: ContainerInfo) -> None:
        super().__init__(station)
        self.info = info


class EngineUpdate(StationMessage):
    def __init__(self, station: str, progress: EngineProgress) -> None:
        super().__init__(station)
        self.progress = progress

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, EngineUpdate) and message.station == self.station


class LogBatch(StationMessage):
    """Lines gathered over ~50 ms: one message per batch, never one per line."""

    def __init__(self, station: str, lines: list[str]) -> None:
        super().__init__(station)
        self.lines = lines
