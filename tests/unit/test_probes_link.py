"""Link parsers on the real formats (shared/reference/command-outputs.md and captured iputils output)."""

import pytest

from console.probes import ParseError
from console.probes.ethtool import parse_ethtool
from console.probes.iproute import parse_ipv4_addrs, parse_link, parse_mtu, parse_route_get
from console.probes.ping import jumbo_payload, parse_ping

ETHTOOL_UP = """Settings for enp1s0f1np1:
\tSupported ports: [ FIBRE ]
\tSpeed: 400000Mb/s
\tDuplex: Full
\tAuto-negotiation: on
\tLink detected: yes
"""


def test_ethtool_speeds_and_link():
    r = parse_ethtool(ETHTOOL_UP)
    assert (r.iface, r.speed_mbps, r.link_detected) == ("enp1s0f1np1", 400000, True)
    assert parse_ethtool("\tSpeed: 400Gb/s\n\tLink detected: yes\n").speed_mbps == 400000
    assert parse_ethtool("\tSpeed: 200000Mb/s\n").speed_mbps == 200000
    down = parse_ethtool("Settings for x:\n\tSpeed: Unknown!\n\tLink detected: no\n")
    assert down.speed_mbps is None and down.speed_text == "Unknown!" and down.link_detected is False
    hot = parse_ethtool("\tSpeed: Unknown!\n\tLink detected: no (Overheat)\n")
    assert hot.link_detected is False and hot.link_note == "Overheat"


def test_ethtool_garbage_is_a_parse_error():
    with pytest.raises(ParseError):
        parse_ethtool("ethtool: bad command line argument(s)")


def test_ip_link_mtu_and_carrier():
    up = ("6: enp1s0f1np1@if5: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue state UP mode DEFAULT "
          "group default qlen 1000\\    link/ether a2:a9:dd:3f:67:38 brd ff:ff:ff:ff:ff:ff link-netns t1b")
    li = parse_link(up)
    assert (li.iface, li.mtu, li.state, li.carrier) == ("enp1s0f1np1", 9000, "UP", True)
    nc = parse_link("6: enp1s0f1np1@if5: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500 qdisc noqueue state DOWN mode")
    assert nc.mtu == 1500 and not nc.carrier and nc.admin_up
    assert parse_mtu("9000\n") == 9000
    with pytest.raises(ParseError):
        parse_mtu('Device "enp9" does not exist.')


def test_route_get_and_addrs():
    r = parse_route_get("198.18.250.2 dev enp1s0f1np1 src 198.18.250.1 uid 0 \n    cache \n")
    assert (r.dest, r.dev, r.src, r.via, r.kind) == ("198.18.250.2", "enp1s0f1np1", "198.18.250.1", None, None)
    r2 = parse_route_get("198.18.0.2 via 10.0.0.1 dev eth0 src 10.0.0.5 uid 0\n")
    assert r2.dev == "eth0" and r2.via == "10.0.0.1"
    assert parse_route_get("RTNETLINK answers: Network is unreachable\n").kind == "Network is unreachable"
    addrs = parse_ipv4_addrs("6: enp1s0f1np1    inet 198.18.250.1/30 scope global enp1s0f1np1\\       valid_lft")
    assert addrs == ["198.18.250.1"]


PING_OK = """PING 198.18.250.2 (198.18.250.2) from 198.18.250.1 enp1s0f1np1: 8972(9000) bytes of data.
8980 bytes from 198.18.250.2: icmp_seq=1 ttl=64 time=0.781 ms
8980 bytes from 198.18.250.2: icmp_seq=2 ttl=64 time=0.062 ms
8980 bytes from 198.18.250.2: icmp_seq=3 ttl=64 time=0.127 ms

--- 198.18.250.2 ping statistics ---
3 packets transmitted, 3 received, 0% packet loss, time 409ms
rtt min/avg/max/mdev = 0.062/0.323/0.781/0.324 ms
"""
PING_LOCAL = """PING 198.18.250.1 (198.18.250.1) from 198.18.250.2 t1rb: 8972(9000) bytes of data.
ping: local error: message too long, mtu=1500
ping: local error: message too long, mtu=1500
ping: local error: message too long, mtu=1500

--- 198.18.250.1 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 406ms
"""
PING_FRAG = """PING 192.168.100.2 (192.168.100.2) from 192.168.100.1 enp1s0f1np1: 8972(9000) bytes of data.
From 192.168.100.2 icmp_seq=1 Frag needed and DF set (mtu = 1500)

--- 192.168.100.2 ping statistics ---
3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2041ms
"""
PING_SILENT = """PING 198.18.250.2 (198.18.250.2) from 198.18.250.1 enp1s0f1np1: 8972(9000) bytes of data.

--- 198.18.250.2 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 2040ms
"""
PING_NOBUF = """PING 198.18.250.2 (198.18.250.2) from 198.18.250.1 t1ra: 8972(9000) bytes of data.
ping: sendmsg: No buffer space available
ping: sendmsg: No buffer space available

--- 198.18.250.2 ping statistics ---
3 packets transmitted, 0 received, 100% packet loss, time 2219ms
"""


def test_ping_success():
    r = parse_ping(PING_OK)
    assert r.ok and r.received == 3 and r.rtt_avg_ms == pytest.approx(0.323) and r.packet_bytes == 9000


@pytest.mark.parametrize("text,failure,mtu", [
    (PING_LOCAL, "local-mtu", 1500),
    (PING_FRAG, "frag-needed", 1500),
    (PING_SILENT, "loss", None),
    (PING_NOBUF, "no-buffer", None),
])
def test_ping_failure_forms(text, failure, mtu):
    r = parse_ping(text)
    assert not r.ok and r.failure == failure and r.mtu_reported == mtu and r.loss_pct == 100.0


def test_ping_partial_loss_and_errors_count():
    r = parse_ping(PING_OK.replace("3 received, 0% packet loss", "2 received, 33.3333% packet loss"))
    assert r.failure == "partial-loss"
    assert parse_ping(PING_LOCAL).errors == 3


def test_ping_without_statistics():
    r = parse_ping("ping: connect: Network is unreachable\n")
    assert r.failure == "no-route"
    with pytest.raises(ParseError):
        parse_ping("something else")


def test_jumbo_payload():
    assert jumbo_payload(9000) == 8972 and jumbo_payload(1500) == 1472
