"""The simulated containers over time: which run of a container is up, its timeline, its memory
and phase now, the log it has printed; ``docker start`` / ``docker stop`` on the world, and the
station's /proc/meminfo that follows from them.

The world (``console.sim.world``) is the state; this module is the behaviour computed from it and
the clock. A head's timeline depends on its workers' runs (rendezvous, their failures, the GID
each run's NCCL environment uses: ``console.sim.launch``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from console.config import Profile, tensor_parallel_for, weights_per_gpu_gib
from console.remote.cmdlines.host import MEMINFO
from console.sim import launch
from console.sim.timelines import Timeline, sglang_timeline, vllm_timeline
from console.sim.world import BASE_HOST_USED_MIB, World, held_mib

# ---------------------------------------------------------------- world queries


# Serving flags a `docker run` passes that the timelines honour (flag -> profile.serving key).
_RUN_FLAGS = {"--max-model-len": "max_model_len", "--max-num-seqs": "max_num_seqs",
              "--gpu-memory-utilization": "gpu_memory_utilization", "--mem-fraction-static": "mem_fraction_static",
              "--max-running-requests": "max_running_requests", "--context-length": "context_length"}
RENDEZVOUS_S = 600  # torch.distributed waits this long (engine seconds) for the workers to join


_RUN_TEXT_FLAGS = {"--kv-cache-dtype": "kv_cache_dtype", "--speculative-config": "speculative_config"}


def _run_profile(profile: Profile, args: list[str], base: dict[str, Any] | None = None) -> Profile:
    """The profile as this run's command line changed it (e.g. ``--max-model-len 65536``), over
    what the world's operator configured (``base``) for a run started without flags."""
    serving = {**profile.serving, **(base or {})}
    for flag, value in zip(args, args[1:], strict=False):
        if flag in _RUN_TEXT_FLAGS:
            serving[_RUN_TEXT_FLAGS[flag]] = value
        elif flag in _RUN_FLAGS:
            try:
                serving[_RUN_FLAGS[flag]] = float(value) if "." in value else int(value)
            except ValueError:
                continue
    return profile if serving == profile.serving else dataclasses.replace(profile, serving=serving)


def _split_profile(profile: Profile, args: list[str], n_stations: int) -> Profile:
    """The profile at this run's tensor-parallel size (its ``--tensor-parallel-size`` / ``--tp``,
    else the profile's GPUs per station times the stations): each rank of a 2x profile run on 4
    stations holds half the weights the profile states for 2."""
    tp = tensor_parallel_for(profile, n_stations)
    for flag, value in zip(args, args[1:], strict=False):
        if flag in ("--tensor-parallel-size", "--tp", "--tp-size") and value.isdigit():
            tp = int(value)
    if tp == profile.tensor_parallel and n_stations == profile.nnodes:
        return profile
    return dataclasses.replace(profile, tensor_parallel=tp, nnodes=n_stations,
                               gpu=dataclasses.replace(profile.gpu, weights_gib=weights_per_gpu_gib(profile, tp)))


def run_timeline(world, name: str, state: dict[str, Any], run: dict[str, Any]) -> Timeline:
    """The timeline of one container run. The head depends on its workers: those running when it
    starts, or started within the rendezvous window (it then waits for the last to join)."""
    args = list(run.get("args") or [])
    state = _as_at_start(state, run)
    n = len(world.names)
    profile = _split_profile(_run_profile(world.profile, args, world.operator_overrides), args, n)
    start = float(run["started_at"])
    scale = world.time_scale
    head_ip = world.state(world.names[0])["rail"]["ip"] if state["rank"] != 0 else state["rail"]["ip"]
    peers_ok = True
    peer_fail_at = None
    join_at = start
    peer_runs: list[tuple[str, dict[str, Any]]] = []
    if state["rank"] == 0:
        window = RENDEZVOUS_S * scale
        for peer in world.names[1:]:
            pst = world.state(peer)
            # every run of the peer's serving containers, whatever they are called now (renamed -prev)
            runs = sorted((r for c in pst["containers"].values() for r in c["runs"]),
                          key=lambda r: float(r["started_at"]))
            prun = _run_at(world, peer, pst, runs, start)
            if prun is None:
                later = [r for r in runs if start < float(r["started_at"]) <= start + window]
                prun = later[0] if later else None
                if prun is not None:
                    join_at = max(join_at, float(prun["started_at"]))
            if prun is None:
                peers_ok = False
                continue
            peer_runs.append((peer, prun))
            ptl = run_timeline(world, peer, pst, prun)
            if ptl.exit_at is not None:
                fail_abs = float(prun["started_at"]) + ptl.exit_at
                peer_fail_at = fail_abs if peer_fail_at is None else min(peer_fail_at, fail_abs)
    fn = sglang_timeline if profile.engine == "sglang" else vllm_timeline
    return fn(profile, state, world.faults(name), start, scale, head_ip, peers_ok, peer_fail_at, n,
              join_delay=join_at - start if peers_ok else 0.0, env=launch.run_env(run.get("args")),
              collective_ok=launch.transport_ok(world, name, run, peer_runs if state["rank"] == 0 else None),
              hang_after_ready=bool({"collective-hang", "desync"} & launch.all_faults(world)),
              hangs=frozenset(launch.all_faults(world) & {"wedge", "init-hang", "stall-cycle"}))  # every rank


def _as_at_start(state: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """The station as the run found it: what other processes held on its GPUs when it started. A run's
    past does not change when the leftover process is ended later (an OOM at start stays an OOM; the
    next start finds the memory free)."""
    held = run.get("held_at_start")
    if held is None or len(held) != len(state["gpus"]):
        return state
    gpus = [{**{k: v for k, v in g.items() if k not in ("held_mib", "leaked_mib")}, "held_mib": h}
            for g, h in zip(state["gpus"], held, strict=True)]
    return {**state, "gpus": gpus}


def _run_at(world, name: str, state: dict[str, Any], runs: list[dict[str, Any]], t: float) -> dict[str, Any] | None:
    """The run of a (worker) station that was up at time ``t``, if any."""
    for run in reversed(runs):
        t0 = float(run["started_at"])
        if t0 > t:
            continue
        stopped = run.get("stopped_at")
        if stopped is not None and float(stopped) <= t:
            return None
        tl = run_timeline(world, name, state, run)
        return None if tl.exit_at is not None and t0 + tl.exit_at <= t else run
    return None


def _status_at(world, name: str, state: dict[str, Any], c: dict[str, Any] | None, now: float) -> dict[str, Any]:
    if c is None:
        return {"state": "absent"}
    runs = [r for r in c["runs"] if float(r["started_at"]) <= now]
    if not runs:
        return {"state": "created" if not c["runs"] else "exited", "exit_code": None}
    run = runs[-1]
    stopped = run.get("stopped_at")
    if stopped is not None and float(stopped) <= now:
        return {"state": "exited", "exit_code": run.get("exit_code", 0), "started_at": run["started_at"],
                "finished_at": stopped, "run": run}
    tl = run_timeline(world, name, state, run)
    if tl.exit_at is not None and now >= float(run["started_at"]) + tl.exit_at:
        return {"state": "exited", "exit_code": tl.exit_code, "started_at": run["started_at"],
                "finished_at": float(run["started_at"]) + tl.exit_at, "run": run, "timeline": tl}
    return {"state": "running", "started_at": run["started_at"], "run": run, "timeline": tl}


def container_status(world, name: str, state: dict[str, Any], container: str, now: float | None = None
                     ) -> dict[str, Any]:
    """Effective state of a container at ``now`` (a fault may have made it exit on its own)."""
    return _status_at(world, name, state, state["containers"].get(container), time.time() if now is None else now)


def serving_mem_gib(world, name: str, state: dict[str, Any], now: float | None = None) -> float:
    now = time.time() if now is None else now
    st = container_status(world, name, state, "glm53", now)
    if st["state"] != "running":
        return 0.0
    tl: Timeline = st["timeline"]
    return tl.mem_at(now - float(st["started_at"]))


def engine_phase(world, name: str, state: dict[str, Any], now: float | None = None) -> str:
    """down | loading | ready | dead (for the simulated API and GPU utilisation)."""
    now = time.time() if now is None else now
    st = container_status(world, name, state, "glm53", now)
    if st["state"] != "running":
        return "dead" if st.get("exit_code") not in (None, 0) else "down"
    tl: Timeline = st["timeline"]
    if tl.ready_at is not None and now - float(st["started_at"]) >= tl.ready_at:
        return "ready"
    return "loading"


def log_lines(world, name: str, state: dict[str, Any], container: str, now: float | None = None
              ) -> list[tuple[float, str]]:
    """Every (absolute time, line) the container has printed up to ``now``, over all its runs."""
    now = time.time() if now is None else now
    c = state["containers"].get(container)
    if not c:
        return []
    out: list[tuple[float, str]] = []
    for run in c["runs"]:
        start = float(run["started_at"])
        if start > now:
            continue
        end = now if run.get("stopped_at") is None else min(now, float(run["stopped_at"]))
        tl = run_timeline(world, name, state, run)
        for off, line in tl.lines:
            t = start + off
            if t <= end:
                out.append((t, line))
        if run.get("stopped_at") is not None and float(run["stopped_at"]) <= now and run.get("exit_code") == 0:
            out.append((float(run["stopped_at"]), "INFO:     Shutting down"))
    extra = world.station_dir(name) / "extra.log"
    if extra.exists():
        for raw in extra.read_text().splitlines():
            t_s, _, line = raw.partition(" ")
            try:
                t = float(t_s)
            except ValueError:
                continue
            if t <= now:
                out.append((t, line))
        out.sort(key=lambda p: p[0])
    return out


# ---------------------------------------------------------------- docker start / stop


def start_container(world: World, name: str, container: str = "glm53", at: float | None = None,
                    args: list[str] | None = None) -> bool:
    """Start (docker start / run). Returns False if it was already running. A first start without a
    command line runs what the operator's launch script would (``launch.launch_args``)."""
    now = time.time() if at is None else at
    with world.edit(name) as st:
        c = st["containers"].get(container)
        if c is None:
            raise KeyError(container)
        if container_status(world, name, st, container, now)["state"] == "running":
            return False
        if c["runs"] and c["runs"][-1].get("stopped_at") is None:
            c["runs"][-1]["stopped_at"] = now  # exited on its own: close the record
        if args is None:
            args = c["runs"][-1]["args"] if c["runs"] else launch.launch_args(world, name)
        c["runs"].append({"started_at": now, "stopped_at": None, "exit_code": None, "args": args,
                          "held_at_start": [held_mib(g) for g in st["gpus"]]})
        c["state"] = "running"
    return True


def stop_container(world: World, name: str, container: str = "glm53", at: float | None = None) -> bool:
    """docker stop: returns False if it was not running."""
    now = time.time() if at is None else at
    with world.edit(name) as st:
        c = st["containers"].get(container)
        if c is None:
            raise KeyError(container)
        status = container_status(world, name, st, container, now)
        if status["state"] != "running":
            return False
        if "memory-not-released" in world.faults(name):
            leak = int(serving_mem_gib(world, name, st, now) * 1024)
            for g in st["gpus"]:
                if g["serving"]:
                    g["leaked_mib"] = g.get("leaked_mib", 0) + leak
        run = c["runs"][-1]
        run["stopped_at"] = now
        run["exit_code"] = 0
        c["state"] = "exited"
    return True


# ---------------------------------------------------------------- host memory


LOW_AVAILABLE_MIB = 2560  # the unified-memory-low fault's MemAvailable during a start-up


def write_meminfo(world: World, name: str, unified: bool) -> None:
    """The station's /proc/meminfo in its file tree (the sim server rewrites it every second;
    ``sysctl -w vm.drop_caches`` at once, as the kernel would)."""
    st = world.state(name)
    total = st["host_mem_total_mib"]
    used = BASE_HOST_USED_MIB[unified]
    if unified:
        used += int(serving_mem_gib(world, name, st) * 1024)
        used += sum(held_mib(g) for g in st["gpus"] if g["serving"])
    else:
        used += 4096 if engine_phase(world, name, st) != "down" else 0
    avail = max(0, total - used)
    if unified and "unified-memory-low" in world.faults_now(name) and engine_phase(world, name, st) == "loading":
        avail = min(avail, LOW_AVAILABLE_MIB)  # what a GB10 near lock-up shows during loading and graph capture
    cached = min(int(st.get("page_cache_mib", avail * 0.3)), avail)  # until `sysctl -w vm.drop_caches=3`
    text = (f"MemTotal:       {total * 1024:>10} kB\nMemFree:        {max(0, avail - cached - 2048) * 1024:>10} kB\n"
            f"MemAvailable:   {avail * 1024:>10} kB\nBuffers:        {2048 * 1024:>10} kB\n"
            f"Cached:         {cached * 1024:>10} kB\nSwapTotal:             0 kB\n")
    path = world.fs_dir(name) / MEMINFO.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"meminfo.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
