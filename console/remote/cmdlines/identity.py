"""The command lines that say who a station is (re-exported by ``cmdlines``): its machine id, and
the rail neighbour table entry for the peer's rail address (``ip -j neigh``)."""

from __future__ import annotations

import shlex

MACHINE_ID = "/etc/machine-id"
NET_ADDRESS = "/sys/class/net/{netdev}/address"


def machine_id_read() -> str:
    return f"cat {MACHINE_ID}"


def rail_mac_read(netdev: str) -> str:
    return "cat " + shlex.quote(NET_ADDRESS.format(netdev=netdev))


def neigh_json(peer_ip: str, netdev: str) -> str:
    """The neighbour entry of ``peer_ip`` on the rail (a ping first: an idle entry may be gone)."""
    return (f"ping -c 1 -W 1 -I {shlex.quote(netdev)} {shlex.quote(peer_ip)} >/dev/null 2>&1; "
            f"ip -j neigh show to {shlex.quote(peer_ip)} dev {shlex.quote(netdev)}")
