"""Simulated ``loginctl show-user USER -p Name -p UID -p Linger`` (systemd's KEY=value lines, in the
order of the D-Bus properties, not of ``-p``). The station's user is UID 1000 and lingers; the
``remove-ipc`` fault: it does not."""

from __future__ import annotations

import sys

UID = 1000


def main(argv: list[str], ctx) -> int:
    if len(argv) < 2 or argv[0] != "show-user":
        print(f"Unknown command verb {argv[0] if argv else ''!r}.", file=sys.stderr)
        return 1
    user = argv[1]
    wanted = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-p", "--property")]
    linger = "no" if "remove-ipc" in ctx.faults else "yes"
    props = {"UID": str(UID), "GID": str(UID), "Name": user, "State": "active", "Linger": linger}
    for key, value in props.items():
        if not wanted or key in wanted:
            print(f"{key}={value}")
    return 0
