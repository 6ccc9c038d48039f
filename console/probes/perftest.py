"""perftest (``ib_write_bw`` and friends): readiness, header block, result table and errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.probes import ParseError

READY = "Waiting for client to connect"
DEFAULT_PORT = 18515

# (pattern, kind): what went wrong, in the words perftest prints.
_ERRORS = (
    (re.compile(r"Couldn't connect to (\S+?):(\d+)"), "connect"),
    (re.compile(r"Failed to modify QP \S* ?to RTR"), "qp-rtr"),
    (re.compile(r"Failed to modify QP \S* ?to RTS"), "qp-rts"),
    (re.compile(r"Couldn't allocate MR(?: with error=(\d+))?"), "mr"),
    (re.compile(r"Couldn't (?:register|allocate) (?:MR|memory)"), "mr"),
    (re.compile(r"Unable to (?:open|init) (?:the )?(?:CUDA|cuda)|CUDA (?:support )?(?:not enabled|is not enabled)"), "cuda"),
    (re.compile(r"Did not detect devices"), "no-device"),  # no RDMA device at all (driver not up)
    (re.compile(r"IB device (\S+) not found|No IB devices found|Couldn't get device"), "device"),
    (re.compile(r"Couldn't listen to port|Address already in use"), "port-in-use"),
)


@dataclass(frozen=True)
class BwRow:
    bytes: int
    iterations: int
    bw_peak_gbps: float
    bw_avg_gbps: float
    msg_rate_mpps: float


@dataclass(frozen=True)
class PerftestResult:
    rows: list[BwRow] = field(default_factory=list)
    header: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # kind from _ERRORS
    error_line: str | None = None
    units: str = "Gb/sec"

    @property
    def bw_avg_gbps(self) -> float | None:
        return self.rows[-1].bw_avg_gbps if self.rows else None

    @property
    def bw_peak_gbps(self) -> float | None:
        return self.rows[-1].bw_peak_gbps if self.rows else None


def is_ready(line: str) -> bool:
    return READY in line


def find_error(text: str) -> tuple[str, str] | None:
    for pat, kind in _ERRORS:
        m = pat.search(text)
        if m:
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.start())
            return kind, text[start:end if end >= 0 else len(text)].strip()
    return None


def active_mtu(header: dict[str, str]) -> int | None:
    """The RoCE path MTU perftest negotiated (``Mtu : 1024[B]``), or None."""
    m = re.match(r"(\d+)", header.get("Mtu", ""))
    return int(m.group(1)) if m else None


def roce_mtu(link_mtu: int) -> int:
    """The RoCE MTU an Ethernet MTU allows (the IB MTUs 1024..4096 that fit with RoCE's headers)."""
    return max((m for m in (4096, 2048, 1024, 512, 256) if m + 58 <= link_mtu), default=256)


def header_fields(text: str) -> dict[str, str]:
    """The ``Key : value`` pairs of perftest's header block (two per line, tab-separated)."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        for part in re.split(r"\t+|\s{3,}(?=[A-Z])", line.strip()):
            key, sep, value = part.partition(":")
            if sep and key.strip() and not key.strip().startswith("#") and len(key.strip()) < 24:
                header.setdefault(key.strip(), value.strip())
    return header


def parse_bw(text: str) -> PerftestResult:
    """The bandwidth table (``#bytes #iterations BW peak[..] BW average[..] MsgRate[Mpps]``)."""
    header = header_fields(text)
    units = "Gb/sec"
    rows: list[BwRow] = []
    in_table = False
    for line in text.splitlines():
        if re.match(r"^\s*#bytes\s+#iterations", line):
            in_table = True
            m = re.search(r"BW average\[([^\]]+)\]", line)
            units = m.group(1) if m else units
            continue
        if in_table:
            f = line.split()
            if len(f) >= 5 and f[0].isdigit() and f[1].isdigit():
                try:
                    rows.append(BwRow(int(f[0]), int(f[1]), float(f[2]), float(f[3]), float(f[4])))
                except ValueError:
                    continue
    if units == "MB/sec":  # without --report_gbits perftest reports MB/s (2^20 bytes)
        rows = [BwRow(r.bytes, r.iterations, r.bw_peak_gbps * 8 * 1.048576 / 1000,
                      r.bw_avg_gbps * 8 * 1.048576 / 1000, r.msg_rate_mpps) for r in rows]
    err = find_error(text)
    if not rows and err is None:
        raise ParseError(f"perftest: no result table in {text.strip()[-160:]!r}")
    return PerftestResult(rows, header, err[0] if err else None, err[1] if err else None, units)
