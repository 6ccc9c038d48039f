"""The process list's two station jobs, for the TUI's process screen and the tests: read who a GPU
process is (user, CPU, resident memory, container, whole command line), and end one process — TERM,
a grace period, then KILL if it still runs — reporting exactly what happened.

The screen confirms first; this layer refuses in ``--read-only`` as the other actions do, and sends
each signal (TERM, and KILL again) only while the pid is still the process the row showed: one
station-side command re-reads its start time and command line and signals only if both match
(``cmdlines.signal_if_same``), so a pid the kernel gave to another process since is never signalled.
It never signals pid 1, the console's own process, or a process it was not shown. A process
that survives KILL is in the kernel (state D, stuck in the driver): only a GPU reset or a reboot
frees what it holds, and the result says so.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from console.config import Config
from console.config.export import masker
from console.probes import processes as pp
from console.remote import cmdlines as rc
from console.remote.results import CommandResult
from console.remote.session import make_transport
from console.remote.transport import Transport, TransportError
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
    command: str  # secrets masked (the config's values, and the one rule: --api-key, token=, ...)
    started: str = ""  # ps's start time ("": not read)
    fingerprint: str = ""  # the start time and the whole command line (unmasked) hashed: who the pid is


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
    mask = masker(cfg)
    return {pid: ProcessDetail(pid, r.user, r.cpu_pct, r.rss_mib, pp.container_of(r.container_id, containers)
                               or (f"{r.container_id[:12]} (not running)" if r.container_id else None),
                               mask(r.command), r.started, rc.identity_fingerprint(r.started, r.command))
            for pid, r in rows.items() if pid in wanted}


def _is_this_host(cfg: Config, station: str) -> bool:
    try:
        st = cfg.station(station)
    except Exception:  # noqa: BLE001 - an unknown station: treat it as this host (refuse more, never less)
        return True
    return bool(st.local) or st.host in ("localhost", "127.0.0.1", "::1") or st.host.startswith("127.")


def never_signalled(cfg: Config, station: str, pid: int) -> str | None:
    """Why ``pid`` on ``station`` is never offered for a signal (pid 1 and below, the console's own
    process where the console runs on that station), or None."""
    if pid <= 1:
        return f"pid {pid} is the station's init (or no process): never signalled from here"
    if pid == os.getpid() and _is_this_host(cfg, station):
        return f"pid {pid} on {station} is this console itself: never signalled from here"
    return None


def _changed_words(pid: int, station: str, now: str, shown: ProcessDetail) -> str:
    return (f"pid {pid} on {station} is no longer the process shown (started {one_line(shown.started, 40)}: "
            f"{one_line(shown.command, 60)}); it is now {one_line(now, 120) or 'another process'}: not signalled")


class Identity(StrEnum):
    """The station's answer just before a signal: is the pid still the process shown?"""

    SAME = "same"
    GONE = "gone"  # the process shown exited
    CHANGED = "changed"  # the kernel gave the pid to another process
    UNANSWERED = "unanswered"  # no identity line: the check did not run


def _identity(stdout: str) -> tuple[Identity, str]:
    """``signal_if_same``'s first line read: the verdict and, when CHANGED, what holds the pid now."""
    first = stdout.partition("\n")[0]
    verdict = first[len(rc.IDENTITY_MARK):].strip() if first.startswith(rc.IDENTITY_MARK) else ""
    if verdict == "gone":
        return Identity.GONE, ""
    if verdict.startswith("changed"):
        return Identity.CHANGED, verdict[len("changed"):].strip()
    if verdict != "same":
        return Identity.UNANSWERED, ""
    return Identity.SAME, ""


def _why_not_signalled(cfg: Config, station: str, shown: ProcessDetail) -> str | None:
    """Why the process shown gets no signal at all: never offered, or its identity cannot be checked."""
    why = never_signalled(cfg, station, shown.pid)
    if why is None and not shown.fingerprint:
        why = (f"pid {shown.pid} on {station}: its start time was not read, so the console cannot tell it is still "
               "the process shown: not signalled (refresh with r, then try again)")
    return why


def _not_sent(cfg: Config, out: EndResult, shown: ProcessDetail, signal: str, verdict: Identity, now: str,
              res: CommandResult) -> None:
    """The final result when the identity check held the signal back (gone, changed, or no answer)."""
    pid, station = out.pid, out.station
    if verdict == Identity.GONE:  # the process shown exited: nothing to signal
        out.steps.append(f"{signal} not sent: pid {pid} gone")
        out.ended = True
        out.words = (f"pid {pid} on {station} was already gone" if signal == "TERM" else
                     f"pid {pid} on {station} ended after TERM (gone before KILL)")
    elif verdict == Identity.CHANGED:  # the kernel gave the pid to another process: never signal it
        out.steps.append(f"{signal} not sent: pid {pid} now names another process")
        out.ended = signal == "KILL"  # after TERM, the process shown went away
        now = masker(cfg)(now)  # another process's argv: its secrets too
        out.words = ((f"pid {pid} on {station} ended after TERM; " if signal == "KILL" else "")
                     + _changed_words(pid, station, now, shown))
    else:
        out.words = f"{signal} not sent: the station's identity check did not answer ({one_line(res.stdout, 80) or f'exit {res.exit_status}'})"


async def _refused(t: Transport, cfg: Config, out: EndResult, shown: ProcessDetail, signal: str, said: str,
                   exit_status: int) -> None:
    """The final result when kill itself failed: the process already gone, or not ours to signal."""
    pid, station = out.pid, out.station
    gone = "no such process" in said.lower()
    out.ended = gone and signal == "TERM" and not await _alive(t, cfg, shown)
    out.words = (f"pid {pid} on {station} was already gone" if out.ended else
                 f"{signal} refused: {said or f'exit {exit_status}'}"
                 + (" (the login user may not signal it: `sudo kill -s TERM "
                    f"{pid}` on {station}, or stop its container)" if "not permitted" in said.lower() else ""))


async def _wait_gone(t: Transport, cfg: Config, shown: ProcessDetail, limit: float,
                     clock: Callable[[], float]) -> tuple[str, float]:
    """Polls until the process is gone or ``limit`` s pass: ('', seconds it took) when it went, else
    (its ps state, 0.0)."""
    t0 = clock()
    while True:
        state = await _alive(t, cfg, shown)
        if not state:
            return "", clock() - t0
        if clock() - t0 >= limit:
            return state, 0.0
        await asyncio.sleep(POLL_S)


async def _signal_and_wait(t: Transport, cfg: Config, out: EndResult, shown: ProcessDetail, signal: str,
                           grace_s: float, clock: Callable[[], float]) -> str | None:
    """One signal, sent only while the pid is still the process shown, then the wait for it to go.
    None: ``out`` is final; else the ps state of the process still there after the wait."""
    pid, station = out.pid, out.station
    cmd = rc.signal_if_same(pid, signal, shown.fingerprint)
    try:
        res = await t.run(cmd, timeout=cfg.command_timeout_s)
    except TransportError as exc:
        out.words = f"{signal} not sent: {one_line(str(exc), 160)}"
        return None
    rest = res.stdout.partition("\n")[2]
    said = one_line((res.stderr or rest).strip(), 160)
    verdict, now = _identity(res.stdout)
    if verdict != Identity.SAME:
        _not_sent(cfg, out, shown, signal, verdict, now, res)
        return None
    out.steps.append(f"$ env kill -s {signal} {pid} (identity checked) -> exit {res.exit_status}"
                     + (f": {said}" if said else ""))
    if not res.ok:
        await _refused(t, cfg, out, shown, signal, said, res.exit_status)
        return None
    limit = grace_s if signal == "TERM" else max(2.0, grace_s / 2)
    state, waited = await _wait_gone(t, cfg, shown, limit, clock)
    if not state:
        out.ended = True
        out.words = f"pid {pid} on {station} ended by {signal} after {waited:.1f} s"
        return None
    out.steps.append(f"pid {pid} still there {limit:g} s after {signal}" + (f" (state {state})" if state else ""))
    return state


async def end_process(cfg: Config, station: str, shown: ProcessDetail, read_only: bool = False,
                      grace_s: float = GRACE_S, clock: Callable[[], float] = time.monotonic) -> EndResult:
    """TERM, wait up to ``grace_s`` for the process ``shown`` to go, then KILL and wait again; each
    signal only while its pid still started when ``shown`` says and runs its command line (else the
    result says what holds the pid now, and nothing is sent); ReadOnlyError in --read-only."""
    if read_only:
        raise ReadOnlyError("read-only mode: signalling a process is disabled (--read-only)")
    pid = shown.pid
    out = EndResult(station, pid, False, "")
    why = _why_not_signalled(cfg, station, shown)
    if why:
        out.words = why
        return out
    t = _transport(cfg, station)
    for signal in rc.SIGNALS:
        state = await _signal_and_wait(t, cfg, out, shown, signal, grace_s, clock)
        if state is None:
            return out
    out.words = (f"pid {pid} on {station} survived KILL (state {state}): it is stuck in the kernel or the "
                 "driver; only a GPU reset (nvidia-smi -r) or a reboot frees its memory")
    return out


async def _alive(t: Transport, cfg: Config, shown: ProcessDetail) -> str:
    """The process's ps state while it lives ('' when gone: no process under its pid, another process
    under it since, or a zombie, which holds no GPU memory)."""
    try:
        res = await t.run(rc.process_identity(shown.pid), timeout=cfg.command_timeout_s)
    except TransportError:
        return "?"
    st = pp.parse_identity(res.stdout)
    if st is None or st.stat.startswith("Z"):
        return ""
    return st.stat if rc.identity_fingerprint(st.started, st.command) == shown.fingerprint else ""
