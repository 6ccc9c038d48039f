"""Which transport NCCL chose, read from its NCCL_DEBUG=INFO lines (any prefix; the lines are the
catalogue's: ``console.catalogue.markers``).

``gdrdma``: IB/RoCE with GPUDirect RDMA (``via NET/IB/0/GDRDMA``); ``rdma``: IB/RoCE without GDR;
``socket``: TCP fallback (``via NET/Socket``, ``Using network Socket``); ``unknown``: no evidence yet.
"""

from __future__ import annotations

from collections.abc import Iterable

from console.catalogue import CHANNEL_MARKER, transport_of_text
from console.vocabulary import NcclTransport, worse_transport


class TransportTally:
    """The transport a run's lines show so far, told one line at a time (a follower keeps no lines for
    it): a channel line (``via ...``) beats ``Using network``; among channels, or among hints before any
    channel, the worse wins."""

    def __init__(self) -> None:
        self.best = NcclTransport.UNKNOWN
        self.channel_seen = False

    def add(self, t: NcclTransport, is_channel: bool) -> None:
        if is_channel and not self.channel_seen:
            self.best, self.channel_seen = t, True
        elif is_channel or not self.channel_seen:
            self.best = worse(self.best, t) if is_channel or self.best != NcclTransport.UNKNOWN else t


def transport_of_lines(lines: Iterable[str]) -> NcclTransport:
    """The transport shown by these lines; a channel line (``via ...``) beats ``Using network``."""
    tally = TransportTally()
    for line in lines:
        t = transport_of_text(line)
        if t is not None:
            tally.add(t, CHANNEL_MARKER in line)
    return tally.best


def worse(a: str, b: str) -> NcclTransport:
    """Combine two stations' verdicts: the pair is only as good as its worst link."""
    return worse_transport(a, b)
