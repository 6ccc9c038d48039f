"""The console runs on this station: commands are local subprocesses (no SSH), with the same
contract as the SSH transport: a timeout ends the command's whole process group, each output stream
is read up to a cap (``console.remote.bounded``) and a cut says so, a stream's lines are clipped as
over SSH."""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from types import FrameType

from console.config import Station
from console.remote.bounded import DEFAULT_MAX_BYTES, read_both
from console.remote.lines import clipped_lines
from console.remote.results import CommandResult, CommandTimeout


class LocalTransport:
    """The console runs on this station: commands are local subprocesses (no SSH)."""

    def __init__(self, station: Station, command_timeout: float = 30.0, env: dict[str, str] | None = None):
        self.station = station
        self.command_timeout = command_timeout
        self.env = env

    connected = True

    def drop(self) -> None:
        return None

    async def run(self, command: str, timeout: float | None = None, input: str | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> CommandResult:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=self.env,
        )
        _LIVE.add(proc.pid)
        limit = timeout or self.command_timeout

        async def collect() -> tuple[str, str, bool]:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            if input:
                proc.stdin.write(input.encode())
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            # at the cap the rest is never read: the command (its whole group) ends there
            out, err, cut = await read_both(proc.stdout.read, proc.stderr.read, max_bytes, lambda: _end(proc))
            await proc.wait()
            _LIVE.discard(proc.pid)  # reaped: its pid may name another process from now on
            return out, err, cut
        try:
            out, err, cut = await asyncio.wait_for(collect(), limit)
        except TimeoutError:
            await _end(proc)
            raise CommandTimeout(f"{self.station.name}: command timed out after {limit:g} s: {command[:80]}") from None
        except BaseException:  # cancelled (or anything else): the child and its group never outlive the call
            await asyncio.shield(_end(proc))
            raise
        status = proc.returncode or 0
        return CommandResult(0 if cut and status < 0 else status, out, err, cut)

    async def stream(self, command: str) -> AsyncIterator[str]:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True, env=self.env,
        )
        _LIVE.add(proc.pid)
        try:
            assert proc.stdout is not None
            stdout, decoder = proc.stdout, codecs.getincrementaldecoder("utf-8")(errors="replace")

            async def read(n: int) -> str:  # "" only at the end (half a character decodes to "")
                while data := await stdout.read(n):
                    if text := decoder.decode(data):
                        return text
                return decoder.decode(b"", final=True)

            async for line in clipped_lines(read):  # clipped as over SSH: a giant line never stops the stream
                yield line
        finally:
            await asyncio.shield(_end(proc))

    async def close(self) -> None:
        return None


# Every local command runs in a session of its own (so that a timeout can end its whole group); a
# console killed by a signal would leave them running (a `journalctl -k -f` for ever). The groups
# alive now, for ``end_all`` on the way out.
_LIVE: set[int] = set()


def end_all() -> None:
    """Kill every local command's group still running (the console is going away)."""
    for pgid in list(_LIVE):
        _killpg(pgid)
    _LIVE.clear()


def install_reaper() -> None:
    """On SIGHUP (the terminal went away) or SIGTERM, and at a normal exit: no local command outlives
    the console. The signal's own effect follows (the process ends as it would have)."""
    atexit.register(end_all)
    for sig in (signal.SIGHUP, signal.SIGTERM):
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: FrameType | None, previous=previous) -> None:
            end_all()
            if callable(previous):
                previous(signum, frame)
            else:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)
        signal.signal(sig, handler)


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Kill a local command's process group (it runs in a session of its own) and reap it."""
    _LIVE.discard(proc.pid)
    if proc.returncode is None:
        _killpg(proc.pid)
    with contextlib.suppress(Exception):
        await asyncio.wait_for(proc.wait(), 2)


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
