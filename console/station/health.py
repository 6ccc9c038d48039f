"""Derived GPU-health facts kept by ``StationState``: an Xid line as an event with its GPU
(the PCI bus id of the kernel line matched to the health stream's ``pci.bus_id``) and NVIDIA's
meaning, and how late the health and rails sources may be. Pure: times come from the readings."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from console.probes.gpu_health import GpuHealth, HealthFlag
from console.probes.kernel_log import KernelEvent
from console.catalogue.xid import describe as xid_describe
from console.catalogue.xid import meaning as xid_meaning
from console.catalogue.xid import severity as xid_severity


class HealthFacts(Protocol):
    """What ``health_lines`` reads of a station's state (``StationState``, which keeps these facts)."""

    health: Mapping[int, GpuHealth]

    def gpu_flags(self, index: int) -> list[HealthFlag]: ...

    def run_xids(self) -> list[XidEvent]: ...


@dataclass(frozen=True)
class XidEvent:
    """One Xid line: the code, NVIDIA's meaning, the GPU (by its PCI bus id) and when."""

    code: int
    gpu: int | None  # the GPU index (None: bus id not among the GPUs read)
    bus_id: str | None
    at: float | None  # the line's own time (None: the kernel did not date it; then when read)
    text: str

    @property
    def info_severity(self) -> str:
        return xid_severity(self.code)

    def words(self) -> str:
        gpu = f"GPU{self.gpu} " if self.gpu is not None else ""
        when = time.strftime("%H:%M:%S", time.localtime(self.at)) if self.at else "?"
        return f"{gpu}{xid_describe(self.code)} at {when}"


def _bus_key(bus: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of ``00000000:01:00.0`` / ``0000:01:00`` (the Xid line drops the function)."""
    if not bus:
        return None
    parts = bus.strip().lower().replace("pci:", "").split(":")
    try:
        if len(parts) == 3:
            return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
        if len(parts) == 2:
            return 0, int(parts[0], 16), int(parts[1].split(".")[0], 16)
    except ValueError:
        return None
    return None


def xid_event(ev: KernelEvent, health: Mapping[int, GpuHealth], read_at: float) -> XidEvent:
    key = _bus_key(ev.device)
    gpu = next((i for i, h in health.items() if key is not None and _bus_key(h.bus_id) == key), None)
    return XidEvent(int(ev.xid or 0), gpu, ev.device, ev.time if ev.time is not None else read_at, ev.text)


@dataclass(frozen=True)
class HealthLine:
    """One thing the health of a station says: ``level`` (``error`` | ``warn``) and its words."""

    level: str
    text: str
    fix: str = ""

    @property
    def icon(self) -> str:
        return "✖" if self.level == "error" else "⚠"


def health_lines(state: HealthFacts) -> list[HealthLine]:
    """What the pane's health box and the fleet row say, worst first: each GPU's flags, this run's
    Xids (NVIDIA's meaning and action) and the kernel log's unreadability. Empty: nothing to say."""
    out: list[HealthLine] = []
    for i in sorted(state.health):
        for f in state.gpu_flags(i):
            out.append(HealthLine("error" if f.level == "error" else "warn", f"GPU{i} {f.text}", f.fix))
    for x in state.run_xids()[-3:]:
        info = xid_meaning(x.code)
        level = "error" if x.info_severity in ("fatal", "error") else "warn"
        out.append(HealthLine(level, x.words(), info.action if info else ""))
    out.sort(key=lambda h: h.level != "error")
    return out
