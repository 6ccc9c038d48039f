"""The only code that talks to stations: SSH (asyncssh) or local subprocesses.

One SSH connection per host, many channels, capped by a semaphore below OpenSSH's default
``MaxSessions`` (10). Host keys are checked strictly against known_hosts: an unknown or changed
key is refused with its fingerprint, and trusting it is an explicit step (``trust_host_key``).
Long-lived streams run with a PTY so sshd hangs up the remote process when we close the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from console.config import Station

MAX_CHANNELS = 8
KEEPALIVE_S = 10


@dataclass(frozen=True)
class CommandResult:
    exit_status: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


class TransportError(Exception):
    """A station could not be reached or a command could not run; the message is one line."""


class Unreachable(TransportError):
    pass


class CommandTimeout(TransportError):
    pass


class HostKeyError(TransportError):
    def __init__(self, station: str, host: str, port: int, fingerprint: str | None, known_hosts: str):
        self.station, self.host, self.port = station, host, port
        self.fingerprint = fingerprint
        self.known_hosts = known_hosts
        fp = fingerprint or "unknown fingerprint (key could not be fetched)"
        super().__init__(
            f"host key of {station} ({host}:{port}) is not trusted (unknown or changed): {fp}; "
            f"verify it, then trust it (--trust-host-key, or T in the console) to add it to {known_hosts}"
        )


class Transport(Protocol):
    station: Station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None) -> CommandResult: ...

    def stream(self, command: str) -> AsyncIterator[str]: ...

    async def close(self) -> None: ...


def default_known_hosts() -> str:
    return str(Path("~/.ssh/known_hosts").expanduser())


class SSHTransport:
    """asyncssh client for one station: one connection, channels capped by a semaphore."""

    def __init__(self, station: Station, connect_timeout: float = 10.0, command_timeout: float = 30.0):
        self.station = station
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = asyncio.Lock()
        self._sem = asyncio.Semaphore(MAX_CHANNELS)
        self.connects = 0  # how many connections were opened (for tests and the status line)

    @property
    def known_hosts(self) -> str:
        return str(Path(self.station.known_hosts).expanduser()) if self.station.known_hosts else default_known_hosts()

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def _options(self) -> dict:
        opts: dict = {
            "known_hosts": self.known_hosts,
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": KEEPALIVE_S,
            "keepalive_count_max": 3,
            "agent_forwarding": False,
        }
        if self.station.port:
            opts["port"] = self.station.port
        if self.station.user:
            opts["username"] = self.station.user
        if self.station.identity_file:
            opts["client_keys"] = [str(Path(self.station.identity_file).expanduser())]
        return opts

    async def connect(self) -> asyncssh.SSHClientConnection:
        async with self._lock:
            if self._conn is not None:
                return self._conn
            try:
                conn = await asyncio.wait_for(
                    asyncssh.connect(self.station.host, **self._options()), self.connect_timeout + 1
                )
            except asyncssh.HostKeyNotVerifiable:
                fp = await self._fetch_fingerprint()
                raise HostKeyError(self.station.name, self.station.host, self.station.port or 22, fp,
                                   self.known_hosts) from None
            except asyncssh.PermissionDenied as exc:
                raise Unreachable(f"{self.station.name}: SSH login refused ({exc.reason})") from None
            except TimeoutError:
                raise Unreachable(f"{self.station.name}: no answer from {self.station.host} "
                                  f"within {self.connect_timeout:g} s") from None
            except (OSError, asyncssh.Error) as exc:
                raise Unreachable(f"{self.station.name}: cannot connect to {self.station.host}: "
                                  f"{_one_line(exc)}") from None
            self._conn = conn
            self.connects += 1
            return conn

    async def _fetch_fingerprint(self) -> str | None:
        key = await self._fetch_key()
        return key.get_fingerprint("sha256") if key else None

    async def _fetch_key(self) -> asyncssh.SSHKey | None:
        with contextlib.suppress(Exception):
            opts = {"port": self.station.port} if self.station.port else {}
            return await asyncio.wait_for(
                asyncssh.get_server_host_key(self.station.host, **opts), self.connect_timeout
            )
        return None

    async def trust_host_key(self, expected_fingerprint: str | None = None) -> str:
        """Append the station's current host key to known_hosts; returns its fingerprint.

        With ``expected_fingerprint`` the key is only trusted if it still matches what the
        operator was shown (no key swap between showing and trusting).
        """
        key = await self._fetch_key()
        if key is None:
            raise Unreachable(f"{self.station.name}: cannot fetch the host key from {self.station.host}")
        fp = key.get_fingerprint("sha256")
        if expected_fingerprint and fp != expected_fingerprint:
            raise HostKeyError(self.station.name, self.station.host, self.station.port or 22, fp, self.known_hosts)
        port = self.station.port or 22
        name = self.station.host if port == 22 else f"[{self.station.host}]:{port}"
        line = f"{name} {key.export_public_key('openssh').decode().strip()}\n"
        path = Path(self.known_hosts)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(line)
        return fp

    def _lost(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def run(self, command: str, timeout: float | None = None, input: str | None = None) -> CommandResult:
        conn = await self.connect()
        limit = timeout or self.command_timeout
        async with self._sem:
            try:
                async with conn.create_process(command, encoding="utf-8", errors="replace") as proc:
                    if input is not None:
                        proc.stdin.write(input)
                    proc.stdin.write_eof()
                    try:
                        done = await asyncio.wait_for(proc.wait(check=False), limit)
                    except TimeoutError:
                        proc.kill()
                        raise CommandTimeout(f"{self.station.name}: command timed out after {limit:g} s: "
                                             f"{command[:80]}") from None
                    status = done.exit_status if done.exit_status is not None else 255
                    return CommandResult(status, str(done.stdout or ""), str(done.stderr or ""))
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError, asyncssh.ChannelOpenError) as exc:
                self._lost()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None

    async def stream(self, command: str) -> AsyncIterator[str]:
        """Lines of a long-running remote command; closing the iterator ends the remote process.

        Closing never waits more than a moment for the station: quitting the console or
        reconnecting must not hang on a peer that is slow to acknowledge the channel close.
        """
        conn = await self.connect()
        async with self._sem:
            try:
                proc = await conn.create_process(
                    command, encoding="utf-8", errors="replace", term_type="dumb", request_pty="force"
                )
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError, asyncssh.ChannelOpenError) as exc:
                self._lost()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None
            try:
                async for line in proc.stdout:
                    yield line.rstrip("\r\n")
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                self._lost()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None
            finally:
                proc.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(proc.wait_closed()), 2)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)


class LocalTransport:
    """The console runs on this station: commands are local subprocesses (no SSH)."""

    def __init__(self, station: Station, command_timeout: float = 30.0, env: dict[str, str] | None = None):
        self.station = station
        self.command_timeout = command_timeout
        self.env = env

    connected = True

    async def run(self, command: str, timeout: float | None = None, input: str | None = None) -> CommandResult:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True, env=self.env,
        )
        limit = timeout or self.command_timeout
        try:
            out, err = await asyncio.wait_for(proc.communicate(input.encode() if input else None), limit)
        except TimeoutError:
            _killpg(proc.pid)
            await proc.wait()
            raise CommandTimeout(f"{self.station.name}: command timed out after {limit:g} s: {command[:80]}") from None
        return CommandResult(proc.returncode or 0, out.decode(errors="replace"), err.decode(errors="replace"))

    async def stream(self, command: str) -> AsyncIterator[str]:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, start_new_session=True, env=self.env,
        )
        try:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                yield raw.decode(errors="replace").rstrip("\r\n")
        finally:
            if proc.returncode is None:
                _killpg(proc.pid)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 2)

    async def close(self) -> None:
        return None


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _one_line(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return " ".join(text.split())


def make_transport(station: Station, connect_timeout: float = 10.0, command_timeout: float = 30.0) -> Transport:
    if station.local:
        return LocalTransport(station, command_timeout)
    return SSHTransport(station, connect_timeout, command_timeout)
