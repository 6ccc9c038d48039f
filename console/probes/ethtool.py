"""``ethtool IFACE`` (link speed and carrier) and ``ethtool -S IFACE`` (NIC counters)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError

_SPEED = re.compile(r"^\s*Speed:\s*(?P<v>.+?)\s*$", re.M)
_LINK = re.compile(r"^\s*Link detected:\s*(?P<v>.+?)\s*$", re.M)


@dataclass(frozen=True)
class EthtoolLink:
    iface: str | None
    speed_mbps: int | None  # None for "Unknown!" or when the line is absent
    speed_text: str | None
    link_detected: bool | None
    link_note: str | None  # e.g. "Overheat" from "Link detected: no (Overheat)"


def _speed_mbps(text: str) -> int | None:
    m = re.fullmatch(r"(\d+)\s*([MG])b/s", text.strip())
    if not m:
        return None
    value = int(m.group(1))
    return value * 1000 if m.group(2) == "G" else value


def parse_ethtool(text: str) -> EthtoolLink:
    """Speed as Mb/s (``400000Mb/s`` and ``400Gb/s`` both read 400000) and the carrier."""
    head = re.search(r"^Settings for (\S+?):", text, re.M)
    speed = _SPEED.search(text)
    link = _LINK.search(text)
    if not head and not speed and not link:
        raise ParseError(f"ethtool: no 'Speed:' or 'Link detected:' line in {text.strip()[:120]!r}")
    detected = note = None
    if link:
        value = link.group("v")
        m = re.fullmatch(r"(yes|no)(?:\s*\((.*)\))?", value)
        if not m:
            raise ParseError(f"ethtool: unknown 'Link detected: {value}'")
        detected = m.group(1) == "yes"
        note = m.group(2) or None
    speed_text = speed.group("v") if speed else None
    return EthtoolLink(
        iface=head.group(1) if head else None,
        speed_mbps=_speed_mbps(speed_text) if speed_text else None,
        speed_text=speed_text,
        link_detected=detected,
        link_note=note,
    )
