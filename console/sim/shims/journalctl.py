"""Simulated ``journalctl -k [--since @EPOCH] [-o short-iso]``: the station's kernel log."""

from __future__ import annotations

import sys
import time

from console.sim.workbench import kernel_lines


def main(argv: list[str], ctx) -> int:
    if "-k" not in argv and "--dmesg" not in argv:
        print("The simulator only has the kernel log (journalctl -k).", file=sys.stderr)
        return 1
    since = None
    for i, a in enumerate(argv):
        if a in ("--since", "-S") and i + 1 < len(argv) and argv[i + 1].startswith("@"):
            since = float(argv[i + 1][1:])
    iso = "-o" in argv and "short-iso" in argv
    host = ctx.state.get("hostname", ctx.station)
    lines = [(t, m) for t, m in kernel_lines(ctx.world, ctx.station) if since is None or t >= since]
    if not lines:
        print("-- No entries --")
        return 0
    for t, msg in lines:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t)) if iso else time.strftime(
            "%b %d %H:%M:%S", time.localtime(t))
        print(f"{stamp} {host} kernel: {msg}")
    return 0
