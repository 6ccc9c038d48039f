"""Simulated ``ncclras`` (NCCL's RAS client): ``[-h HOST] [-p PORT] [-f text|json] [-v] [-t SECS]``,
printing NCCL's own text and ``-f json`` formats from the world's state and faults (console/sim/hang_sim.py)."""

from __future__ import annotations

import sys

from console.sim.hang_sim import ncclras_output


def main(argv: list[str], ctx) -> int:
    fmt = "text"
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-f", "--format") and i + 1 < len(argv):
            fmt = argv[i + 1].lower()
            i += 2
            continue
        if a.startswith("--format="):
            fmt = a.split("=", 1)[1].lower()
        elif a in ("-h", "--host", "-p", "--port", "-t", "--timeout"):
            i += 2
            continue
        elif a not in ("-v", "--verbose") and a.startswith("-"):
            print(f"ncclras: unrecognized option '{a}'", file=sys.stderr)
            return 1
        i += 1
    if fmt not in ("text", "json"):
        print(f"Invalid format: {fmt} (must be text or json)", file=sys.stderr)
        return 1
    out, err, rc = ncclras_output(ctx.world, ctx.station, fmt)
    sys.stdout.write(out)
    sys.stderr.write(err)
    return rc
