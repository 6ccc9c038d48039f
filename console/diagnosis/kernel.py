"""The kernel log as a diagnosis source: each station's ``journalctl -k`` / ``dmesg`` since its
container started -- the command the NCCL workbench's hang rung runs (``cmdlines.kernel_log_since``).

``diagnose --station`` reads it once (``read_kernel_log``); in the TUI the health channel follows it
(``journalctl -k -f``, console/station/health_streams.py: one long-lived reader per station, no command
per poll) and the station's state passes the events of the container's run to the live diagnosis once
each (``StationState.run_kernel_new``, the one filter of a run's kernel events), so
the panel sees an Xid, an mlx5 link drop, a failed memory registration or the OOM killer while it
happens. The lines are picked by ``console.probes.kernel_log`` and matched by the one catalogue
(``Diagnoser.feed_kernel``).
"""

from __future__ import annotations

from console.probes import kernel_log as kl
from console.remote import cmdlines
from console.remote.transport import Transport


async def read_kernel_log(transport: Transport, since: float, timeout: float) -> tuple[list[str], str | None]:
    """(the relevant kernel-log lines since ``since``, why the log could not be read or None)."""
    res = await transport.run(cmdlines.kernel_log_since(since), timeout=timeout)
    lines = [ln for ln in res.stdout.splitlines() if kl.parse_kernel_line(ln) is not None]
    dated = {ev.text for ev in kl.parse_kernel_log("\n".join(lines), since=since)}
    lines = [ln for ln in lines if (ev := kl.parse_kernel_line(ln)) is not None and ev.text in dated]
    short = len(res.stdout.splitlines()) < 5  # a readable kernel log has boot lines at least
    return lines, (kl.unreadable(res.stdout + res.stderr) if not lines and short else None)
