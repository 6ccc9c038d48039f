"""The link checks' command lines: the rail interfaces (``ip``, ``ethtool``, a jumbo ping), RDMA
devices and counters, SSH between stations, and the perftest pair (``ib_write_bw``/``ib_write_lat``)."""

from __future__ import annotations

import shlex

from console.remote.cmdlines.host import station_path

q = shlex.quote


RDMA_SYSFS = "/sys/class/infiniband"


RDMA_COUNTER_NAMES = ("port_rcv_errors", "port_xmit_discards", "symbol_error", "link_error_recovery", "link_downed")


def ethtool(iface: str) -> str:
    return f"ethtool {q(iface)}"


def ip_link(iface: str) -> str:
    return f"ip -o link show dev {q(iface)}"


def ip_addr4(iface: str) -> str:
    return f"ip -o -4 addr show dev {q(iface)}"


def route_get(peer: str) -> str:
    return f"ip route get {q(peer)}"


def jumbo_ping(iface: str, peer: str, payload: int, count: int = 3) -> str:
    """DF set (``-M do``): a too-small MTU anywhere on the path fails instead of fragmenting."""
    return f"ping -M do -s {int(payload)} -c {int(count)} -i 0.2 -W 1 -I {q(iface)} {q(peer)} 2>&1"


def ibdev2netdev() -> str:
    return "ibdev2netdev"


def rdma_link() -> str:
    return "rdma link show"


def ibv_devinfo(device: str) -> str:
    return f"ibv_devinfo -d {q(device)}"


def show_gids(device: str) -> str:
    return f"show_gids {q(device)}"


def rdma_counters(device: str, port: int = 1) -> str:
    d = station_path(f"{RDMA_SYSFS}/{device}/ports/{int(port)}/counters")
    return f"cd {d} && grep -H . {' '.join(RDMA_COUNTER_NAMES)}"


def ssh_peer(peer: str, connect_timeout_s: int = 5) -> str:
    """Passwordless login from this station to ``peer`` as the same user, the way the launch
    scripts do it (BatchMode: a password or host-key prompt is a failure, never a hang). ``--``
    ends ssh's options: a peer like ``-oProxyCommand=...`` is a host name, never an option."""
    return f"ssh -o BatchMode=yes -o ConnectTimeout={int(connect_timeout_s)} -- {q(peer)} id -un"


def _perftest_args(device: str, gid_index: int | None, extra: list[str] | None, port: int) -> list[str]:
    args = ["ib_write_bw", "-d", device, "-F", "--report_gbits", "-p", str(int(port))]
    if gid_index is not None:
        args += ["-x", str(int(gid_index))]
    args += list(extra or [])
    if any(a.startswith("--use_cuda") for a in args):
        # CUDA numbers GPUs fastest-first by default; nvidia-smi (whose index we pass) in PCI order.
        args = ["env", "CUDA_DEVICE_ORDER=PCI_BUS_ID"] + args
    return args


def perftest_server(device: str, gid_index: int | None, extra: list[str] | None = None, port: int = 18515) -> str:
    """Print the shell's pid (for a precise cleanup), then become the ib_write_bw server."""
    return "echo PID $$; exec " + " ".join(q(a) for a in _perftest_args(device, gid_index, extra, port))


def perftest_client(device: str, server_ip: str, gid_index: int | None, extra: list[str] | None = None,
                    port: int = 18515) -> str:
    args = _perftest_args(device, gid_index, extra, port) + [server_ip]
    return " ".join(q(a) for a in args) + " 2>&1"


def ip_addrs4() -> str:
    """Every interface's IPv4 addresses (``N: IFACE    inet A/P ...``)."""
    return "ip -o -4 addr show"


def perftest_lat_server(device: str, gid_index: int | None, port: int) -> str:
    args = ["ib_write_lat", "-d", device, "-F", "-p", str(int(port))] + (
        ["-x", str(int(gid_index))] if gid_index is not None else [])
    return "echo PID $$; exec " + " ".join(q(a) for a in args)


def perftest_lat_client(device: str, server_ip: str, gid_index: int | None, port: int) -> str:
    args = ["ib_write_lat", "-d", device, "-F", "-p", str(int(port))] + (
        ["-x", str(int(gid_index))] if gid_index is not None else []) + [server_ip]
    return " ".join(q(a) for a in args) + " 2>&1"


def rdma_statistic(device: str, port: int = 1) -> str:
    return f"rdma statistic show link {q(f'{device}/{int(port)}')}"


def ethtool_stats(iface: str) -> str:
    return f"ethtool -S {q(iface)}"


NET_SYSFS = "/sys/class/net"
