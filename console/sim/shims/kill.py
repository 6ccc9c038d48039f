"""``kill`` (procps, as ``env kill -s SIG PID`` runs it) on a simulated station: it signals only the
station's simulated processes, never one of this machine's. TERM or KILL on the oom fault's leftover
process ends it (its GPU memory is free at the next nvidia-smi read); the engine is root's, so the
login user is refused as a real station refuses; an unknown pid is "No such process"."""

from __future__ import annotations

import sys

from console.sim.shims.ps import processes


def main(argv: list[str], ctx) -> int:
    args = [a for a in argv if a != "--"]
    if len(args) >= 2 and args[0] == "-s":
        args = args[2:]
    elif args and args[0].startswith("-"):
        args = args[1:]
    if len(args) != 1 or not args[0].isdigit():
        print("kill: usage: kill [-s SIGNAL] PID (simulated station)", file=sys.stderr)
        return 2
    pid = int(args[0])
    procs = processes(ctx)
    if pid not in procs:
        print(f"kill: ({pid}) - No such process", file=sys.stderr)
        return 1
    if procs[pid].get("engine"):  # root's, in the container: the login user may not signal it
        print(f"kill: ({pid}) - Operation not permitted", file=sys.stderr)
        return 1
    with ctx.world.edit(ctx.station) as st:
        for g in st["gpus"]:
            if int(g.get("held_pid", 0)) == pid:
                g.pop("held_mib", None)
                g.pop("held_pid", None)
    return 0
