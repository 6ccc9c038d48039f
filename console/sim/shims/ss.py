"""Simulated ``ss -ltnp[H] 'sport = :PORT'``: the TCP listeners on the API port, in iproute2's format. The
head's engine listens once it is ready (root's, in the container: ss shows the login user no process for
it). ``api-port-taken``: the login user's own forgotten vLLM on the host listens there (pid
``FOREIGN_LISTENER_PID``, named by ss, listed by ps); ``api-port-taken-hidden``: another user's server
listens there (ss shows no process). Other uses run the real ``ss``."""

from __future__ import annotations

import os
import re
import sys
import time

from console.sim.engine import engine_phase

FOREIGN_LISTENER_PID = 4343
HEADER = "State  Recv-Q Send-Q   Local Address:Port    Peer Address:Port Process"
_SPORT = re.compile(r"sport\s*=\s*:(\d+)")


def _row(local: str, peer: str, users: str = "") -> str:
    return f"LISTEN 0      4096   {local:>15}    {peer:>15} {users}".rstrip()


def main(argv: list[str], ctx) -> int:
    flags = "".join(a[1:] for a in argv if a.startswith("-") and not a.startswith("--"))
    if "l" not in flags or "t" not in flags:
        real = next((p for p in ("/usr/bin/ss", "/bin/ss", "/usr/sbin/ss", "/sbin/ss") if os.path.exists(p)), None)
        if real is None:
            print("ss: this simulated station answers -ltnp only", file=sys.stderr)
            return 1
        os.execv(real, [real, *argv])
    port = ctx.profile.api_port
    wanted = next((int(m.group(1)) for a in argv if (m := _SPORT.search(a))), None)
    rows: list[str] = []
    if wanted in (None, port):
        faults = ctx.faults
        if "api-port-taken" in faults:
            rows.append(_row(f"0.0.0.0:{port}", "0.0.0.0:*", f'users:(("python3",pid={FOREIGN_LISTENER_PID},fd=21))'))
        if "api-port-taken-hidden" in faults:
            rows.append(_row(f"[::]:{port}", "[::]:*"))
        if ctx.state["rank"] == 0 and engine_phase(ctx.world, ctx.station, ctx.state, time.time()) == "ready":
            rows.append(_row(f"0.0.0.0:{port}", "0.0.0.0:*"))
    if "H" not in flags:
        print(HEADER)
    for r in rows:
        print(r)
    return 0
