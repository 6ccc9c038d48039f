"""Lines of a stream, each bounded: the one line reader of both transports' ``stream``.

A station's output is outside text and a single line of it can be any length (a container printing
its whole config on one line, a binary blob). Reading it with ``readline`` either fails on a line over
the reader's limit (``asyncio``'s ``LimitOverrunError``: a local log stream failed and restarted every
~1.5 s and never got past the line) or hands back the pieces that filled asyncssh's receive window as
lines of their own (a 5 MB line became three "lines", each diagnosed). Here a line is read in chunks;
its first ``max_chars`` characters are kept, the rest only counted, and the line comes out once, at its
newline, with the visible ``sanitize`` clip mark saying how much was cut. Memory per stream stays below
``max_chars`` plus one chunk whatever the station prints.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

from console.sanitize import clip_mark

STREAM_LINE_MAX = 1 << 20  # characters of one stream line kept (1 Mi: more than any consumer keeps)
CHUNK = 1 << 16  # bytes or characters asked for per read


class LineClipper:
    """Split text fed in pieces into lines (no ``\\n``, trailing ``\\r`` dropped), each clipped to
    ``max_chars`` characters plus the clip mark."""

    def __init__(self, max_chars: int = STREAM_LINE_MAX) -> None:
        self.max_chars = max_chars
        self._parts: list[str] = []
        self._kept = 0
        self._cut = 0
        self._cut_cr = False  # the last character counted as cut is a CR (of a CRLF)

    def feed(self, chunk: str) -> list[str]:
        """The lines that ``chunk`` completes."""
        out: list[str] = []
        start = 0
        while (end := chunk.find("\n", start)) >= 0:
            self._add(chunk[start:end])
            out.append(self._take())
            start = end + 1
        if start < len(chunk):
            self._add(chunk[start:])
        return out

    def pending(self) -> bool:
        return bool(self._parts or self._cut)

    def end(self) -> list[str]:
        """The last line, when the stream ended without a newline after it."""
        return [self._take()] if self.pending() else []

    def _add(self, piece: str) -> None:
        if not piece:
            return
        room = self.max_chars - self._kept
        if len(piece) <= room:
            self._parts.append(piece)
            self._kept += len(piece)
            return
        if room > 0:
            self._parts.append(piece[:room])
            self._kept = self.max_chars
        self._cut += len(piece) - max(room, 0)
        self._cut_cr = piece.endswith("\r")

    def _take(self) -> str:
        line = "".join(self._parts)
        cut = self._cut - (1 if self._cut and self._cut_cr else 0)
        self._parts, self._kept, self._cut, self._cut_cr = [], 0, 0, False
        if cut:
            return line + clip_mark(cut)
        return line.rstrip("\r")


async def clipped_lines(read: Callable[[int], Awaitable[str]], max_chars: int = STREAM_LINE_MAX
                        ) -> AsyncIterator[str]:
    """The lines of a text stream read by ``read(n)`` (up to ``n`` characters, ``""`` at its end)."""
    lines = LineClipper(max_chars)
    while chunk := await read(CHUNK):
        for line in lines.feed(chunk):
            yield line
    for line in lines.end():
        yield line
