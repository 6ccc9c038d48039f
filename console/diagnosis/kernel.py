"""The kernel log as a diagnosis source (issue 23): each station's ``journalctl -k`` / ``dmesg`` since its
container started -- the command the NCCL workbench's hang rung runs (``cmdlines.kernel_log_since``).

``diagnose --station`` reads it once (``read_kernel_log``); the TUI follows it (``KernelLogFollower``, a
supervisor job per station) so the live diagnosis panel sees an Xid, an mlx5 link drop, a failed memory
registration or the OOM killer while it happens. The lines are picked by ``console.probes.kernel_log`` and
matched by the one catalogue (``Diagnoser.feed_kernel``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual.message import Message

from console.probes import kernel_log as kl
from console.remote import cmdlines
from console.remote.transport import Transport, TransportError
from console.station.messages import KernelLines

POLL_S = 30.0  # how often the TUI reads each station's kernel log again
SEEN_MAX = 4000  # kernel lines remembered per station (a line read twice is fed once)


async def read_kernel_log(transport: Transport, since: float, timeout: float) -> tuple[list[str], str | None]:
    """(the relevant kernel-log lines since ``since``, why the log could not be read or None)."""
    res = await transport.run(cmdlines.kernel_log_since(since), timeout=timeout)
    lines = [ln for ln in res.stdout.splitlines() if kl.parse_kernel_line(ln) is not None]
    dated = {ev.text for ev in kl.parse_kernel_log("\n".join(lines), since=since)}
    lines = [ln for ln in lines if (ev := kl.parse_kernel_line(ln)) is not None and ev.text in dated]
    short = len(res.stdout.splitlines()) < 5  # a readable kernel log has boot lines at least
    return lines, (kl.unreadable(res.stdout + res.stderr) if not lines and short else None)


class KernelLogFollower:
    """Reads a station's kernel log every ``interval_s`` since its container started (``since()``: None while
    no container runs) and posts the lines not posted before as ``KernelLines``. Unreadable logs and dead
    connections are quiet: the station's own state shows the connection; the hang rung names the permissions."""

    def __init__(self, station: str, transport: Transport, since: Callable[[], float | None],
                 post: Callable[[Message], object], interval_s: float = POLL_S, timeout_s: float = 20.0) -> None:
        self.station, self.transport, self.since, self.post = station, transport, since, post
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self._seen: dict[str, None] = {}
        self._read_to: float | None = None  # when the last read ran (the next one starts a margin before it)

    async def poll_once(self) -> int:
        """One read (after the first: only since shortly before the previous one, never before the container
        started); the number of new lines posted."""
        start = self.since()
        if start is None:
            return 0
        began = time.time()
        # a margin for the station clock being behind ours (a skew that large is the clock-skew check's)
        frm = max(start, self._read_to - max(2 * self.interval_s, 300.0)) if self._read_to is not None else start
        try:
            lines, _why = await read_kernel_log(self.transport, frm, self.timeout_s)
        except (TransportError, OSError):
            return 0
        self._read_to = began
        new = [ln for ln in lines if ln not in self._seen]
        for ln in new:
            self._seen[ln] = None
        while len(self._seen) > SEEN_MAX:
            del self._seen[next(iter(self._seen))]
        if new:
            self.post(KernelLines(self.station, new, start))
        return len(new)

    async def run(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.interval_s)


def container_since(started_at: str | None) -> float | None:
    """The epoch a container run started (docker's StartedAt), or None."""
    from console.probes.docker import parse_time

    t = parse_time(started_at) if started_at else None
    return t if t and 0 < t < time.time() + 60 else None
