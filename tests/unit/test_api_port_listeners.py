"""``ss -ltnpH 'sport = :PORT'`` as iproute2 prints it (the rows below are real ss output, each variant as
a version of ss writes it), read by the pure parser of the ``api-port`` check; and its one command line."""

from __future__ import annotations

import pytest

from console.probes import ParseError
from console.probes.listeners import Holder, parse_listeners
from console.remote import cmdlines

# iproute2 6.x, run by the socket's owner: the process named
OWNER = 'LISTEN 0      4096         0.0.0.0:8000      0.0.0.0:*    users:(("python3",pid=1234,fd=25))\n'
# IPv6 any-address, two processes on one socket (a pre-forked server)
IPV6_TWO = ('LISTEN 0      4096            [::]:8000         [::]:*    '
            'users:(("gunicorn",pid=5678,fd=4),("gunicorn",pid=5679,fd=4))\n')
# another user's socket: ss shows this user no process; dual-stack "*"
HIDDEN = "LISTEN 0      511                *:8000            *:*          \n"
# without -H (the header), and iproute2 4.x's users:(("name",pid,fd)) without pid=/fd=
OLD = ("State      Recv-Q Send-Q Local Address:Port               Peer Address:Port\n"
       'LISTEN     0      128       :::8000                    :::*                   users:(("node",42,18))\n')
# an interface-scoped address, and the State column left out (ss -l 'state listening')
SCOPED = ("0      128     0.0.0.0%lo:8000      0.0.0.0:*\n"
          "0      128     [fe80::1%eth0]:8000      [::]:*    users:((\"vllm\",pid=77,fd=3))\n")


def test_the_command_line_is_the_filter_quoted():
    assert cmdlines.port_listeners(8000) == "ss -ltnpH 'sport = :8000'"


def test_a_listener_its_owner_sees():
    [lst] = parse_listeners(OWNER, 8000)
    assert (lst.address, lst.port, lst.holders, lst.hidden) == ("0.0.0.0", 8000, (Holder("python3", 1234),), False)


def test_ipv6_with_two_processes_and_a_hidden_one():
    six, star = parse_listeners(IPV6_TWO + HIDDEN, 8000)
    assert six.address == "[::]" and [h.pid for h in six.holders] == [5678, 5679]
    assert star.address == "*" and star.hidden


def test_old_ss_with_its_header_and_no_pid_keys():
    [lst] = parse_listeners(OLD, 8000)
    assert lst.address == "::" and lst.holders == (Holder("node", 42),)


def test_scoped_addresses_without_the_state_column():
    lo, link = parse_listeners(SCOPED, 8000)
    assert (lo.address, lo.hidden) == ("0.0.0.0", True)
    assert link.address == "[fe80::1%eth0]" and link.holders == (Holder("vllm", 77),)


def test_other_ports_nothing_and_noise():
    assert parse_listeners(OWNER.replace(":8000", ":18000"), 8000) == []  # sport matched by ss, not 8000
    assert parse_listeners("", 8000) == []  # nothing listens
    assert len(parse_listeners("ss: garbage line\n" + OWNER, 8000)) == 1  # a line that does not read costs itself
    with pytest.raises(ParseError):
        parse_listeners("Cannot open netlink socket: Permission denied\n", 8000)
    assert parse_listeners(OWNER.replace("pid=1234", "pid=99999999"), 8000)[0].hidden  # no such pid: not named
