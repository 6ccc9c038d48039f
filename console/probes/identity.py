"""Who a station is, read from its own answers (pure): ``/etc/machine-id``, its GPUs' UUIDs, the SSH
host key it offered, and the rail neighbour table (``ip -j neigh``) — so the checks can refuse a
"pair" whose two stations are one machine (two names or addresses for the same box: every test
between them passes through loopback and proves nothing about the cable).

``ip -j neigh`` differs by iproute2 version: 6.1 leaves ``dev`` out of each entry when the query
named the device (and some builds leave it out anyway), an entry that never resolved has no
``lladdr``, and ``state`` is a list of words. Every such shape is read; what is missing is None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from console.probes import ParseError

_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_UUID = re.compile(r"^GPU-[0-9a-fA-F-]{8,64}$")


@dataclass(frozen=True)
class Neighbour:
    dst: str
    dev: str | None  # None: iproute2 6.1 with a device filter leaves it out
    lladdr: str | None  # None: not resolved (FAILED / INCOMPLETE)
    state: tuple[str, ...]


@dataclass(frozen=True)
class Identity:
    """One station's marks; None where it was not read (never taken as equal to anything)."""

    station: str
    machine_id: str | None = None
    host_key: str | None = None
    gpu_uuids: frozenset[str] = frozenset()
    rail_mac: str | None = None


def parse_neigh_json(text: str) -> list[Neighbour]:
    """``ip -j neigh show ...``: a JSON list of objects; an empty output is an empty table."""
    text = text.strip()
    if not text:
        return []
    try:
        rows = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"ip -j neigh: not JSON ({exc})") from None
    if not isinstance(rows, list):
        raise ParseError("ip -j neigh: not a list")
    out: list[Neighbour] = []
    for r in rows:
        if not isinstance(r, dict) or not isinstance(r.get("dst"), str):
            continue
        dev = r.get("dev") if isinstance(r.get("dev"), str) else None
        ll = r.get("lladdr")
        lladdr = ll.lower() if isinstance(ll, str) and _MAC.match(ll.lower()) else None
        st = r.get("state")
        state = tuple(s for s in st if isinstance(s, str)) if isinstance(st, list) else \
            ((st,) if isinstance(st, str) else ())
        out.append(Neighbour(r["dst"], dev, lladdr, state))
    return out


def neighbour_mac(table: list[Neighbour], ip: str, dev: str | None = None) -> str | None:
    """The resolved MAC of ``ip`` (on ``dev`` where the entry names one; an entry without a device
    is taken as the queried device's)."""
    for n in table:
        if n.dst == ip and n.lladdr and (dev is None or n.dev in (None, dev)):
            return n.lladdr
    return None


def machine_id(text: str) -> str | None:
    v = text.strip().lower()
    return v if _HEX32.match(v) else None


def gpu_uuids(text: str) -> frozenset[str]:
    """From ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader``."""
    out = set()
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and _UUID.match(parts[1]):
            out.add(parts[1])
    return frozenset(out)


def mac_address(text: str) -> str | None:
    v = text.strip().lower()
    return v if _MAC.match(v) else None


def same_machine(a: Identity, b: Identity, b_mac_seen_from_a: str | None = None) -> list[str]:
    """Why ``a`` and ``b`` are one machine (empty: nothing says so). ``b_mac_seen_from_a``: the MAC
    ``a``'s neighbour table holds for ``b``'s rail address."""
    why = []
    if a.machine_id and a.machine_id == b.machine_id:
        why.append(f"same /etc/machine-id {a.machine_id[:12]}…")
    shared = a.gpu_uuids & b.gpu_uuids
    if shared:
        why.append(f"same GPU UUID {sorted(shared)[0]}" + (f" (+{len(shared) - 1})" if len(shared) > 1 else ""))
    if a.host_key and a.host_key == b.host_key:
        why.append(f"same SSH host key {a.host_key}")
    if b_mac_seen_from_a and a.rail_mac and b_mac_seen_from_a == a.rail_mac:
        why.append(f"{b.station}'s rail address resolves to {a.station}'s own rail MAC {a.rail_mac}")
    return why
