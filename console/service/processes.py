"""The process list's two station jobs, for the TUI's process screen and the tests: read who a GPU
process is (user, CPU, resident memory, container, whole command line), and end one process — TERM,
a grace period, then KILL if it still runs — reporting exactly what happened.

The screen confirms first; this layer refuses in ``--read-only`` as the other actions do. A process
that survives KILL is in the kernel (state D, stuck in the driver): only a GPU reset or a reboot
frees what it holds, and the result says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from console.config import Config
from console.probes import processes as pp
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.remote.transport import TransportError
from console.sanitize import one_line
from console.service.steps import ReadOnlyError

GRACE_S = 5.0  # TERM, then this long for the process to go, then KILL
POLL_S = 0.25


@dataclass(frozen=True)
class ProcessDetail:
    pid: int
    user: str
    cpu_pct: float
    rss_mib: float
    container: str | None  # the container's name; None: on the host (outside every container)
    command: str


@dataclass
class EndResult:
    station: str
    pid: int
    ended: bool
    words: str  # one line for the operator
    steps: list[str] = field(default_factory=list)  # what was sent, and what each answer was


def _transport(cfg: Config, station: str):
    return make_transport(cfg.station(station), cfg.connect_timeout_s, cfg.command_timeout_s)


async def read_processes(cfg: Config, station: str, pids: Iterable[int]) -> dict[int, ProcessDetail]:
    """The details of ``pids`` on ``station`` (a pid that is gone is absent); TransportError as it comes."""
    wanted = sorted({int(p) for p in pids})
    if not wanted:
        return {}
    res = await _transport(cfg, station).run(rc.process_details(wanted), timeout=cfg.command_timeout_s)
    procs, _, rest = res.stdout.partition(rc.CONTAINERS_MARK)
    rows, containers = pp.parse_ps(procs), pp.parse_containers(rest)
    return {pid: ProcessDetail(pid, r.user, r.cpu_pct, r.rss_mib, pp.container_of(r.container_id, containers)
                               or (f"{r.container_id[:12]} (not running)" if r.container_id else None), r.command)
            for pid, r in rows.items() if pid in wanted}


async def end_process(cfg: Config, station: str, pid: int, read_only: bool = False, grace_s: float = GRACE_S,
                      clock: Callable[[], float] = time.monotonic) -> EndResult:
    """TERM, wait up to ``grace_s`` for ``pid`` to go, then KILL and wait again; ReadOnlyError in --read-only."""
    if read_only:
        raise ReadOnlyError("read-only mode: signalling a process is disabled (--read-only)")
    t = _transport(cfg, station)
    out = EndResult(station, pid, False, "")
    for signal in rc.SIGNALS:
        try:
            res = await t.run(rc.signal_process(pid, signal), timeout=cfg.command_timeout_s)
        except TransportError as exc:
            out.words = f"{signal} not sent: {one_line(str(exc), 160)}"
            return out
        said = one_line((res.stderr or res.stdout).strip(), 160)
        out.steps.append(f"$ {rc.signal_process(pid, signal)} -> exit {res.exit_status}" + (f": {said}" if said else ""))
        if not res.ok:
            gone = "no such process" in said.lower()
            out.ended = gone and signal == "TERM" and not await _alive(t, cfg, pid)
            out.words = (f"pid {pid} on {station} was already gone" if out.ended else
                         f"{signal} refused: {said or f'exit {res.exit_status}'}"
                         + (" (the login user may not signal it: `sudo kill -s TERM "
                            f"{pid}` on {station}, or stop its container)" if "not permitted" in said.lower() else ""))
            return out
        t0 = clock()
        limit = grace_s if signal == "TERM" else max(2.0, grace_s / 2)
        while True:
            state = await _alive(t, cfg, pid)
            if not state:
                out.ended = True
                out.words = f"pid {pid} on {station} ended by {signal} after {clock() - t0:.1f} s"
                return out
            if clock() - t0 >= limit:
                break
            await asyncio.sleep(POLL_S)
        out.steps.append(f"pid {pid} still there {limit:g} s after {signal}" + (f" (state {state})" if state else ""))
    out.words = (f"pid {pid} on {station} survived KILL (state {state}): it is stuck in the kernel or the "
                 "driver; only a GPU reset (nvidia-smi -r) or a reboot frees its memory")
    return out


async def _alive(t, cfg: Config, pid: int) -> str:
    """The process's ps state while it lives ('' when gone; a zombie holds no GPU memory: gone)."""
    try:
        res = await t.run(rc.process_running(pid), timeout=cfg.command_timeout_s)
    except TransportError:
        return "?"
    st = pp.parse_states(res.stdout).get(pid)
    return "" if st is None or st.stat.startswith("Z") else st.stat
