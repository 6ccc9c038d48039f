"""RDMA / RoCE tools: ``ibdev2netdev``, ``rdma link``, ``ibv_devinfo -d DEV``, ``show_gids`` and the
port error counters under ``/sys/class/infiniband/DEV/ports/PORT/counters``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError


@dataclass(frozen=True)
class DevMap:
    device: str
    port: int
    netdev: str
    up: bool


_IBDEV = re.compile(r"^(?P<dev>\S+) port (?P<port>\d+) ==> (?P<net>\S+) \((?P<state>\w+)\)\s*$", re.M)


def parse_ibdev2netdev(text: str) -> list[DevMap]:
    rows = [DevMap(m.group("dev"), int(m.group("port")), m.group("net"), m.group("state") == "Up")
            for m in _IBDEV.finditer(text)]
    if not rows and text.strip():
        raise ParseError(f"ibdev2netdev: no 'DEV port N ==> NETDEV (State)' line in {text.strip()[:120]!r}")
    return rows


@dataclass(frozen=True)
class RdmaLink:
    device: str
    port: int
    state: str  # ACTIVE, DOWN, INIT, ...
    physical_state: str  # LINK_UP, DISABLED, POLLING, ...
    netdev: str | None


_RDMA_LINK = re.compile(r"^link (?P<dev>[^/\s]+)/(?P<port>\d+) state (?P<state>\S+) physical_state (?P<phys>\S+)"
                        r"(?: netdev (?P<net>\S+))?", re.M)


def parse_rdma_link(text: str) -> list[RdmaLink]:
    rows = [RdmaLink(m.group("dev"), int(m.group("port")), m.group("state"), m.group("phys"), m.group("net"))
            for m in _RDMA_LINK.finditer(text)]
    if not rows and text.strip():
        raise ParseError(f"rdma link: no 'link DEV/PORT state ...' line in {text.strip()[:120]!r}")
    return rows


@dataclass(frozen=True)
class PortInfo:
    device: str | None
    port: int
    state: str  # PORT_ACTIVE, PORT_DOWN, PORT_INIT, ...
    active_mtu: int | None
    link_layer: str | None

    @property
    def active(self) -> bool:
        return self.state == "PORT_ACTIVE"


def parse_ibv_devinfo(text: str) -> list[PortInfo]:
    """Ports of ``ibv_devinfo [-d DEV]`` (tab-indented ``key:<tabs>value`` lines)."""
    ports: list[PortInfo] = []
    device = None
    cur: dict[str, str] | None = None

    def flush() -> None:
        if cur is not None:
            mtu = re.match(r"(\d+)", cur.get("active_mtu", ""))
            state = re.match(r"(\S+)", cur.get("state", ""))
            ports.append(PortInfo(device, int(cur["port"]), state.group(1) if state else "UNKNOWN",
                                  int(mtu.group(1)) if mtu else None, cur.get("link_layer")))

    for raw in text.splitlines():
        line = raw.strip()
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            flush()
            cur, device = None, value
        elif key == "port":
            flush()
            cur = {"port": value}
        elif cur is not None:
            cur[key] = value
    flush()
    if not ports:
        raise ParseError(f"ibv_devinfo: no 'port:' block in {text.strip()[:120]!r}")
    return ports


@dataclass(frozen=True)
class Gid:
    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None
    version: str  # v1 | v2
    netdev: str | None


def parse_show_gids(text: str) -> list[Gid]:
    rows: list[Gid] = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 5 or not f[1].isdigit() or not f[2].isdigit():
            continue  # header, "---" separator, n_gids_found=N
        ver_at = next((i for i, w in enumerate(f) if re.fullmatch(r"v\d", w)), None)
        if ver_at is None:
            continue
        ipv4 = next((w for w in f[4:ver_at] if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", w)), None)
        rows.append(Gid(f[0], int(f[1]), int(f[2]), f[3], ipv4, f[ver_at],
                        f[ver_at + 1] if len(f) > ver_at + 1 else None))
    if not rows and "n_gids_found" not in text:
        raise ParseError(f"show_gids: no GID rows in {text.strip()[:120]!r}")
    return rows


def roce_v2_index(gids: list[Gid], ipv4: str, device: str | None = None) -> int | None:
    """The RoCE v2 GID index carrying ``ipv4`` (what ``NCCL_IB_GID_INDEX`` must be)."""
    for g in gids:
        if g.ipv4 == ipv4 and g.version == "v2" and (device is None or g.device == device):
            return g.index
    return None


ERROR_COUNTERS = ("port_rcv_errors", "port_xmit_discards", "symbol_error", "link_error_recovery", "link_downed")


def parse_counters(text: str) -> dict[str, int]:
    """``grep -H . DIR/counters/NAME ...`` -> {NAME: value}; also accepts ``NAME VALUE`` lines."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^(?:.*/)?(?P<name>[A-Za-z_]+)[:\s]\s*(?P<v>\d+)\s*$", line.strip())
        if m:
            out[m.group("name")] = int(m.group("v"))
    if not out:
        raise ParseError(f"port counters: no 'name:value' lines in {text.strip()[:120]!r}")
    return out


def counter_growth(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """Counters that grew between two reads (a counter reset reads as no growth)."""
    return {k: after[k] - before[k] for k in after if k in before and after[k] > before[k]}
