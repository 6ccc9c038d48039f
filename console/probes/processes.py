"""``ps -ww -o pid=,user:32=,pcpu=,rss=,cgroup:512=,args=`` rows and ``docker ps --no-trunc --format
'{{.ID}} {{.Names}}'`` (console/remote/cmdlines.py ``process_details``): who runs a process, its CPU
share, its resident memory and the container it belongs to, by the container id its cgroup names
(cgroup v2 ``0::/system.slice/docker-<id>.scope``, v1 ``...:/docker/<id>``, containerd ``cri-containerd-<id>``).
Pure: text in, dataclasses out."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+([\d.]+)\s+(\d+)\s+(\S+)\s+(.*)$")
_CONTAINER_ID = re.compile(r"(?:docker[-/]|cri-containerd-|libpod-|/moby/)([0-9a-f]{12,64})")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    user: str
    cpu_pct: float  # ps's pcpu: CPU time over the process's life, in % of one core
    rss_mib: float
    container_id: str | None  # the full (or short) id its cgroup names; None: on the host
    command: str  # the whole command line


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
        pid, user, cpu, rss, cgroup, args = m.groups()
        cid = _CONTAINER_ID.search(cgroup)
        out[int(pid)] = ProcessInfo(int(pid), user, float(cpu), int(rss) / 1024, cid.group(1) if cid else None,
                                    args.strip())
    return out


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
