"""Simulated ``ip`` for the rail: ``-o link show [dev] IFACE``, ``-o -4 addr show dev IFACE``,
``route get PEER`` and ``-j neigh show to PEER [dev IFACE]`` (the real formats — the neighbour
entries as iproute2 6.1 prints them, without ``dev`` when the query named it; the lab uses the real
``ip`` instead)."""

from __future__ import annotations

import json
import sys

from console.sim.launch import MGMT_NET, MGMT_NETDEV, mgmt_ip
from console.sim.shims._net import ifindex, mac, rail_by_netdev, rails, station_by_ip


def _link_line(ctx, r) -> str:
    flags = "BROADCAST,MULTICAST,UP,LOWER_UP" if r.up else "NO-CARRIER,BROADCAST,MULTICAST,UP"
    state = "UP" if r.up else "DOWN"
    return (f"{ifindex(ctx.world, ctx.station, r.netdev)}: {r.netdev}: <{flags}> mtu {r.mtu} qdisc mq state {state} "
            f"mode DEFAULT group default qlen 1000\\    link/ether {mac(ctx.station, r.netdev)} brd ff:ff:ff:ff:ff:ff")


def _neigh(ctx, args: list[str]) -> int:
    """``neigh show to PEER [dev IFACE]``: the peer's rail MAC when it is on one of this station's rails."""
    peer = args[args.index("to") + 1] if "to" in args and args.index("to") + 1 < len(args) else None
    dev = args[args.index("dev") + 1] if "dev" in args and args.index("dev") + 1 < len(args) else None
    rows = []
    hit = station_by_ip(ctx.world, peer) if peer else None
    if hit:
        name, peer_rail = hit
        mine = next((r for r in rails(ctx.world, ctx.station)
                     if r.ip.rsplit(".", 1)[0] == peer_rail.ip.rsplit(".", 1)[0] and dev in (None, r.netdev)), None)
        if mine is not None:
            row = {"dst": peer, "lladdr": mac(name, peer_rail.netdev), "state": ["REACHABLE"]}
            rows.append(row if dev else {"dst": peer, "dev": mine.netdev, **row})
    print(json.dumps(rows))
    return 0


def main(argv: list[str], ctx) -> int:
    as_json = "-j" in argv or "-json" in argv
    args = [a for a in argv if a not in ("-o", "-oneline", "-4", "-br", "-j", "-json")]
    if as_json and args and args[0] in ("neigh", "neighbour", "n"):
        return _neigh(ctx, args[1:])
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
