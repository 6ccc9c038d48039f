"""Which transport NCCL chose, read from its NCCL_DEBUG=INFO lines (any prefix).

``gdrdma``: IB/RoCE with GPUDirect RDMA (``via NET/IB/0/GDRDMA``); ``rdma``: IB/RoCE without GDR;
``socket``: TCP fallback (``via NET/Socket``, ``Using network Socket``); ``unknown``: no evidence yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from console.vocabulary import NcclTransport, worse_transport

_VIA = re.compile(r"\bvia NET/(IB|Socket)(?:/\d+)?(/GDRDMA)?")
_NETWORK = re.compile(r"\bUsing network (IB|Socket)\b")



def transport_of_line(line: str) -> str | None:
    if "NET/" not in line and "Using network" not in line:
        return None
    m = _VIA.search(line)
    if m:
        if m.group(1) == "Socket":
            return "socket"
        return "gdrdma" if m.group(2) else "rdma"
    m = _NETWORK.search(line)
    if m:
        return "socket" if m.group(1) == "Socket" else "rdma"
    return None


def transport_of_lines(lines: Iterable[str]) -> str:
    """The transport shown by these lines; a channel line (``via ...``) beats ``Using network``."""
    best = "unknown"
    channel_seen = False
    for line in lines:
        t = transport_of_line(line)
        if t is None:
            continue
        is_channel = " via NET/" in line
        if is_channel and not channel_seen:
            best, channel_seen = t, True
        elif is_channel or not channel_seen:
            best = worse(best, t) if is_channel or best != "unknown" else t
    return best


def worse(a: str, b: str) -> NcclTransport:
    """Combine two stations' verdicts: the pair is only as good as its worst link."""
    return worse_transport(a, b)
