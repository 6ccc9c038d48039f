"""The simulated stations' ``/proc/PID/task/TID`` of the engine's processes (``stat``, ``wchan``,
``stack``), written into each station's tree every second by the sim server (beside
``/proc/meminfo``), so the hang evidence's thread read runs its real command line against them.

The model, per process ``console.sim.workbench.engine_processes`` lists: a main Python thread, the
NCCL watchdog and proxy threads (on the ranks' workers) and an event loop thread (API server). While
the ranks serve, the worker's main thread is running (R); in a hung collective (wedge, init-hang,
collective-hang) it spins in the CUDA synchronize (R, no wait channel) while the proxy thread waits
on the network; idle, it sleeps on the shared-memory queue's futex. Processes that ended leave
no directory (the read says so)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from console.sim.timelines import LOAD_PHASE
from console.sim.workbench import HUNG_PHASES, engine_processes, phase_now
from console.sim.world import World

_FUTEX = ("futex_wait_queue+0x60/0x90", "__futex_wait+0x8a/0x120", "futex_wait+0x6b/0x110",
          "do_futex+0x105/0x1b0", "__x64_sys_futex+0x7e/0x1d0", "do_syscall_64+0x5d/0x90")
_EPOLL = ("ep_poll+0x2ad/0x310", "do_epoll_wait+0xb8/0xd0", "__x64_sys_epoll_wait+0x64/0x100",
          "do_syscall_64+0x5d/0x90")
_SLEEP = ("hrtimer_nanosleep+0xa5/0x140", "__x64_sys_clock_nanosleep+0xc1/0x130", "do_syscall_64+0x5d/0x90")
_cache: dict[Path, str] = {}


def _threads(pid: int, cmd: str, hung: bool, serving: bool) -> list[tuple[int, str, str, str, tuple[str, ...]]]:
    """(tid, comm, state, wchan, stack) of one process's threads."""
    comm = cmd.split()[0].rsplit("/", 1)[-1][:15] if "VLLM::" not in cmd else cmd.split()[0][:15]
    if "Worker" in cmd or "scheduler" in cmd:
        main = ("R", "0", ()) if hung or serving else ("S", "futex_wait_queue", _FUTEX)
        return [(pid, comm, *main), (pid + 7, "pt_nccl_watchdg", "S", "hrtimer_nanosleep", _SLEEP),
                (pid + 8, "nccl-proxy", "S", "do_epoll_wait", _EPOLL),
                (pid + 9, "cuda-EvtHandlr", "S", "do_epoll_wait", _EPOLL)]
    return [(pid, comm, "S", "do_epoll_wait", _EPOLL), (pid + 3, "python3", "S", "futex_wait_queue", _FUTEX)]


def _put(path: Path, text: str) -> None:
    if _cache.get(path) == text and path.exists():
        return
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    _cache[path] = text


def write_tasks(world: World, name: str, now: float | None = None) -> None:
    """The station's engine processes' task directories as they are at ``now``."""
    now = time.time() if now is None else now
    proc = world.fs_dir(name) / "proc"
    procs = engine_processes(world, name, now)
    phase, _ = phase_now(world, name, now)
    hung, serving = phase in HUNG_PHASES, phase in (LOAD_PHASE, "serving (worker)")
    keep = {str(pid) for pid, _ in procs}
    if proc.is_dir():
        for d in proc.iterdir():
            if d.name.isdigit() and d.name not in keep:
                shutil.rmtree(d, ignore_errors=True)
    for pid, cmd in procs:
        for tid, comm, state, wchan, stack in _threads(pid, cmd, hung, serving):
            tdir = proc / str(pid) / "task" / str(tid)
            tdir.mkdir(parents=True, exist_ok=True)
            _put(tdir / "stat", f"{tid} ({comm}) {state} 1 {pid} {pid} 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0\n")
            _put(tdir / "wchan", wchan)  # the kernel writes no newline
            _put(tdir / "stack", "".join(f"[<0>] {f}\n" for f in stack))
