"""What the simulated stations' network and RDMA shims agree on: each station's rail (netdev, IP,
MTU, carrier, speed, RDMA devices), derived from the world state and its faults.

A lab station (``state["rail"]["real"]``) has a real interface in its network namespace: its
carrier and MTU come from ``/sys/class/net``, so a cut veth or a changed MTU shows up in the
simulated ethtool/RDMA tools exactly as in ``ip``/``ping``.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from console.sim.world import World

# Faults of the cable itself: both ends see them.
LINK_FAULTS = ("link-down", "slow-rail", "rail-flap")
FLAP_PERIOD_S, FLAP_DOWN_S = 6.0, 2.0  # rail-flap: down for the first 2 s of every 6 s since it was set


def flapping_down(world: World, now: float) -> bool:
    """The rail-flap fault's link is down now (both ends: the cable's fault)."""
    for n in world.names:
        if "rail-flap" in world.faults(n):
            return (now - world.fault_since(n, "rail-flap")) % FLAP_PERIOD_S < FLAP_DOWN_S
    return False


@dataclass
class Rail:
    station: str
    device: str  # RDMA device
    netdev: str
    ip: str
    mtu: int
    up: bool
    speed_mbps: int
    port_active: bool
    real: bool
    primary: bool


def _sys(netdev: str, leaf: str) -> str | None:
    try:
        return Path(f"/sys/class/net/{netdev}/{leaf}").read_text().strip()
    except OSError:
        return None


def second_netdev(netdev: str) -> str:
    """The twin port's name (enp1s0f1np1 -> enP2p1s0f1np1), as on a Spark or a two-rail Station."""
    return netdev.replace("enp", "enP2p", 1) if netdev.startswith("enp") else netdev + "b"


def rails(world: World, station: str) -> list[Rail]:
    st = world.state(station)
    prof = world.profile
    faults = set(world.faults(station))
    cable = {f for n in world.names for f in world.faults(n) if f in LINK_FAULTS}
    r = st["rail"]
    real = bool(r.get("real"))
    mtu = 1500 if "mtu-mismatch" in faults else prof.link.mtu
    up = "link-down" not in cable and not ("rail-flap" in cable and flapping_down(world, time.time()))
    if real:
        mtu = int(_sys(r["netdev"], "mtu") or mtu)
        up = _sys(r["netdev"], "carrier") == "1"
    speed = prof.link.speed_mbps // 2 if "slow-rail" in cable else prof.link.speed_mbps
    out = [Rail(station, r["rdma"], r["netdev"], r["ip"], mtu, up, speed if up else 0,
                up and "rdma-port-down" not in faults, real, True)]
    devices = list(prof.link.rails) or [r["rdma"]]
    for dev in devices:
        if dev == r["rdma"]:
            continue
        rank = st["rank"]
        out.append(Rail(station, dev, second_netdev(r["netdev"]), f"198.18.1.{rank + 1}", prof.link.mtu, True,
                        prof.link.speed_mbps, True, False, False))
    return out


def rail_by_netdev(world: World, station: str, netdev: str) -> Rail | None:
    return next((x for x in rails(world, station) if x.netdev == netdev), None)


def rail_by_device(world: World, station: str, device: str) -> Rail | None:
    return next((x for x in rails(world, station) if x.device == device), None)


def station_by_ip(world: World, ip: str) -> tuple[str, Rail] | None:
    for name in world.names:
        for x in rails(world, name):
            if x.ip == ip:
                return name, x
    return None


def mac(station: str, netdev: str) -> str:
    h = hashlib.sha1(f"{station}/{netdev}".encode()).hexdigest()
    return "58:a2:e1:" + ":".join(h[i:i + 2] for i in (0, 2, 4))


def ifindex(world: World, station: str, netdev: str) -> int:
    names = [x.netdev for x in rails(world, station)]
    return 4 + (names.index(netdev) if netdev in names else len(names))


def gid_hex(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def roce_mtu(netdev_mtu: int) -> tuple[int, int]:
    """RoCE path MTU the HCA picks for a netdev MTU: (bytes, enum)."""
    for size, enum in ((4096, 5), (2048, 4), (1024, 3), (512, 2)):
        if netdev_mtu >= size + 58:
            return size, enum
    return 256, 1
