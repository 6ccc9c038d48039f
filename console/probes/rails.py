"""One round of the rails loop (``cmdlines.health_stream``'s ``R`` lines, ``rails_once``): ``KEY VALUE`` lines read from sysfs by
shell builtins, ``-`` for a file that could not be read, then ``@@``.

Keys: ``NETDEV.LEAF`` for ``/sys/class/net/NETDEV/{operstate,carrier,speed,mtu,carrier_changes}``
and ``/sys/class/net/NETDEV/statistics/{rx,tx}_{errors,dropped}``; ``NETDEV.ib.NAME`` for the RDMA
port's ``/sys/class/infiniband/DEV/ports/1/state`` and ``hw_counters/NAME`` (mlx5's RoCE counters:
out_of_sequence, local_ack_timeout_err, packet_seq_err, np_ecn_marked_roce_packets, rp_cnp_handled).
Variants: ``speed`` of a link that is down reads ``-1`` or fails with EINVAL (``-``); ``carrier``
of an interface that is administratively down fails too; the RDMA port ``state`` reads
``4: ACTIVE`` / ``1: DOWN``; a counter the NIC does not have is ``-`` (missing, never zero);
CRLF and padding are tolerated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NET_LEAVES = ("operstate", "carrier", "speed", "mtu", "carrier_changes")
NET_STATS = ("rx_errors", "tx_errors", "rx_dropped", "tx_dropped")
IB_COUNTERS = ("out_of_sequence", "local_ack_timeout_err", "packet_seq_err", "np_ecn_marked_roce_packets",
               "rp_cnp_handled")
#: the counters whose rise is an error (the ECN/CNP marks are congestion, shown beside them)
ERROR_COUNTERS = NET_STATS + ("out_of_sequence", "local_ack_timeout_err", "packet_seq_err")
CONGESTION_COUNTERS = ("np_ecn_marked_roce_packets", "rp_cnp_handled")
END = "@@"


@dataclass(frozen=True)
class RailReading:
    netdev: str
    operstate: str | None = None  # up | down | lowerlayerdown | unknown ...
    carrier: bool | None = None
    speed_mbps: int | None = None  # None: not known (down, or unreadable)
    mtu: int | None = None
    carrier_changes: int | None = None
    port_state: str | None = None  # the RDMA port: ACTIVE | DOWN | INIT ...
    counters: dict[str, int] = field(default_factory=dict)  # only those read

    @property
    def up(self) -> bool | None:
        """Link up: carrier when read, else operstate; None when neither says."""
        if self.carrier is not None:
            return self.carrier
        if self.operstate in ("up", "down", "lowerlayerdown", "dormant", "notpresent"):
            return self.operstate == "up"
        return None


U64 = (0, 2**64 - 1)  # a kernel counter
SPEED_MBPS = (1, 10_000_000)  # sysfs speed: 10 Tb/s is no link today (a 2^64 speed is no reading)
MTU = (68, 1 << 20)


def _int(value: str, limits: tuple[int, int] = U64) -> int | None:
    """A sysfs number in its range, or None (a hostile or broken read: negative, huge, not a number)."""
    v = value.strip()
    if not v or len(v) > 24:
        return None
    try:
        n = int(v)
    except ValueError:
        return None
    return n if limits[0] <= n <= limits[1] else None


def parse_round(lines: list[str], netdevs: list[str]) -> dict[str, RailReading]:
    """The readings of one round, by netdev (every netdev asked for, even when nothing was readable)."""
    raw: dict[str, dict[str, str]] = {n: {} for n in netdevs}
    for line in lines:
        line = line.strip()
        if line.startswith("R "):  # the tag of the health stream (cmdlines.health_stream)
            line = line[2:]
        key, _, value = line.partition(" ")
        netdev, _, leaf = key.partition(".")
        if netdev in raw and leaf:
            raw[netdev][leaf] = value.strip()
    out = {}
    for netdev, kv in raw.items():
        def get(k: str, kv: dict[str, str] = kv) -> str | None:
            v = kv.get(k)
            return None if v is None or v in ("-", "") else v

        speed = _int(get("speed") or "", SPEED_MBPS)
        carrier = get("carrier")
        port = get("ib.state")
        counters = {}
        for name in NET_STATS + tuple("ib." + c for c in IB_COUNTERS):
            v = _int(get(name) or "")
            if v is not None:
                counters[name.removeprefix("ib.")] = v
        out[netdev] = RailReading(
            netdev, operstate=(get("operstate") or "").lower() or None,
            carrier=None if carrier is None else carrier == "1",
            speed_mbps=speed, mtu=_int(get("mtu") or "", MTU),
            carrier_changes=_int(get("carrier_changes") or ""),
            port_state=port.split(":", 1)[-1].strip().upper() if port else None, counters=counters)
    return out
