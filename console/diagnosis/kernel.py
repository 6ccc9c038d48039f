"""The kernel log as a diagnosis source: each station's ``journalctl -k`` / ``dmesg`` since its
container started -- the command the NCCL workbench's hang rung runs (``cmdlines.kernel_log_since``).

``diagnose --station`` reads it once (``read_kernel_log``); in the TUI the health channel follows it
(``journalctl -k -f``, console/station/health_streams.py: one long-lived reader per station, no command
per poll) and ``KernelFeed`` passes the events of the container's run to the live diagnosis once each, so
the panel sees an Xid, an mlx5 link drop, a failed memory registration or the OOM killer while it
happens. The lines are picked by ``console.probes.kernel_log`` and matched by the one catalogue
(``Diagnoser.feed_kernel``).
"""

from __future__ import annotations

import time

from console.probes import kernel_log as kl
from console.remote import cmdlines
from console.remote.transport import Transport

SEEN_MAX = 4000  # kernel events remembered per station (an event read twice is fed once)


async def read_kernel_log(transport: Transport, since: float, timeout: float) -> tuple[list[str], str | None]:
    """(the relevant kernel-log lines since ``since``, why the log could not be read or None)."""
    res = await transport.run(cmdlines.kernel_log_since(since), timeout=timeout)
    lines = [ln for ln in res.stdout.splitlines() if kl.parse_kernel_line(ln) is not None]
    dated = {ev.text for ev in kl.parse_kernel_log("\n".join(lines), since=since)}
    lines = [ln for ln in lines if (ev := kl.parse_kernel_line(ln)) is not None and ev.text in dated]
    short = len(res.stdout.splitlines()) < 5  # a readable kernel log has boot lines at least
    return lines, (kl.unreadable(res.stdout + res.stderr) if not lines and short else None)


class KernelFeed:
    """Which of a station's kernel events the live diagnosis has not been fed yet: those of the
    container's run (none while no container ever ran), each once -- the health channel's kernel
    follower (console/station/health_streams.py, the one reader of a station's kernel log in the TUI)
    reads an hour back when it (re)starts, so the same line can come twice."""

    def __init__(self) -> None:
        self._seen: dict[tuple[float | None, str], None] = {}

    def new(self, events: list[kl.KernelEvent], since: float | None) -> list[kl.KernelEvent]:
        if since is None:
            return []
        out = []
        for ev in events:
            key = (ev.time, ev.text)
            if (ev.time is not None and ev.time < since - 1.0) or key in self._seen:
                continue
            self._seen[key] = None
            out.append(ev)
        while len(self._seen) > SEEN_MAX:
            del self._seen[next(iter(self._seen))]
        return out


def container_since(started_at: str | None) -> float | None:
    """The epoch a container run started (docker's StartedAt), or None."""
    from console.probes.docker import parse_time

    t = parse_time(started_at) if started_at else None
    return t if t and 0 < t < time.time() + 60 else None
