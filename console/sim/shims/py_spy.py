"""Simulated ``py-spy dump [--native] --pid PID`` for the simulated engine processes (py-spy's own
format). Inside a container started without ``--cap-add SYS_PTRACE`` it fails as py-spy does there."""

from __future__ import annotations

import os
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
    if os.environ.get("DGX_SIM_IN_CONTAINER") and not _ptrace_allowed(ctx):
        print("Permission Denied: Try running again with elevated permissions by going 'sudo env \"PATH=$PATH\" !!'",
              file=sys.stderr)
        return 1
    text = pyspy_dump(ctx.world, ctx.station, pid, native="--native" in argv or "-n" in argv)
    if text is None:
        print(f"Error: Failed to open process {pid} - is it running?", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


def _ptrace_allowed(ctx) -> bool:
    runs = (ctx.state["containers"].get("glm53") or {}).get("runs") or []
    args = runs[-1].get("args") or [] if runs else []
    return any("SYS_PTRACE" in a for a in args) or "--privileged" in args
