"""A loopback port on which every connection is refused, for the whole test process.

Binding port 0 and closing the socket at once is not enough once tests run in parallel: the port is
free again, and another worker's server can be given it and answer. A socket bound and never
listening holds the port (the kernel hands it to no one else) and a connection to it is refused."""

from __future__ import annotations

import socket

_held: list[socket.socket] = []  # closed when the process ends


def refused_port(host: str = "127.0.0.1") -> int:
    s = socket.socket()
    s.bind((host, 0))
    _held.append(s)
    return s.getsockname()[1]
