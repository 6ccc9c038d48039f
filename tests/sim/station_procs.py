"""The simulated stations run real processes: what runs on a station, found by its environment (the
sim's sshd gives each command line the station's DGX_SIM_ROOT and DGX_SIM_STATION), and the hung-tool
switch. Shared by the sim and UI tests and bench/source_faults_sim.py."""

from __future__ import annotations

import time

import psutil


def station_procs(world, station: str, tool: str = "nvidia-smi") -> list[int]:
    """Pids of ``tool`` (a shim: ``python -m console.sim.shim TOOL``) running on the simulated station."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if "console.sim.shim" not in cmd or tool not in cmd:
            continue
        try:
            env = p.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("DGX_SIM_ROOT") == str(world.root) and env.get("DGX_SIM_STATION") == station:
            found.append(p.info["pid"])
    return found


def hung_procs(world, station: str) -> list[int]:
    """The station's nvidia-smi processes that are inside the hang (hangup already ignored)."""
    marked = {int(f.name.rsplit(".", 1)[1]) for f in world.station_dir(station).glob("smi-hung.*")}
    return [pid for pid in station_procs(world, station) if pid in marked]


def set_hang(world, station: str, on: bool) -> None:
    with world.edit(station) as st:
        st["smi_hang"] = on


def events_watching(world, station: str) -> bool:
    """B's ``docker events`` has been running long enough to have looked at least once (a run that
    starts and ends after this is between two of its looks)."""
    for p in psutil.process_iter(["cmdline", "create_time"]):
        cmd = p.info["cmdline"] or []
        if "console.sim.shim" in cmd and "docker" in cmd and "events" in cmd:
            try:
                env = p.environ()
            except (psutil.Error, OSError):
                continue
            if (env.get("DGX_SIM_ROOT"), env.get("DGX_SIM_STATION")) == (str(world.root), station):
                return time.time() - p.info["create_time"] > 3.0
    return False
