"""Bounded reads of a one-shot command's output: a station that answers with 400 MB (a kernel log, a
py-spy dump gone wrong) costs the console at most a cap, read at the source (the channel or the pipe),
and the result says where it was cut. Both transports' ``run`` read through here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from console.tasks import gather_owned

DEFAULT_MAX_BYTES = 8 * 1024 * 1024  # per stream (stdout, stderr) of one one-shot command
CHUNK = 64 * 1024


def cut_words(limit: int) -> str:
    """The line a cut output ends with (its own line, so a parser reads it as no row)."""
    return f"[output cut at {limit} bytes by the console: the rest was not read]"


async def read_capped(read: Callable[[int], Awaitable[bytes]], limit: int) -> tuple[bytes, bool]:
    """Everything ``read`` gives up to ``limit`` bytes; (data, True) when there was more (not read)."""
    parts: list[bytes] = []
    n = 0
    while True:
        chunk = await read(CHUNK)
        if not chunk:
            return b"".join(parts), False
        if n + len(chunk) > limit:
            parts.append(chunk[: limit - n])
            return b"".join(parts), True
        parts.append(chunk)
        n += len(chunk)


def decoded(data: bytes, cut: bool, limit: int) -> str:
    """Bytes as text (bad UTF-8 replaced; half a character at a cut dropped), with the cut said."""
    text = data.decode("utf-8", errors="replace")
    if not cut:
        return text
    if text.endswith("\ufffd"):
        text = text.rstrip("\ufffd")
    return text + ("" if text.endswith("\n") or not text else "\n") + cut_words(limit) + "\n"


async def read_both(out: Callable[[int], Awaitable[bytes]], err: Callable[[int], Awaitable[bytes]],
                    limit: int, stop: Callable[[], Awaitable[None]]) -> tuple[str, str, bool]:
    """stdout and stderr read at once (a command filling one pipe never waits on the other), each
    capped at ``limit``; at a cap ``stop`` ends the command (the other stream then ends too):
    (stdout, stderr, cut)."""
    async def one(read: Callable[[int], Awaitable[bytes]]) -> tuple[bytes, bool]:
        data, cut = await read_capped(read, limit)
        if cut:
            await stop()
        return data, cut

    (o, cut_o), (e, cut_e) = await gather_owned(one(out), one(err))
    return decoded(o, cut_o, limit), decoded(e, cut_e, limit), cut_o or cut_e
