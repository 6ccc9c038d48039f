"""``ss -ltnpH 'sport = :PORT'`` (console/remote/cmdlines/host.py ``port_listeners``): the TCP sockets listening on a
port and, where ss may show it, the process holding each (``users:(("python3",pid=4343,fd=21))``).

ss shows the process only to its owner (and root): another user's listener is a row without ``users:``.
Pure and tolerant of ss's variants: with or without the header (old ss has no ``-H``), with or without the
State column, IPv4 ``0.0.0.0:8000``, IPv6 ``[::]:8000``, any-address ``*:8000``, an interface scope
``0.0.0.0%lo:8000``, old ss's ``users:(("name",1234,5))`` (no ``pid=``), several processes on one socket.
A line that does not read costs that line only; output of which no line reads is a ``ParseError``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.probes import ParseError

_LOCAL = re.compile(r"^(?P<addr>\*|\[[0-9A-Fa-f:.%\w]*\]|[0-9A-Za-z.:_-]*?)(?:%[\w.-]+)?:(?P<port>\d{1,5})$")
_USER = re.compile(r'\("(?P<name>(?:[^"\\]|\\.)*)",(?:pid=)?(?P<pid>\d{1,10}),(?:fd=)?\d{1,10}\)')
_HEADER = re.compile(r"^\s*(?:State|Netid|Recv-Q)\b")
PID_MAX = 4_194_304


@dataclass(frozen=True)
class Holder:
    name: str  # the process name ss shows (its comm, at most 15 characters)
    pid: int


@dataclass(frozen=True)
class Listener:
    address: str  # the local address as ss writes it: 0.0.0.0, [::], *, 127.0.0.1
    port: int
    holders: tuple[Holder, ...]  # empty: ss did not show this user whose socket it is

    @property
    def hidden(self) -> bool:
        return not self.holders


def parse_listeners(text: str, port: int | None = None) -> list[Listener]:
    """The listening sockets in ss's output (on ``port`` only, when given)."""
    out: list[Listener] = []
    unread = 0
    for line in text.splitlines():
        if not line.strip() or _HEADER.match(line):
            continue
        got = _line(line)
        if got is None:
            unread += 1
            continue
        if port is None or got.port == port:
            out.append(got)
    if not out and unread:
        raise ParseError(f"ss: no listening socket read from {text.strip()[:120]!r}")
    return out


def _line(line: str) -> Listener | None:
    users = line.find("users:(")
    head, tail = (line[:users], line[users:]) if users >= 0 else (line, "")
    fields = head.split()
    for i, f in enumerate(fields):  # the local address is the first ADDR:PORT field, the peer the next
        m = _LOCAL.match(f)
        if m is None or i + 1 >= len(fields) or not fields[i + 1].endswith(":*"):
            continue
        port = int(m.group("port"))
        if not 1 <= port <= 65535:
            return None
        holders = tuple(Holder(u.group("name").replace('\\"', '"'), int(u.group("pid")))
                        for u in _USER.finditer(tail) if 1 <= int(u.group("pid")) <= PID_MAX)
        return Listener(m.group("addr"), port, tuple(dict.fromkeys(holders)))
    return None
