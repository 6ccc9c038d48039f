"""Simulated ``journalctl -k [-f] [--since @EPOCH] [-o short-iso]``: the station's kernel log; with
``-f`` it keeps printing what the kernel logs later (a fault switched on while it runs)."""

from __future__ import annotations

import sys
import time

from console.sim.workbench import kernel_lines

FOLLOW_EVERY_S = 0.5


def main(argv: list[str], ctx) -> int:
    if "-k" not in argv and "--dmesg" not in argv:
        print("The simulator only has the kernel log (journalctl -k).", file=sys.stderr)
        return 1
    since = None
    for i, a in enumerate(argv):
        if a in ("--since", "-S") and i + 1 < len(argv) and argv[i + 1].startswith("@"):
            since = float(argv[i + 1][1:])
    iso = "-o" in argv and "short-iso" in argv
    follow = "-f" in argv or "--follow" in argv
    host = ctx.state.get("hostname", ctx.station)
    seen: set[tuple[float, str]] = set()

    def emit() -> int:
        lines = [(t, m) for t, m in kernel_lines(ctx.world, ctx.station)
                 if (since is None or t >= since) and (t, m) not in seen and (not follow or t <= time.time())]
        for t, msg in lines:
            seen.add((t, msg))
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t)) if iso else time.strftime(
                "%b %d %H:%M:%S", time.localtime(t))
            print(f"{stamp} {host} kernel: {msg}")
        sys.stdout.flush()
        return len(lines)

    if not emit() and not follow:
        print("-- No entries --")
        return 0
    while follow and not ctx.orphaned():
        time.sleep(FOLLOW_EVERY_S)
        ctx.world.faults_now(ctx.station)  # re-reads world.json: a fault switched on since (World.set_faults)
        emit()
    return 0
