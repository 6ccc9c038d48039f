"""Pair identity, pure: ``ip -j neigh`` in every shape iproute2 prints (6.1 without ``dev``, an
unresolved entry without ``lladdr``, ``state`` as a word or a list), and the judge that calls two
stations one machine on a shared machine-id, GPU UUID, host key, or the rail MAC seen for the peer."""

from __future__ import annotations

import pytest

from console.probes import ParseError
from console.probes.identity import (
    Identity,
    gpu_uuids,
    machine_id,
    neighbour_mac,
    parse_neigh_json,
    same_machine,
)

# iproute2 6.1 (Debian 12), `ip -j neigh show to 192.168.100.11 dev enp1s0f1np1`: no "dev" key
NEIGH_61 = '[{"dst":"192.168.100.11","lladdr":"58:A2:E1:0c:11:22","state":["REACHABLE"]}]'
# iproute2 5.15 / 6.8 without a device filter: "dev" present; one entry never resolved
NEIGH_FULL = ('[{"dst":"192.168.100.11","dev":"enp1s0f1np1","lladdr":"58:a2:e1:0c:11:22","state":["STALE"]},'
              '{"dst":"10.0.0.9","dev":"eno1","state":["FAILED"]},{"dst":"10.0.0.8","dev":"eno1",'
              '"lladdr":"aa:bb:cc:dd:ee:ff","router":null,"state":"PERMANENT"}]')


def test_neigh_without_dev_is_read_and_matched_on_the_queried_device():
    (n,) = parse_neigh_json(NEIGH_61)
    assert n.dev is None and n.lladdr == "58:a2:e1:0c:11:22" and n.state == ("REACHABLE",)
    assert neighbour_mac([n], "192.168.100.11", "enp1s0f1np1") == "58:a2:e1:0c:11:22"


def test_neigh_with_dev_unresolved_and_state_word():
    rows = parse_neigh_json(NEIGH_FULL)
    assert [r.dev for r in rows] == ["enp1s0f1np1", "eno1", "eno1"]
    assert rows[1].lladdr is None and rows[1].state == ("FAILED",) and rows[2].state == ("PERMANENT",)
    assert neighbour_mac(rows, "192.168.100.11", "enp1s0f1np1") == "58:a2:e1:0c:11:22"
    assert neighbour_mac(rows, "192.168.100.11", "eno1") is None  # another device's entry is not the rail's
    assert neighbour_mac(rows, "10.0.0.9") is None  # never resolved: no MAC invented
    assert parse_neigh_json("") == [] and parse_neigh_json("[]") == []
    with pytest.raises(ParseError):
        parse_neigh_json("192.168.100.11 dev enp1s0f1np1 lladdr 58:a2:e1:0c:11:22 REACHABLE")


def test_same_machine_reasons_and_unread_marks_decide_nothing():
    uu = "GPU-12345678-aaaa-bbbb-cccc-1234567890ab"
    a = Identity("A", "0" * 31 + "1", "ED25519 SHA256:abc", frozenset({uu}), "58:a2:e1:00:00:01")
    b = Identity("B", "0" * 31 + "1", "ED25519 SHA256:abc", frozenset({uu}), "58:a2:e1:00:00:02")
    why = same_machine(a, b, b_mac_seen_from_a="58:a2:e1:00:00:01")
    assert len(why) == 4 and "machine-id" in why[0] and uu in why[1] and "host key" in why[2] and "own rail MAC" in why[3]
    other = Identity("B", "f" * 32, "ED25519 SHA256:xyz", frozenset({"GPU-87654321-aaaa-bbbb-cccc-1234567890ab"}))
    assert same_machine(a, other, "58:a2:e1:00:00:02") == []
    assert same_machine(Identity("A"), Identity("B")) == []  # nothing read is not "the same"
    assert machine_id("not-an-id\n") is None and machine_id("ABCDEF0123456789abcdef0123456789\n") is not None
    assert gpu_uuids(f"0, {uu}, NVIDIA GB10\n[N/A], junk\n") == frozenset({uu})
