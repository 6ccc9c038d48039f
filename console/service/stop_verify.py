"""Did a station come back clean after a stop? Pure judgement over what was read.

"Stopped" is a claim to prove, not the exit code of ``docker stop``: the container is not running,
nothing answers on the head's API port, no compute process is left on the serving GPU, and memory
is back within a margin of what it was before the launch (GB10's unified memory: host memory
available, since a leak there shows as 0 MB in nvidia-smi). Each miss is a finding with the fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from console.service.fit_inputs import MemoryReading
from console.vocabulary import ContainerState

PortState = Literal["closed", "open", "unknown"]
GPU_MARGIN_MIB = 2048  # discrete GPU: idle usage after a stop (driver, a display) may differ this much
GPU_MARGIN_FRAC = 0.02
HOST_MARGIN_MIB = 4096  # unified memory: page cache and services move host memory around
HOST_MARGIN_FRAC = 0.05
IDLE_HOST_USED_FRAC = 0.15  # no baseline: an idle station uses less than this of its memory

FIXES = {
    "stop-container-running": ("docker kill {container}; if it still runs, a process is stuck in the GPU driver: "
                               "restart docker (sudo systemctl restart docker) or reboot the station"),
    "stop-port-open": ("find what still listens: sudo ss -ltnp 'sport = :{port}' on the head; stop it (another "
                       "container, or an engine started outside docker)"),
    "stop-compute-process": "sudo kill {pids} on the station; if it will not die (D state), reboot",
    "stop-memory-leak": ("drop the page cache (sync; echo 3 | sudo tee /proc/sys/vm/drop_caches), then restart "
                         "docker (sudo systemctl restart docker); reboot if the memory still does not come back"),
    "stop-unverified": "check the station by hand (nvidia-smi; free -g)",
}


@dataclass
class StopVerdict:
    station: str
    container: ContainerState  # the container's state after the stop
    port: PortState | None = None  # the head's API port (None on workers)
    processes: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        if self.clean:
            return "clean: " + "; ".join(self.notes) if self.notes else "clean"
        return "; ".join(f["cause"] for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"clean": self.clean, "container": self.container, "port": self.port,
                "compute_processes": self.processes, "memory": self.memory, "findings": self.findings,
                "notes": self.notes, "seconds": round(self.seconds, 2)}


def _finding(fid: str, station: str, cause: str, evidence: list[str], **fmt: Any) -> dict[str, Any]:
    return {"id": fid, "severity": "error", "station": station, "cause": cause,
            "fix": FIXES[fid].format(**fmt), "evidence": evidence}


def judge(station: str, container_name: str, container_state: ContainerState, reading: MemoryReading | None,
          baseline: dict[str, Any] | None, unified: bool, port: PortState | None = None,
          api: str = "", seconds: float = 0.0) -> StopVerdict:
    v = StopVerdict(station, container_state, port, seconds=seconds)
    if container_state == ContainerState.RUNNING:
        v.findings.append(_finding("stop-container-running", station,
                                   f"{station}: {container_name} is still running after docker stop",
                                   [f"docker inspect {container_name}: running"], container=container_name))
    if port == "open":
        v.findings.append(_finding("stop-port-open", station, f"{station}: the API port still answers ({api})",
                                   [f"TCP connect to {api}: accepted"], port=api.rsplit(":", 1)[-1]))
    elif port == "unknown":
        v.notes.append(f"the API port ({api}) did not answer either way (filtered?)")
    if reading is None or reading.error:
        v.findings.append({**_finding("stop-unverified", station,
                                      f"{station}: memory could not be checked ({reading.error if reading else 'no reading'})",
                                      []), "severity": "warning"})
        return v
    base_pids = set((baseline or {}).get("pids") or [])
    left = [a for a in reading.apps if a.pid not in base_pids]
    v.processes = [{"pid": a.pid, "name": a.process_name, "used_mib": a.used_memory_mib} for a in left]
    if left:
        listed = ", ".join(f"pid {a.pid} {a.process_name}" + (f" {a.used_memory_mib / 1024:.1f} GiB"
                                                               if a.used_memory_mib else "") for a in left)
        v.findings.append(_finding("stop-compute-process", station,
                                   f"{station}: compute processes remain on the GPU: {listed}",
                                   [f"nvidia-smi --query-compute-apps: {listed}"],
                                   pids=" ".join(str(a.pid) for a in left)))
    kept = [a for a in reading.apps if a.pid in base_pids]
    if kept:
        v.notes.append("already there before the launch: " + ", ".join(f"pid {a.pid}" for a in kept))
    if unified:
        h = reading.host
        if h is None:
            return v
        used = h.total_mib - h.available_mib
        margin = max(HOST_MARGIN_MIB, int(HOST_MARGIN_FRAC * h.total_mib))
        b_total, b_avail = (baseline or {}).get("host_total_mib"), (baseline or {}).get("host_available_mib")
        if b_total and b_avail is not None:
            base_used, kind = b_total - b_avail, "pre-launch baseline"
            leaked, bad = used - base_used, used - base_used > margin
        else:
            base_used, kind = None, f"an idle station (under {IDLE_HOST_USED_FRAC:.0%} in use; no baseline recorded)"
            leaked = used - int(IDLE_HOST_USED_FRAC * h.total_mib)
            bad = leaked > 0
        v.memory = {"kind": "host", "used_mib": used, "baseline_used_mib": base_used, "margin_mib": margin,
                    "judged_against": kind}
        if bad:
            v.findings.append(_finding(
                "stop-memory-leak", station,
                f"{station}: {leaked / 1024:.1f} GiB of unified memory did not come back (in use {used / 1024:.1f} of "
                f"{h.total_mib / 1024:.1f} GiB vs {kind})"
                + ("; nvidia-smi shows no process holding it" if not reading.apps else ""),
                [f"/proc/meminfo: MemTotal {h.total_mib} MiB, MemAvailable {h.available_mib} MiB"]))
        return v
    now = reading.gpu_used_mib
    total = reading.gpu_total_mib or 0
    if now is None:
        return v
    margin = max(GPU_MARGIN_MIB, int(GPU_MARGIN_FRAC * total))
    b = (baseline or {}).get("gpu_used_mib")
    base, kind = (b, "pre-launch baseline") if b is not None else (0, "an idle GPU (no baseline recorded)")
    v.memory = {"kind": "gpu", "used_mib": now, "baseline_used_mib": b, "margin_mib": margin, "judged_against": kind}
    if now - base > margin:
        v.findings.append(_finding(
            "stop-memory-leak", station,
            f"{station}: {(now - base) / 1024:.1f} GiB of GPU memory did not come back (in use {now / 1024:.1f} GiB "
            f"vs {base / 1024:.1f} GiB, {kind})",
            [f"nvidia-smi memory.used: {now} MiB of {total} MiB"]))
    return v


def unverified(station: str, container_state: ContainerState, why: str) -> StopVerdict:
    """A station whose stop could not be checked (unreachable, a command failed): a warning, not clean."""
    return StopVerdict(station, container_state, findings=[{
        "id": "stop-unverified", "severity": "warning", "station": station,
        "cause": f"{station}: the stop could not be verified: {why}", "fix": FIXES["stop-unverified"],
        "evidence": []}])
