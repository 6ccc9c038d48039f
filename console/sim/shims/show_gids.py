"""Simulated ``show_gids [DEV]``: link-local v1/v2 at 0/1, then the rail IPv4 as v1/v2 (at 2/3; at 4/5
behind a global IPv6 address under the ``gid-mismatch`` fault, as some Spark pairs have it)."""

from __future__ import annotations

from console.sim.launch import gid_rows
from console.sim.shims._net import rails


def main(argv: list[str], ctx) -> int:
    sel = [r for r in rails(ctx.world, ctx.station) if not argv or r.device == argv[0]]
    print("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")
    print("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")
    n = 0
    for r in sel:
        for g in gid_rows(ctx.world, ctx.station, r.device, r.netdev, r.ip, r.primary):
            print(f"{r.device}\t1\t{g.index}\t{g.gid}\t{g.ipv4:<14}\t{g.version}\t{r.netdev}")
            n += 1
    print(f"n_gids_found={n}")
    return 0
