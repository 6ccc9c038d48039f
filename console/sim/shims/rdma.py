"""Simulated iproute2 ``rdma link [show]``."""

from __future__ import annotations

import sys

from console.sim.shims._net import rails


def main(argv: list[str], ctx) -> int:
    if not argv or argv[0] not in ("link", "l"):
        print(f'Object "{argv[0] if argv else ""}" is unknown, try "rdma help".', file=sys.stderr)
        return 1
    for r in rails(ctx.world, ctx.station):
        if r.port_active:
            state, phys = "ACTIVE", "LINK_UP"
        elif r.up:
            state, phys = "DOWN", "DISABLED"
        else:
            state, phys = "DOWN", "POLLING"
        print(f"link {r.device}/1 state {state} physical_state {phys} netdev {r.netdev}")
    return 0
