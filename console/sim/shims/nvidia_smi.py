"""Simulated ``nvidia-smi``: CSV queries (one-shot and ``-lms`` loops), ``-L`` and compute apps.

GB10 (unified memory) prints ``[N/A]`` for every memory field, as the real tool does.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time

from console.sim.engine import container_status, engine_phase, serving_mem_gib
from console.sim.shims._gpu_health import health_values
from console.sim.timelines import LOAD_PHASE, SPIN_PHASES
from console.sim.world import held_mib

_DEFAULT_PIDS = {0: 2345, 1: 2346}


def _noise(seed: float, amp: float) -> float:
    return amp * (0.5 + 0.5 * math.sin(seed * 1.7) * math.cos(seed * 0.31))


def gpu_values(ctx, now: float) -> list[dict]:
    state = ctx.state
    phase = engine_phase(ctx.world, ctx.station, state, now)
    used_gib = serving_mem_gib(ctx.world, ctx.station, state, now)
    st = container_status(ctx.world, ctx.station, state, "glm53", now)
    busy = 0.0
    if st["state"] == "running":
        label = st["timeline"].phase_at(now - float(st["started_at"]))
        busy = {"loading weights": 22.0, "capturing CUDA graphs": 88.0, "profiling / KV cache": 60.0,
                "state / KV cache": 55.0, "connecting": 3.0}.get(label, 1.0)
        if phase == "ready":
            busy = 0.0
        if label in ("waiting on collective", "hung in all-reduce"):
            busy = 100.0  # an NCCL kernel spinning on a peer that never sends (workbench)
        if label == LOAD_PHASE:  # the wedge fault's users being served (real work, high power)
            busy = 85.0
        # 100 % util at idle power (a kernel polling), the workbench's hangs included
        spinning = label in SPIN_PHASES or label in ("waiting on collective", "hung in all-reduce")
        if spinning:
            busy = 100.0
    else:
        spinning = False
    out = []
    faults = _faults(ctx)
    for g in state["gpus"]:
        if g["serving"]:
            util = min(100.0, busy + (_noise(now + g["index"], 6.0) if busy else 0.0))
            mem = int(round(used_gib * 1024)) + g["idle_mib"] + held_mib(g)
            temp = 33 + util * 0.32 + (8 if used_gib > 1 else 0)
            power = (11.0 + util * 0.4) if g["unified"] else (96.0 + util * 6.5 + used_gib * 0.3)
            if spinning:  # a kernel polling draws what an idle GPU does (GB10: 18-27 W, hangs.md)
                power = (13.0 if g["unified"] else 110.0) + _noise(now + g["index"], 4.0)
        else:
            util, mem, temp, power = 1.0, g["idle_mib"], 31.0, 22.5
        out.append({
            "index": str(g["index"]),
            "uuid": g["uuid"],
            "name": g["name"],
            "memory.used": "[N/A]" if g["unified"] else str(mem),
            "memory.total": "[N/A]" if g["unified"] else str(g["total_mib"]),
            "memory.free": "[N/A]" if g["unified"] else str(g["total_mib"] - mem),
            "utilization.gpu": str(int(util)),
            "utilization.memory": "0" if g["unified"] or busy >= 100.0 else str(int(util * 0.6)),
            "temperature.gpu": str(int(temp)),
            "power.draw": f"{power:.2f}",
            "pci.bus_id": f"0000000{g['index']}:01:00.0",
            "compute_cap": "12.1" if g["unified"] else ("10.3" if "GB300" in g["name"] else "12.0"),
            "driver_version": "580.95.05",
            **health_values(g, util, power, faults),
            "_used_mib": mem,
            "_engine_mib": int(round(used_gib * 1024)) if g["serving"] else 0,
        })
    return out


def _lost_index(ctx) -> int:
    """The GPU that fell off the bus: the display GPU of a Station (not the serving one) if there is one."""
    gpus = ctx.state["gpus"]
    spare = [g["index"] for g in gpus if not g["serving"]]
    return spare[0] if spare else gpus[-1]["index"]


NVML_FAILURE = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 580.95\n"
NVML_FAILURE_EXIT = 18


def _nvml(ctx) -> bool:
    """The tool's own faults, looked up on every round. ``smi-hang`` blocks here as a wedged driver
    does: nothing printed, a hangup ignored (only SIGKILL ends it sooner), until it is cleared; it
    ends with the world, so a test never leaves one behind. False: ``smi-fail``, the driver fails
    (the caller prints NVML's failure and exits, as the real tool does)."""
    faults = _faults(ctx)
    if "smi-hang" in faults:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with contextlib.suppress(OSError):  # tests wait for this before they hang up on it
            (ctx.world.station_dir(ctx.station) / f"smi-hung.{ctx.pid}").touch()
        while "smi-hang" in faults and ctx.world.root.exists():
            time.sleep(0.2)
            faults = _faults(ctx)
        if not ctx.world.root.exists():
            raise SystemExit(1)
    return "smi-fail" not in faults


def _faults(ctx) -> list[str]:
    """The faults now (World.set_faults, the -cycle windows), ``smi_hang`` in the station's state too."""
    faults = ctx.world.faults_now(ctx.station)
    return [*faults, "smi-hang"] if ctx.state.get("smi_hang") else faults


def _units(field: str) -> str:
    if field.startswith("memory."):
        return " MiB"
    if field.startswith("utilization."):
        return " %"
    if field.startswith("power.") or field.endswith("power.limit"):
        return " W"
    if field.startswith("clocks.") and not field.startswith("clocks_"):
        return " MHz"
    return ""


def _header(field: str) -> str:
    return {
        "memory.used": "memory.used [MiB]", "memory.total": "memory.total [MiB]", "memory.free": "memory.free [MiB]",
        "utilization.gpu": "utilization.gpu [%]", "power.draw": "power.draw [W]", "used_memory": "used_gpu_memory [MiB]",
    }.get(field, field)


_GARBAGE = ("nan", "inf", "-inf", "9" * 400, "-5", "NaN", "1e999", "-1")
_NOT_NUMBERS = {"index", "uuid", "name", "pci.bus_id", "retired_pages.pending", "remapped_rows.pending"}


def main(argv: list[str], ctx) -> int:
    query = None
    apps = None
    fmt = "csv"
    loop_s = None
    list_gpus = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("--query-gpu="):
            query = a.split("=", 1)[1].split(",")
        elif a.startswith("--query-compute-apps="):
            apps = a.split("=", 1)[1].split(",")
        elif a.startswith("--format="):
            fmt = a.split("=", 1)[1]
        elif a in ("-lms", "--loop-ms"):
            i += 1
            loop_s = int(argv[i]) / 1000
        elif a.startswith("--loop-ms="):
            loop_s = int(a.split("=", 1)[1]) / 1000
        elif a in ("-l", "--loop"):
            i += 1
            loop_s = float(argv[i])
        elif a == "-L":
            list_gpus = True
        else:
            print('Invalid combination of input arguments. Please run "nvidia-smi -h" for help.\n', file=sys.stderr)
            return 2
        i += 1
    opts = set(fmt.split(","))
    noheader, nounits = "noheader" in opts, "nounits" in opts

    def emit() -> None:
        now = time.time()
        vals = gpu_values(ctx, now)
        lines = []
        if list_gpus:
            lines = [f"GPU {v['index']}: {v['name']} (UUID: {v['uuid']})" for v in vals]
        elif apps is not None:
            if not noheader:
                lines.append(", ".join(_header(f) for f in apps))
            for v in vals:
                g = ctx.state["gpus"][int(v["index"])]
                if not g["serving"]:
                    continue
                engine_pid = str(_DEFAULT_PIDS.get(ctx.state["rank"], 2347))
                procs = []
                if v["_engine_mib"] > 1:
                    procs.append((engine_pid, "/usr/bin/python3", v["_engine_mib"]))
                if g.get("held_mib"):  # the oom fault's leftover process
                    procs.append((str(g.get("held_pid", 4242)), "python3", g["held_mib"]))
                if g.get("leaked_mib") and not g["unified"]:  # a stuck engine process after the stop
                    procs.append((engine_pid, "[python3]", g["leaked_mib"]))
                for pid, pname, used in procs:
                    row = {"gpu_uuid": v["uuid"], "pid": pid, "process_name": pname, "used_memory": str(used),
                           "gpu_name": v["name"]}
                    lines.append(", ".join(row.get(f, "[N/A]") + ("" if nounits else (" MiB" if f == "used_memory" else ""))
                                           for f in apps))
        else:
            fields = query or ["index", "name"]
            for f in fields:
                if f not in vals[0]:
                    print(f'Field "{f}" is not a valid field to query.', file=sys.stderr)
                    raise SystemExit(2)
            if not noheader:
                lines.append(", ".join(_header(f) for f in fields))
            lost = _lost_index(ctx) if "gpu-lost" in ctx.faults else None
            garbage = "smi-garbage" in ctx.faults
            for v in vals:
                if int(v["index"]) == lost:  # what nvidia-smi prints for a GPU that fell off the bus
                    lines.append(f"Unable to determine the device handle for GPU{v['pci.bus_id']}: Unknown Error")
                    continue
                cells = []
                for n, f in enumerate(fields):
                    cell = v[f]
                    if garbage and f not in _NOT_NUMBERS:  # the fault: hostile numbers, a different one per cell
                        cell = _GARBAGE[n % len(_GARBAGE)]
                    if not nounits and cell != "[N/A]":
                        cell += _units(f)
                    cells.append(cell)
                lines.append(", ".join(cells))
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()

    if query is None and apps is None and not list_gpus:
        query = ["index", "name", "memory.used", "memory.total", "utilization.gpu"]
    while True:
        if not _nvml(ctx):
            sys.stdout.write(NVML_FAILURE)
            sys.stdout.flush()
            return NVML_FAILURE_EXIT
        emit()
        if not loop_s or ctx.orphaned():
            return 0
        time.sleep(loop_s)
