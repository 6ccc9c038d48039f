"""RDMA parsers on the formats in shared/reference/command-outputs.md."""

import pytest

from console.probes import ParseError
from console.probes.rdma import (
    counter_growth,
    parse_counters,
    parse_ibdev2netdev,
    parse_ibv_devinfo,
    parse_rdma_link,
    parse_show_gids,
    roce_v2_index,
)

IBDEV = """roceP2p1s0f0 port 1 ==> enP2p1s0f0np0 (Down)
roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)
rocep1s0f0 port 1 ==> enp1s0f0np0 (Down)
rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)
"""


def test_ibdev2netdev():
    rows = parse_ibdev2netdev(IBDEV)
    assert len(rows) == 4
    assert rows[3].device == "rocep1s0f1" and rows[3].netdev == "enp1s0f1np1" and rows[3].up
    assert not rows[0].up
    with pytest.raises(ParseError):
        parse_ibdev2netdev("command not found")


def test_rdma_link():
    rows = parse_rdma_link("link rocep1s0f1/1 state ACTIVE physical_state LINK_UP netdev enp1s0f1np1\n"
                           "link roceP2p1s0f1/1 state DOWN physical_state DISABLED netdev enP2p1s0f1np1\n")
    assert (rows[0].device, rows[0].port, rows[0].state, rows[0].netdev) == ("rocep1s0f1", 1, "ACTIVE", "enp1s0f1np1")
    assert rows[1].state == "DOWN" and rows[1].physical_state == "DISABLED"


DEVINFO = """hca_id:\tmlx5_0
\ttransport:\t\t\tInfiniBand (0)
\tfw_ver:\t\t\t\t40.44.1036
\tphys_port_cnt:\t\t\t1
\t\tport:\t1
\t\t\tstate:\t\t\tPORT_ACTIVE (4)
\t\t\tmax_mtu:\t\t4096 (5)
\t\t\tactive_mtu:\t\t4096 (5)
\t\t\tsm_lid:\t\t\t0
\t\t\tlink_layer:\t\tEthernet
"""


def test_ibv_devinfo():
    (p,) = parse_ibv_devinfo(DEVINFO)
    assert (p.device, p.port, p.state, p.active_mtu, p.link_layer) == ("mlx5_0", 1, "PORT_ACTIVE", 4096, "Ethernet")
    assert p.active
    (d,) = parse_ibv_devinfo(DEVINFO.replace("PORT_ACTIVE (4)", "PORT_DOWN (1)"))
    assert not d.active and d.state == "PORT_DOWN"
    with pytest.raises(ParseError):
        parse_ibv_devinfo("Failed to get IB devices list: Function not implemented")


GIDS = """DEV     PORT    INDEX   GID                                     IPv4            VER     DEV
roceP2p1s0f0    1       3       0000:0000:0000:0000:0000:ffff:c0a8:640e 192.168.100.14          v2      enP2p1s0f0np0
n_gids_found=1
"""
GIDS_FULL = """DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV
---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---
mlx5_0\t1\t0\tfe80:0000:0000:0000:5aa2:e1ff:fe4c:0b8a\t\t\tv1\tenp1s0f1np1
mlx5_0\t1\t1\tfe80:0000:0000:0000:5aa2:e1ff:fe4c:0b8a\t\t\tv2\tenp1s0f1np1
mlx5_0\t1\t2\t0000:0000:0000:0000:0000:ffff:c612:0001\t198.18.0.1  \tv1\tenp1s0f1np1
mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:c612:0001\t198.18.0.1  \tv2\tenp1s0f1np1
n_gids_found=4
"""


def test_show_gids():
    (g,) = parse_show_gids(GIDS)
    assert (g.device, g.index, g.ipv4, g.version, g.netdev) == ("roceP2p1s0f0", 3, "192.168.100.14", "v2", "enP2p1s0f0np0")
    rows = parse_show_gids(GIDS_FULL)
    assert len(rows) == 4 and rows[0].ipv4 is None and rows[0].netdev == "enp1s0f1np1"
    assert roce_v2_index(rows, "198.18.0.1") == 3
    assert roce_v2_index(rows, "198.18.0.9") is None
    assert roce_v2_index(rows, "198.18.0.1", device="mlx5_1") is None


def test_counters_and_growth():
    text = ("/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors:0\n"
            "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error:12\n"
            "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed:1\n")
    before = parse_counters(text)
    assert before == {"port_rcv_errors": 0, "symbol_error": 12, "link_downed": 1}
    after = parse_counters(text.replace("symbol_error:12", "symbol_error:40"))
    assert counter_growth(before, after) == {"symbol_error": 28}
    assert counter_growth(after, before) == {}
    with pytest.raises(ParseError):
        parse_counters("grep: /sys/class/infiniband/x: No such file or directory")
