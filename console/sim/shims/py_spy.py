"""Simulated ``py-spy dump --pid PID`` for the simulated engine processes (py-spy's own format)."""

from __future__ import annotations

import sys

from console.sim.workbench import pyspy_dump


def main(argv: list[str], ctx) -> int:
    if not argv or argv[0] != "dump":
        print("error: the simulator only knows 'py-spy dump --pid PID'", file=sys.stderr)
        return 2
    pid = None
    for i, a in enumerate(argv):
        if a in ("--pid", "-p") and i + 1 < len(argv) and argv[i + 1].isdigit():
            pid = int(argv[i + 1])
    if pid is None:
        print("error: The following required arguments were not provided:\n    --pid <pid>", file=sys.stderr)
        return 2
    text = pyspy_dump(ctx.world, ctx.station, pid)
    if text is None:
        print(f"Error: Failed to open process {pid} - is it running?", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0
