"""``ip -o link show IFACE``, ``ip -o -4 addr show dev IFACE`` and ``ip route get PEER``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError


@dataclass(frozen=True)
class LinkInfo:
    iface: str
    mtu: int
    flags: tuple[str, ...]
    state: str  # UP, DOWN, UNKNOWN, LOWERLAYERDOWN, ...

    @property
    def admin_up(self) -> bool:
        return "UP" in self.flags

    @property
    def carrier(self) -> bool:
        return "LOWER_UP" in self.flags and "NO-CARRIER" not in self.flags


_LINK = re.compile(r"^\d+:\s+(?P<name>[^:@\s]+)(?:@\S+)?:\s+<(?P<flags>[^>]*)>\s+mtu\s+(?P<mtu>\d+)"
                   r"(?:.*?\bstate\s+(?P<state>\S+))?", re.M)


def parse_link(text: str) -> LinkInfo:
    """The first interface of ``ip -o link show`` (one line per interface)."""
    m = _LINK.search(text)
    if not m:
        raise ParseError(f"ip link: no '<FLAGS> mtu N' line in {text.strip()[:120]!r}")
    return LinkInfo(
        iface=m.group("name"),
        mtu=int(m.group("mtu")),
        flags=tuple(f for f in m.group("flags").split(",") if f),
        state=m.group("state") or "UNKNOWN",
    )


def parse_mtu(text: str) -> int:
    """Either ``/sys/class/net/IFACE/mtu`` (a bare number) or an ``ip link`` line."""
    body = text.strip()
    if body.isdigit():
        return int(body)
    return parse_link(body).mtu


def parse_ipv4_addrs(text: str) -> list[str]:
    """Addresses (without prefix length) of ``ip -o -4 addr show``."""
    return re.findall(r"\binet\s+(\d+\.\d+\.\d+\.\d+)(?:/\d+)?", text)


@dataclass(frozen=True)
class Route:
    dest: str
    dev: str | None
    via: str | None
    src: str | None
    kind: str | None  # "unreachable", "blackhole", "prohibit", "local" ... or None for a normal route


def parse_route_get(text: str) -> Route:
    """``ip route get PEER``: ``198.18.0.2 dev enp1s0f1np1 src 198.18.0.1 uid 0``."""
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    if not line:
        raise ParseError("ip route get: empty output")
    if line.startswith("RTNETLINK answers:"):
        return Route(dest="", dev=None, via=None, src=None, kind=line.split(":", 1)[1].strip())
    words = line.split()
    kind = None
    if words[0] in ("unreachable", "blackhole", "prohibit", "local", "broadcast", "multicast", "throw"):
        kind = words.pop(0)
    if not words:
        raise ParseError(f"ip route get: unexpected {line!r}")

    def after(key: str) -> str | None:
        return words[words.index(key) + 1] if key in words[:-1] else None

    return Route(dest=words[0], dev=after("dev"), via=after("via"), src=after("src"), kind=kind)
