"""Simulated iproute2 ``rdma link [show]`` and ``rdma statistic show link DEV/PORT`` (hw counters)."""

from __future__ import annotations

import sys

from console.sim.shims._net import rails


def _statistic(argv: list[str], ctx) -> int:
    from console.sim.workbench import rdma_counters

    want = next((a for a in argv if "/" in a), None)
    for r in rails(ctx.world, ctx.station):
        if want and want.split("/")[0] != r.device:
            continue
        vals = rdma_counters(ctx.world, ctx.station, r.device)
        pairs = " ".join(f"{k} {v}" for k, v in vals.items())
        print(f"link {r.device}/1 {pairs}")
    return 0


def main(argv: list[str], ctx) -> int:
    if argv and argv[0] in ("statistic", "stat", "s"):
        return _statistic(argv[1:], ctx)
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
