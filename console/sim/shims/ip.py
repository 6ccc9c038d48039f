"""Simulated ``ip`` for the rail: ``-o link show [dev] IFACE``, ``-o -4 addr show dev IFACE`` and
``route get PEER`` (the real formats; the lab uses the real ``ip`` instead)."""

from __future__ import annotations

import sys

from console.sim.launch import MGMT_NET, MGMT_NETDEV, mgmt_ip
from console.sim.shims._net import ifindex, mac, rail_by_netdev, rails, station_by_ip


def _link_line(ctx, r) -> str:
    flags = "BROADCAST,MULTICAST,UP,LOWER_UP" if r.up else "NO-CARRIER,BROADCAST,MULTICAST,UP"
    state = "UP" if r.up else "DOWN"
    return (f"{ifindex(ctx.world, ctx.station, r.netdev)}: {r.netdev}: <{flags}> mtu {r.mtu} qdisc mq state {state} "
            f"mode DEFAULT group default qlen 1000\\    link/ether {mac(ctx.station, r.netdev)} brd ff:ff:ff:ff:ff:ff")


def main(argv: list[str], ctx) -> int:
    args = [a for a in argv if a not in ("-o", "-oneline", "-4", "-br")]
    if len(args) >= 2 and args[0] == "route" and args[1] == "get" and len(args) >= 3:
        peer = args[2]
        mine = rails(ctx.world, ctx.station)
        hit = station_by_ip(ctx.world, peer)
        if hit:
            _, peer_rail = hit
            mine_same = next((r for r in mine if r.ip.rsplit(".", 1)[0] == peer_rail.ip.rsplit(".", 1)[0]), None)
            if mine_same:
                print(f"{peer} dev {mine_same.netdev} src {mine_same.ip} uid 0 \n    cache ")
                return 0
        me = mgmt_ip(ctx.world, ctx.station)
        if peer.startswith(MGMT_NET):  # the management LAN (the simulated stations' SSH side)
            print(f"{peer} dev {MGMT_NETDEV} src {me} uid 0 \n    cache ")
        else:
            print(f"{peer} via {MGMT_NET}254 dev {MGMT_NETDEV} src {me} uid 0 \n    cache ")
        return 0
    if args and args[0] in ("link", "l", "addr", "a", "address"):
        what = args[0][0]
        rest = [a for a in args[1:] if a not in ("show", "dev")]
        sel = rails(ctx.world, ctx.station)
        if what == "a" and (not rest or rest[0] == MGMT_NETDEV):  # the management port comes first
            print(f"2: {MGMT_NETDEV}    inet {mgmt_ip(ctx.world, ctx.station)}/24 brd {MGMT_NET}255 scope global "
                  f"{MGMT_NETDEV}\\       valid_lft forever preferred_lft forever")
            if rest:
                return 0
        if rest:
            r = rail_by_netdev(ctx.world, ctx.station, rest[0])
            if r is None:
                print(f'Device "{rest[0]}" does not exist.', file=sys.stderr)
                return 1
            sel = [r]
        for r in sel:
            if what == "l":
                print(_link_line(ctx, r))
            else:
                idx = ifindex(ctx.world, ctx.station, r.netdev)
                print(f"{idx}: {r.netdev}    inet {r.ip}/24 brd {r.ip.rsplit('.', 1)[0]}.255 scope global "
                      f"{r.netdev}\\       valid_lft forever preferred_lft forever")
        return 0
    print(f'Object "{args[0] if args else ""}" is unknown, try "ip help".', file=sys.stderr)
    return 1
