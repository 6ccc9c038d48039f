"""Simulated ``show_gids [DEV]``: link-local v1/v2 at 0/1, the rail IPv4 as v1/v2 at 2/3."""

from __future__ import annotations

from console.sim.shims._net import gid_hex, mac, rails


def main(argv: list[str], ctx) -> int:
    sel = [r for r in rails(ctx.world, ctx.station) if not argv or r.device == argv[0]]
    print("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV")
    print("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---")
    n = 0
    for r in sel:
        m = mac(ctx.station, r.netdev).split(":")
        ll = f"fe80:0000:0000:0000:{m[0]}{m[1]}:{m[2]}ff:fe{m[3]}:{m[4]}{m[5]}"
        for idx, (gid, ip, ver) in enumerate(((ll, "", "v1"), (ll, "", "v2"),
                                              (gid_hex(r.ip), r.ip, "v1"), (gid_hex(r.ip), r.ip, "v2"))):
            print(f"{r.device}\t1\t{idx}\t{gid}\t{ip:<14}\t{ver}\t{r.netdev}")
            n += 1
    print(f"n_gids_found={n}")
    return 0
