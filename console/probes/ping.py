"""iputils ``ping`` output (stdout and stderr merged): replies, loss and every failure form."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError

_STATS = re.compile(r"(?P<tx>\d+) packets transmitted, (?P<rx>\d+) (?:packets )?received"
                    r"(?:, \+(?P<err>\d+) errors)?(?:, \+\d+ duplicates)?(?:, \+\d+ corrupted)?"
                    r", (?P<loss>[\d.]+)% packet loss")
_RTT = re.compile(r"(?:rtt|round-trip) min/avg/max/(?:mdev|stddev) = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")
_LOCAL_MTU = re.compile(r"local error: message too long, mtu\s*=\s*(\d+)")
_FRAG = re.compile(r"Frag needed and DF set \(mtu = (\d+)\)")
_HEAD = re.compile(r"^PING \S+ \((?P<peer>[^)]+)\)(?: from (?P<src>\S+) (?P<iface>\S+?))?:? (?P<size>\d+)\((?P<total>\d+)\)")


@dataclass(frozen=True)
class PingResult:
    transmitted: int
    received: int
    errors: int
    loss_pct: float
    rtt_avg_ms: float | None
    packet_bytes: int | None  # the IP packet size from the header line (8972 -> 9000)
    failure: str | None  # None when every packet came back; else one of FAILURES
    mtu_reported: int | None  # the MTU named by "message too long" / "Frag needed"
    error_line: str | None  # the line that says why (verbatim)

    @property
    def ok(self) -> bool:
        return self.failure is None


FAILURES = ("local-mtu", "frag-needed", "unreachable", "no-buffer", "no-route", "loss", "partial-loss", "error")


def parse_ping(text: str) -> PingResult:
    stats = _STATS.search(text)
    head = _HEAD.search(text)
    local = _LOCAL_MTU.search(text)
    frag = _FRAG.search(text)
    err_line = None
    failure = None
    mtu = None
    if local:
        failure, mtu = "local-mtu", int(local.group(1))
        err_line = _line_of(text, local.start())
    elif frag:
        failure, mtu = "frag-needed", int(frag.group(1))
        err_line = _line_of(text, frag.start())
    else:
        for pat, kind in (("Destination Host Unreachable", "unreachable"), ("Destination Net Unreachable", "unreachable"),
                          ("No buffer space available", "no-buffer"), ("Network is unreachable", "no-route"),
                          ("Cannot assign requested address", "error"), ("unknown iface", "error"),
                          ("Name or service not known", "error"), ("Operation not permitted", "error")):
            idx = text.find(pat)
            if idx >= 0:
                failure, err_line = kind, _line_of(text, idx)
                break
    if not stats:
        if failure:  # ping gave up before printing statistics (e.g. "connect: Network is unreachable")
            return PingResult(0, 0, 0, 100.0, None, _size(head), failure, mtu, err_line)
        raise ParseError(f"ping: no statistics line in {text.strip()[-160:]!r}")
    tx, rx = int(stats.group("tx")), int(stats.group("rx"))
    loss = float(stats.group("loss"))
    rtt = _RTT.search(text)
    if rx == tx and tx > 0 and loss == 0:
        failure = None
    elif failure is None:
        failure = "loss" if rx == 0 else "partial-loss"
    return PingResult(
        transmitted=tx, received=rx, errors=int(stats.group("err") or 0), loss_pct=loss,
        rtt_avg_ms=float(rtt.group(2)) if rtt else None, packet_bytes=_size(head),
        failure=failure, mtu_reported=mtu, error_line=err_line,
    )


def _size(head: re.Match | None) -> int | None:
    return int(head.group("total")) if head else None


def _line_of(text: str, idx: int) -> str:
    start = text.rfind("\n", 0, idx) + 1
    end = text.find("\n", idx)
    return text[start:end if end >= 0 else len(text)].strip()


def jumbo_payload(mtu: int) -> int:
    """ICMP payload that fills an IPv4 packet of ``mtu`` bytes: 20 (IP) + 8 (ICMP) headers."""
    return mtu - 28
