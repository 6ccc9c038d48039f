"""Which transport NCCL chose, read from its NCCL_DEBUG=INFO lines (any prefix; the lines are the
catalogue's: ``console.catalogue.markers``).

``gdrdma``: IB/RoCE with GPUDirect RDMA (``via NET/IB/0/GDRDMA``); ``rdma``: IB/RoCE without GDR;
``socket``: TCP fallback (``via NET/Socket``, ``Using network Socket``); ``unknown``: no evidence yet.
"""

from __future__ import annotations

from collections.abc import Iterable

from console.catalogue import CHANNEL_MARKER, transport_of_text
from console.vocabulary import NcclTransport, worse_transport


def transport_of_lines(lines: Iterable[str]) -> NcclTransport:
    """The transport shown by these lines; a channel line (``via ...``) beats ``Using network``."""
    best = NcclTransport.UNKNOWN
    channel_seen = False
    for line in lines:
        t = transport_of_text(line)
        if t is None:
            continue
        is_channel = CHANNEL_MARKER in line
        if is_channel and not channel_seen:
            best, channel_seen = t, True
        elif is_channel or not channel_seen:
            best = worse(best, t) if is_channel or best != NcclTransport.UNKNOWN else t
    return best


def worse(a: str, b: str) -> NcclTransport:
    """Combine two stations' verdicts: the pair is only as good as its worst link."""
    return worse_transport(a, b)
