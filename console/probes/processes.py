"""``ps -ww -o pid=,user:32=,pcpu=,rss=,cgroup:512=,lstart=,args=`` rows and ``docker ps --no-trunc --format
'{{.ID}} {{.Names}}'`` (console/remote/cmdlines/processes.py ``process_details``): who runs a process, its CPU
share, its resident memory and the container it belongs to, by the container id its cgroup names
(cgroup v2 ``0::/system.slice/docker-<id>.scope``, v1 ``...:/docker/<id>``, containerd ``cri-containerd-<id>``).
Pure: text in, dataclasses out, row by row: a row that does not read (a cut line, a number out of
range) costs that row only, never the station's other rows."""

from __future__ import annotations

import re
from dataclasses import dataclass

# lstart in the C locale (the command lines set LC_ALL=C): "Sat Dec  5 14:12:43 2026"
_LSTART = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}"
_ROW = re.compile(r"^\s*(\d{1,10})\s+(\S+)\s+(\d{1,6}(?:\.\d{1,3})?)\s+(\d{1,15})\s+(\S+)\s+(" + _LSTART + r")\s+(.*)$")
_IDENTITY = re.compile(r"^\s*(\S{1,8})\s+(" + _LSTART + r")\s+(.*)$")
PID_MAX = 4_194_304  # the kernel's limit (2^22): a larger pid is no process
_CONTAINER_ID = re.compile(r"(?:docker[-/]|cri-containerd-|libpod-|/moby/)([0-9a-f]{12,64})")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    user: str
    cpu_pct: float  # ps's pcpu: CPU time over the process's life, in % of one core
    rss_mib: float
    container_id: str | None  # the full (or short) id its cgroup names; None: on the host
    command: str  # the whole command line
    started: str = ""  # ps's lstart: with the command, what says the pid is still this process


@dataclass(frozen=True)
class ProcessState:
    pid: int
    stat: str  # ps's STAT: R, S, D (uninterruptible, in the driver), Z (zombie) ...


def parse_ps(text: str) -> dict[int, ProcessInfo]:
    """Rows by pid; lines that are not rows (a header, the containers part, an error) are skipped."""
    out: dict[int, ProcessInfo] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        pid, user, cpu, rss, cgroup, started, args = m.groups()
        if not 1 <= int(pid) <= PID_MAX:
            continue
        cid = _CONTAINER_ID.search(cgroup)
        out[int(pid)] = ProcessInfo(int(pid), user, float(cpu), int(rss) / 1024, cid.group(1) if cid else None,
                                    args.strip(), started)
    return out


@dataclass(frozen=True)
class ProcessIdentity:
    stat: str  # R, S, D, Z ...
    started: str  # lstart
    command: str


def parse_identity(text: str) -> ProcessIdentity | None:
    """``process_identity``'s one row (state, start time, command line); None: no such process (or no
    row that reads)."""
    for line in text.splitlines():
        m = _IDENTITY.match(line)
        if m:
            return ProcessIdentity(m.group(1), m.group(2), m.group(3).strip())
    return None


def parse_containers(text: str) -> dict[str, str]:
    """``{full or short id: name}`` from ``ID NAME`` lines."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and re.fullmatch(r"[0-9a-f]{12,64}", parts[0]):
            out[parts[0]] = parts[1]
    return out


def container_of(cid: str | None, containers: dict[str, str]) -> str | None:
    """The container's name for a cgroup's id (either may be the 12-character short id)."""
    if not cid:
        return None
    return next((name for known, name in containers.items() if known.startswith(cid) or cid.startswith(known)),
                None)


def parse_states(text: str) -> dict[int, ProcessState]:
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            out[int(parts[0])] = ProcessState(int(parts[0]), parts[1])
    return out
