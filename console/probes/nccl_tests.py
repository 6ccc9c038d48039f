"""nccl-tests (``all_reduce_perf`` ...) result tables and the NCCL ``NCCL_DEBUG=INFO`` lines around them.

Result rows are read from the right: the last eight columns are always out-of-place time, algbw,
busbw, #wrong and the same in-place, whatever sits between the element type and them (``redop``,
``root``, both, or neither in older builds). ``mpirun --tag-output`` / per-rank ``[0]`` prefixes are
stripped. ``#wrong`` may be ``0``, ``N/A`` (``-c 0``) or an error figure (``0e+00`` in old builds).

The INFO lines say what NCCL chose: the network (``Using network IB|Socket|<plugin>``), GPUDirect per
HCA, the interfaces (``Bootstrap``/``NET/IB``/``NET/Socket : Using ...``), every variable NCCL read
(``NCCL_X set by environment to V.``, which is also where the GID index in use shows), the version,
warnings and IB completion errors with their GIDs (2.2x+ wording).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from console.catalogue import nccl_version_of_text
from console.probes import ParseError
from console.probes.nccl_transport import transport_of_lines
from console.vocabulary import NcclTransport


@dataclass(frozen=True)
class NcclRow:
    size: int
    count: int
    type: str
    time_us: float
    algbw: float
    busbw: float
    wrong: str
    ip_time_us: float | None = None
    ip_algbw: float | None = None
    ip_busbw: float | None = None
    ip_wrong: str | None = None


@dataclass(frozen=True)
class NcclTestResult:
    rows: list[NcclRow]
    avg_busbw_gbytes: float | None  # GB/s, as nccl-tests prints it
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK|FAILED"
    ranks: tuple[str, ...] = ()  # hosts of "#  Rank  N ... on HOST device ..."
    errors: tuple[str, ...] = ()  # "Test NCCL failure ...", "Test CUDA failure ...", "Test failure ..."

    @property
    def avg_busbw_gbits(self) -> float | None:
        return None if self.avg_busbw_gbytes is None else self.avg_busbw_gbytes * 8

    @property
    def peak_busbw_gbytes(self) -> float | None:
        vals = [max(r.busbw, r.ip_busbw or 0.0) for r in self.rows]
        return max(vals) if vals else None

    @property
    def wrong_rows(self) -> list[NcclRow]:
        def bad(w: str | None) -> bool:
            return w not in (None, "0", "N/A") and not re.fullmatch(r"0(?:\.0+)?e[+-]00", w or "")

        return [r for r in self.rows if bad(r.wrong) or bad(r.ip_wrong)]


# The Spark setup script fails below this bus bandwidth (GB/s) = 175 Gb/s.
SPARK_MIN_BUSBW = 21.875

_TAG = re.compile(r"^\s*\[\d+(?:,\d+)*\](?:<std(?:out|err)>)?:?\s?")
_INNER_TAG = re.compile(r"(?<=\S)\[\d+\](?=\s)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_RANK = re.compile(r"#\s*Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device")
_TEST_ERROR = re.compile(r"Test (?:NCCL |CUDA )?failure .*|.*\bTest failure\b.*")
_NUM = re.compile(r"^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$")


def _untag(line: str) -> str:
    return _INNER_TAG.sub(" ", _TAG.sub("", line))


def _row(fields: list[str]) -> NcclRow | None:
    if len(fields) < 11 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    tail = fields[-8:]
    try:
        t, alg, bus = float(tail[0]), float(tail[1]), float(tail[2])
        it, ialg, ibus = float(tail[4]), float(tail[5]), float(tail[6])
    except ValueError:
        return None
    if not all(_NUM.match(x) or x == "N/A" for x in (tail[3], tail[7])):
        return None
    return NcclRow(int(fields[0]), int(fields[1]), fields[2], t, alg, bus, tail[3], it, ialg, ibus, tail[7])


def parse_nccl_tests(text: str) -> NcclTestResult:
    """Every result row (one bad row never hides the others), the average and the ranks' hosts."""
    rows: list[NcclRow] = []
    ranks: list[str] = []
    errors: list[str] = []
    avg = oob = None
    for raw in text.splitlines():
        line = _untag(raw.rstrip("\r"))
        stripped = line.strip()
        if stripped.startswith("#"):
            if m := _AVG.search(stripped):
                avg = float(m.group(1))
            elif m := _OOB.search(stripped):
                oob = int(m.group(1))
            elif m := _RANK.search(stripped):
                ranks.append(m.group(1))
            continue
        if m := _TEST_ERROR.search(stripped):
            errors.append(m.group(0).strip())
            continue
        row = _row(stripped.split())
        if row is not None:
            rows.append(row)
    if not rows and avg is None and not ranks and not errors:
        raise ParseError("nccl-tests: no result rows and no '# Avg bus bandwidth' line")
    return NcclTestResult(rows, avg, oob, tuple(ranks), tuple(errors))


# ------------------------------------------------------------------ NCCL INFO lines


@dataclass(frozen=True)
class IbCompletionError:
    status: str  # "12", "IBV_WC_RETRY_EXC_ERR(12)" (2.28+ wording) ...
    peer: str | None
    local_gid: str | None
    remote_gid: str | None
    line: str


@dataclass(frozen=True)
class NcclInfo:
    version: str | None = None
    network: str | None = None  # IB | Socket | a plugin's name
    transport: str = "unknown"  # gdrdma | rdma | socket | unknown (nccl_transport)
    gdr: dict[str, bool] = field(default_factory=dict)  # HCA -> GPUDirect RDMA enabled
    env: dict[str, str] = field(default_factory=dict)  # NCCL_X -> value, as NCCL read it
    bootstrap: tuple[tuple[str, str], ...] = ()  # (iface, address)
    ib_devices: tuple[str, ...] = ()  # "mlx5_0:1/RoCE"
    oob: tuple[str, str] | None = None  # NET/IB's out-of-band (iface, address)
    socket_ifaces: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    completion_errors: tuple[IbCompletionError, ...] = ()
    init_complete: bool = False
    hosts: tuple[str, ...] = ()
    nccl_lines: tuple[str, ...] = ()  # every NCCL line seen, in order (the caller keeps the tail)

    @property
    def gid_index(self) -> int | None:
        v = self.env.get("NCCL_IB_GID_INDEX")
        return int(v) if v is not None and re.fullmatch(r"-?\d+", v) else None

    @property
    def gdr_enabled(self) -> bool | None:
        if self.transport == NcclTransport.GDRDMA:
            return True
        return None if not self.gdr else all(self.gdr.values())


_PREFIX = re.compile(r"^(?P<host>[\w.\-]+):\d+:\d+ \[\d+\] ")
_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to (.*?)\.?\s*$")
_NETWORK = re.compile(r"\bUsing network (\S+)")
_GDR = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA \d+ '([^']+)'")
_BOOT = re.compile(r"\bBootstrap ?: ?Using (.*)$")
_NET_IB = re.compile(r"\bNET/IB ?: ?Using (.*?)(?:\s*;\s*OOB (\S+?):(\S+?)<\d+>)?\s*$")
_NET_SOCK = re.compile(r"\bNET/Socket ?: ?Using (.*)$")
_IFADDR = re.compile(r"(?:\[\d+\])?([\w.\-]+):([0-9A-Fa-f.:%]+?)<\d+>")
_IBDEV = re.compile(r"\[\d+\]([\w.\-]+:\d+/(?:RoCE|IB))")
_COMPLETION = re.compile(r"Got completion(?: from peer (\S+))? with (?:status=|error )(\S+?)[,\s]"
                         r"(?:.*?localGid (\S+))?(?:.*?remoteGids? ?(\S+))?")


def parse_nccl_info(lines: Iterable[str]) -> NcclInfo:
    """What the NCCL lines of one or more processes say (any prefix: vLLM, docker, mpirun tags)."""
    nccl_lines: list[str] = []
    version = network = None
    env: dict[str, str] = {}
    gdr: dict[str, bool] = {}
    boot: list[tuple[str, str]] = []
    ibdevs: list[str] = []
    oob = None
    socks: list[tuple[str, str]] = []
    warns: list[str] = []
    comps: list[IbCompletionError] = []
    hosts: list[str] = []
    init = False
    for raw in lines:
        line = _untag(raw.rstrip("\r\n"))
        if "NCCL" not in line and "nccl==" not in line:
            continue
        nccl_lines.append(line.strip())
        body = line
        if m := re.search(r"[\w.\-]+:\d+:\d+ \[\d+\] .*", line):
            body = m.group(0)
            if (h := _PREFIX.match(body)) and h.group("host") not in hosts:
                hosts.append(h.group("host"))
        if version is None and (hit := nccl_version_of_text(body)):
            version = hit[0]
        if m := _ENV.search(body):
            env[m.group(1)] = m.group(2).strip()
        if m := _NETWORK.search(body):
            network = m.group(1)
        if m := _GDR.search(body):
            gdr[m.group(2)] = m.group(1) == "Enabled"
        if m := _BOOT.search(body):
            boot += [(a, b) for a, b in _IFADDR.findall(m.group(1)) if (a, b) not in boot]
        if m := _NET_IB.search(body):
            ibdevs += [d for d in _IBDEV.findall(m.group(1)) if d not in ibdevs]
            if m.group(2):
                oob = (m.group(2), m.group(3))
        if m := _NET_SOCK.search(body):
            socks += [(a, b) for a, b in _IFADDR.findall(m.group(1)) if (a, b) not in socks]
        if "NCCL WARN" in body:
            warns.append(body.strip())
        if m := _COMPLETION.search(body):
            comps.append(IbCompletionError(m.group(2), m.group(1), m.group(3), m.group(4), body.strip()))
        if "Init COMPLETE" in body:
            init = True
    return NcclInfo(version, network, transport_of_lines(nccl_lines), gdr, env, tuple(boot), tuple(ibdevs), oob,
                    tuple(socks), tuple(warns), tuple(comps), init, tuple(hosts), tuple(nccl_lines))
