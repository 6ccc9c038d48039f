"""Simulated ``ibdev2netdev`` (Mellanox OFED): ``DEV port 1 ==> NETDEV (Up|Down)``."""

from __future__ import annotations

from console.sim.shims._net import rails


def main(argv: list[str], ctx) -> int:
    for r in rails(ctx.world, ctx.station):
        print(f"{r.device} port 1 ==> {r.netdev} ({'Up' if r.up else 'Down'})")
    return 0
