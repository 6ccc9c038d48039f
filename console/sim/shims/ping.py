"""Simulated iputils ``ping`` between rail addresses: DF-set jumbo frames meet the MTUs of both ends
and the link state, with every failure form of the real tool."""

from __future__ import annotations

import random
import sys
import time

from console.sim.shims._net import rail_by_netdev, rails, station_by_ip


def main(argv: list[str], ctx) -> int:
    size, count, iface, df, interval = 56, 3, None, False, 1.0
    dest = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-s", "-c", "-I", "-M", "-i", "-W", "-w"):
            val = argv[i + 1]
            if a == "-s":
                size = int(val)
            elif a == "-c":
                count = int(val)
            elif a == "-I":
                iface = val
            elif a == "-M":
                df = val == "do"
            elif a == "-i":
                interval = float(val)
            i += 2
            continue
        dest = a
        i += 1
    if dest is None:
        print("ping: usage error: Destination address required", file=sys.stderr)
        return 2
    mine = rail_by_netdev(ctx.world, ctx.station, iface) if iface else rails(ctx.world, ctx.station)[0]
    if mine is None:
        print(f"ping: SO_BINDTODEVICE {iface}: No such device", file=sys.stderr)
        return 2
    total = size + 28
    print(f"PING {dest} ({dest}) from {mine.ip} {mine.netdev}: {size}({total}) bytes of data.", flush=True)
    hit = station_by_ip(ctx.world, dest)
    peer = hit[1] if hit else None
    replies = 0
    errors = 0
    t0 = time.monotonic()
    for seq in range(1, count + 1):
        if df and total > mine.mtu:
            print(f"ping: local error: message too long, mtu={mine.mtu}", flush=True)
            errors += 1
        elif mine.up and peer is not None and peer.up and total <= peer.mtu:
            replies += 1
            print(f"{size + 8} bytes from {dest}: icmp_seq={seq} ttl=64 time={random.uniform(0.05, 0.3):.3f} ms",
                  flush=True)
        if seq < count:
            time.sleep(min(interval, 0.2))
    ms = int((time.monotonic() - t0) * 1000) + (1000 if replies < count and not errors else 0)
    loss = 100 * (count - replies) // count if count else 0
    err = f", +{errors} errors" if errors else ""
    print(f"\n--- {dest} ping statistics ---")
    print(f"{count} packets transmitted, {replies} received{err}, {loss}% packet loss, time {ms}ms")
    if replies:
        print("rtt min/avg/max/mdev = 0.062/0.120/0.301/0.090 ms")
    return 0 if replies else 1
