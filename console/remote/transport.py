"""The only code that talks to stations: SSH (asyncssh) or local subprocesses.

One SSH connection per host, many channels, within a budget below OpenSSH's default
``MaxSessions`` (10): ``channels.py`` (8 in all; the dashboard's long-lived streams at most 4, an
on-demand job's at most 2, so a job always finds a stream slot beside a streaming dashboard and
one-shot commands always find a channel). A channel the server refuses ("no more sessions", administratively
prohibited, resource shortage) is retried briefly and is never a lost connection.

Host keys are checked as OpenSSH does: known_hosts is read with asyncssh's own parser (hashed
names too), an *unknown* key is refused with its type and fingerprint and trusting it is an
explicit step (``trust_host_key``); a *changed* key is refused loudly with both fingerprints and
is never trusted that way: only ``replace_host_key`` naming the new fingerprint replaces it.
Host-key algorithms are offered in OpenSSH's order (ed25519 first), with the types already known
for the host first. Long-lived streams run with a PTY so sshd hangs up the remote process when we
close the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TypeVar

from console.lazy import lazy_module

if TYPE_CHECKING:
    import asyncssh
else:
    asyncssh = lazy_module("asyncssh")  # loaded on first use, after the first frame

from console.config import Station
from console.remote.bounded import DEFAULT_MAX_BYTES, read_both
from console.remote.channels import ChannelBudget, SlotTimeout
from console.remote.lines import clipped_lines
from console.remote.local import LocalTransport  # noqa: F401  (re-exported: callers import it from here)
from console.remote.results import (  # noqa: F401  (re-exported: the old import path still works)
    AuthRefused,
    ChannelRefused,
    ChannelShortage,
    CommandResult,
    CommandTimeout,
    TransportError,
    Unreachable,
)

KEEPALIVE_S = 10
CHANNEL_RETRY_S = 5.0  # how long a refused channel open is retried before the command fails

# OpenSSH's default HostKeyAlgorithms (ssh_config(5)), plain keys, in its order of preference.
OPENSSH_HOST_KEY_ALGS = (
    b"ssh-ed25519", b"ecdsa-sha2-nistp256", b"ecdsa-sha2-nistp384", b"ecdsa-sha2-nistp521",
    b"sk-ssh-ed25519@openssh.com", b"sk-ecdsa-sha2-nistp256@openssh.com", b"rsa-sha2-512", b"rsa-sha2-256",
)
_KEY_TYPE = {b"ssh-ed25519": "ED25519", b"ssh-rsa": "RSA", b"ssh-dss": "DSA", b"ssh-ed448": "ED448",
             b"sk-ssh-ed25519@openssh.com": "ED25519-SK", b"sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK"}

T = TypeVar("T")


@dataclass(frozen=True)
class KeyId:
    """A host key as the operator compares it: ``ED25519 SHA256:...`` (what ``ssh`` prints)."""

    type: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.type} {self.fingerprint}"


def key_id(key: asyncssh.SSHKey) -> KeyId:
    alg = key.algorithm
    kind = _KEY_TYPE.get(alg) or ("ECDSA" if alg.startswith(b"ecdsa-") else alg.decode(errors="replace").upper())
    return KeyId(kind, key.get_fingerprint("sha256"))


HostKeyKind = Literal["unknown", "changed", "revoked"]

# Where the station keeps each host key's public half (OpenSSH's defaults), for the operator to read there.
_HOST_KEY_FILE = {"ED25519": "ssh_host_ed25519_key.pub", "ECDSA": "ssh_host_ecdsa_key.pub",
                  "RSA": "ssh_host_rsa_key.pub"}


def read_it_there(offered: KeyId | None) -> str:
    """How the operator reads the station's real fingerprint on the station itself (its console, not
    this connection, which may be the attacker's)."""
    name = _HOST_KEY_FILE.get(offered.type if offered else "", "ssh_host_ed25519_key.pub")
    return f"ssh-keygen -lf /etc/ssh/{name}"


class HostKeyError(TransportError):
    """The station's host key is not trusted: ``kind`` says whether it is new to us or CHANGED."""

    def __init__(self, station: str, host: str, port: int, kind: HostKeyKind, offered: KeyId | None,
                 known: tuple[KeyId, ...], known_hosts: str, note: str = ""):
        self.station, self.host, self.port = station, host, port
        self.kind, self.offered, self.known = kind, offered, known
        self.known_hosts = known_hosts
        self.key: asyncssh.SSHKey | None = None  # the offered key, when it could be fetched
        where = f"{station} ({host}:{port})"
        if kind == "revoked":
            msg = (f"host key of {where} is REVOKED: {offered} is marked @revoked in {known_hosts}{note}. "
                   f"Refused, always (--trust-host-key and --replace-host-key never take a revoked key): the "
                   f"station needs a new host key (its administrator regenerates it), then trust the new one")
        elif kind == "changed":
            was = ", ".join(str(k) for k in known)
            now = str(offered) if offered else "?"
            msg = (f"host key of {where} has CHANGED: known {was}, offered {now}. It may be an attack "
                   f"(REMOTE HOST IDENTIFICATION HAS CHANGED) or a reinstall{note}. Read the real fingerprint on "
                   f"the station itself, at its console (`{read_it_there(offered)}` run there), and only if it "
                   f"is the same give it back (--replace-host-key <that fingerprint>, or T in the console); "
                   f"--trust-host-key does not replace a changed key")
        else:
            fp = str(offered) if offered else "fingerprint unknown (key could not be fetched)"
            msg = (f"host key of {where} is unknown: {fp}{note}; verify it, then trust it "
                   f"(--trust-host-key, or T in the console) to add it to {known_hosts}")
        super().__init__(msg)

    @property
    def fingerprint(self) -> str | None:
        return self.offered.fingerprint if self.offered else None

    @property
    def changed(self) -> bool:
        """A key ``--trust-host-key`` never takes: CHANGED, or REVOKED (``revoked`` says which)."""
        return self.kind in ("changed", "revoked")

    @property
    def revoked(self) -> bool:
        return self.kind == "revoked"


class Transport(Protocol):
    station: Station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> CommandResult: ...

    def stream(self, command: str) -> AsyncIterator[str]: ...

    async def close(self) -> None: ...


def default_known_hosts() -> str:
    return str(Path("~/.ssh/known_hosts").expanduser())


@dataclass(frozen=True)
class KnownKeys:
    """What known_hosts says about one host:port, read with asyncssh's parser (as OpenSSH reads it)."""

    keys: tuple[asyncssh.SSHKey, ...] = ()  # plain trusted host keys
    ca: tuple[asyncssh.SSHKey, ...] = ()  # @cert-authority keys: a certificate they signed is trusted
    revoked: tuple[asyncssh.SSHKey, ...] = ()  # @revoked keys: refused, always

    def is_revoked(self, key: asyncssh.SSHKey) -> bool:
        return any(k.public_data == key.public_data for k in self.revoked)


def known_host_keys(path: str, host: str, port: int) -> KnownKeys:
    try:
        kh = asyncssh.read_known_hosts(path)
    except (OSError, ValueError):
        return KnownKeys()
    port_or_none = port if port != 22 else None
    found = kh.match(host, "", port_or_none)
    revoked = list(found[2])
    # asyncssh's match() retries without the port when no *trusted* key names [host]:port, and so
    # drops an "@revoked [host]:port" line; OpenSSH never forgets a revocation: read it directly too.
    exact = getattr(kh, "_match", None)
    if port_or_none and callable(exact):
        with contextlib.suppress(Exception):
            revoked += [k for k in exact(host, "", port_or_none)[2]
                        if not any(k.public_data == r.public_data for r in revoked)]
    return KnownKeys(tuple(found[0]), tuple(found[1]), tuple(revoked))


def host_key_algs(known: list[asyncssh.SSHKey]) -> list[str]:
    """OpenSSH's order, the algorithms of keys already known for the host first."""
    known_algs = {a for k in known for a in k.sig_algorithms}
    first = [a for a in OPENSSH_HOST_KEY_ALGS if a in known_algs]
    return [a.decode() for a in first + [a for a in OPENSSH_HOST_KEY_ALGS if a not in known_algs]]


class SSHTransport:
    """asyncssh client for one station: one connection, channels within a budget."""

    def __init__(self, station: Station, connect_timeout: float = 10.0, command_timeout: float = 30.0):
        self.station = station
        self.connect_timeout = connect_timeout
        self.command_timeout = command_timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self.host_key_id: KeyId | None = None  # the host key the station offered on the last connect
        self._lock = asyncio.Lock()
        self.budget = ChannelBudget(station.name)  # this connection's channels (channels.py)
        self.connects = 0  # how many connections were opened (for tests and the status line)
        self.refusals = 0  # channel opens the server refused and we retried

    @property
    def streams_open(self) -> int:
        return self.budget.streams_open

    @property
    def known_hosts(self) -> str:
        return str(Path(self.station.known_hosts).expanduser()) if self.station.known_hosts else default_known_hosts()

    @property
    def port(self) -> int:
        return self.station.port or 22

    @property
    def connected(self) -> bool:
        return self._conn is not None

    def _options(self, known: list[asyncssh.SSHKey], ca: bool) -> dict:
        opts: dict = {
            "known_hosts": self.known_hosts,
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": KEEPALIVE_S,
            "keepalive_count_max": 3,
            "agent_forwarding": False,
        }
        if not ca:  # with a CA, asyncssh's own choice includes the certificate algorithms
            opts["server_host_key_algs"] = host_key_algs(known)
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
            kk = known_host_keys(self.known_hosts, self.station.host, self.port)
            try:
                conn = await asyncio.wait_for(
                    asyncssh.connect(self.station.host, **self._options(list(kk.keys), bool(kk.ca))),
                    self.connect_timeout + 1)
            except asyncssh.HostKeyNotVerifiable:
                raise await self.host_key_problem() from None
            except asyncssh.KeyExchangeFailed as exc:
                # @revoked / @cert-authority lines narrow the algorithms asyncssh asks for: a station
                # whose only key is revoked (or that offers no certificate) fails here, not as "unknown"
                if kk.ca or kk.revoked:
                    raise await self.host_key_problem() from None
                raise Unreachable(f"{self.station.name}: cannot connect to {self.station.host}: "
                                  f"{_one_line(exc)}") from None
            except asyncssh.PermissionDenied as exc:
                raise AuthRefused(f"{self.station.name}: SSH login refused ({exc.reason})") from None
            except TimeoutError:
                raise Unreachable(f"{self.station.name}: no answer from {self.station.host} "
                                  f"within {self.connect_timeout:g} s") from None
            except (OSError, asyncssh.Error) as exc:
                raise Unreachable(f"{self.station.name}: cannot connect to {self.station.host}: "
                                  f"{_one_line(exc)}") from None
            offered = conn.get_server_host_key()
            if offered is not None and kk.is_revoked(offered):  # accepted by a no-port line: still revoked
                conn.close()
                err = HostKeyError(self.station.name, self.station.host, self.port, "revoked", key_id(offered), (),
                                   self.known_hosts)
                err.key = offered
                raise err
            self._conn = conn
            self.connects += 1
            if offered is not None:  # who answered: the pair-identity check compares the stations' keys
                self.host_key_id = key_id(offered)
            return conn

    # ------------------------------------------------------------------ host keys

    async def host_key_problem(self) -> HostKeyError:
        """What is wrong with the station's host key: unknown, or changed (with both keys). The
        offered key itself rides along as ``.key`` (for trusting or replacing exactly that key)."""
        kk = known_host_keys(self.known_hosts, self.station.host, self.port)
        known = list(kk.keys)
        key = await self._fetch_key(host_key_algs(known))
        offered = key_id(key) if key else None
        same_type = [k for k in known if key is not None and k.algorithm == key.algorithm]
        ca_note = (" (known_hosts trusts a @cert-authority for this host, but the station offered no "
                   "certificate that authority signed)") if kk.ca else ""
        if key is not None and kk.is_revoked(key):
            err = HostKeyError(self.station.name, self.station.host, self.port, "revoked", offered, (),
                               self.known_hosts)
        elif key is not None and same_type and not any(k.public_data == key.public_data for k in same_type):
            err = HostKeyError(self.station.name, self.station.host, self.port, "changed", offered,
                               tuple(key_id(k) for k in same_type), self.known_hosts)
        else:
            note = ""
            if known and key is not None and not same_type:
                note = f" (known for this host under other key types: {', '.join(str(key_id(k)) for k in known)})"
            err = HostKeyError(self.station.name, self.station.host, self.port, "unknown", offered, (),
                               self.known_hosts, note + ca_note)
        err.key = key
        return err

    async def _fetch_key(self, algs: list[str]) -> asyncssh.SSHKey | None:
        with contextlib.suppress(Exception):
            opts: dict = {"port": self.station.port} if self.station.port else {}
            return await asyncio.wait_for(
                asyncssh.get_server_host_key(self.station.host, server_host_key_algs=algs, **opts),
                self.connect_timeout)
        return None

    def _known_hosts_name(self) -> str:
        return self.station.host if self.port == 22 else f"[{self.station.host}]:{self.port}"

    async def trust_host_key(self, expected_fingerprint: str | None = None) -> str:
        """Append the station's current host key to known_hosts; returns its fingerprint.

        Only an *unknown* key is trusted this way; a changed key raises (see ``replace_host_key``).
        With ``expected_fingerprint`` the key is only trusted if it still matches what the
        operator was shown (no key swap between showing and trusting).
        """
        problem = await self.host_key_problem()
        if problem.changed:
            raise problem
        key = problem.key
        if key is None:
            raise Unreachable(f"{self.station.name}: cannot fetch the host key from {self.station.host}")
        fp = key.get_fingerprint("sha256")
        if expected_fingerprint and fp != expected_fingerprint:
            raise HostKeyError(self.station.name, self.station.host, self.port, "unknown", key_id(key), (),
                               self.known_hosts, f" (not the {expected_fingerprint} that was shown)")
        self._write_known_hosts(key, remove_old=False)
        return fp

    async def replace_host_key(self, new_fingerprint: str) -> str:
        """Replace a CHANGED host key: the key the station offers now must have ``new_fingerprint``
        (the operator read it on the station); every old line for this host is removed."""
        want = new_fingerprint.strip()
        problem = await self.host_key_problem()
        if problem.revoked:
            raise problem
        key = problem.key
        if key is None:
            raise Unreachable(f"{self.station.name}: cannot fetch the host key from {self.station.host}")
        if key.get_fingerprint("sha256") != want:
            raise HostKeyError(self.station.name, self.station.host, self.port, problem.kind, problem.offered,
                               problem.known, self.known_hosts, f" (the station offers {problem.offered}, not {want})")
        self._write_known_hosts(key, remove_old=True)
        return want

    def _write_known_hosts(self, key: asyncssh.SSHKey, remove_old: bool) -> None:
        path = Path(self.known_hosts)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = path.read_text().splitlines(keepends=True) if path.exists() else []
        if remove_old:
            lines = [ln for ln in lines if not self._line_is_this_host(ln)]
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        lines.append(f"{self._known_hosts_name()} {key.export_public_key('openssh').decode().strip()}\n")
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text("".join(lines))
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)

    def _line_is_this_host(self, line: str) -> bool:
        """A plain host-key line that names this host (hashed names too, as asyncssh matches them)."""
        text = line.strip()
        if not text or text.startswith("#") or text.startswith("@"):
            return False
        try:
            found = asyncssh.import_known_hosts(text).match(self.station.host, "",
                                                            self.port if self.port != 22 else None)
        except ValueError:
            return False
        return bool(found[0])

    # ------------------------------------------------------------------ channels

    def drop(self) -> None:
        """Forget the connection at once (declared dead): every channel on it ends now."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.abort()

    _lost = drop

    async def _open(self, what: str, opener: Callable[[], Awaitable[T]]) -> T:
        """Open a channel, retrying briefly while the server refuses one: a refusal is not an outage."""
        deadline = time.monotonic() + CHANNEL_RETRY_S
        delay = 0.05
        while True:
            try:
                return await opener()
            except asyncssh.ChannelOpenError as exc:
                if time.monotonic() + delay > deadline:
                    raise ChannelRefused(f"{self.station.name}: the station refused a channel for "
                                         f"{CHANNEL_RETRY_S:g} s ({_one_line(exc)}): {what[:80]}") from None
                self.refusals += 1
                await asyncio.sleep(delay)
                delay = min(1.0, delay * 2)

    async def run(self, command: str, timeout: float | None = None, input: str | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> CommandResult:
        """One command's exit status and output, each stream read up to ``max_bytes`` (the channel is
        closed at the cap: the rest is never read, and the result says it was cut)."""
        conn = await self.connect()
        limit = timeout or self.command_timeout
        async with self.budget.command(command):  # queued (announced when long), never refused here
            try:
                proc = await self._open(command, lambda: conn.create_process(command, encoding=None))
                try:
                    if input is not None:
                        proc.stdin.write(input.encode())
                    proc.stdin.write_eof()

                    async def collect() -> tuple[str, str, bool, int | None]:
                        async def stop() -> None:  # at the cap: nothing more of the command is read
                            proc.close()
                        out, err, cut = await read_both(proc.stdout.read, proc.stderr.read, max_bytes, stop)
                        if cut:
                            return out, err, cut, proc.exit_status
                        done = await proc.wait(check=False)
                        return out, err, cut, done.exit_status
                    try:
                        out, err, cut, status = await asyncio.wait_for(collect(), limit)
                    except TimeoutError:
                        proc.kill()
                        raise CommandTimeout(f"{self.station.name}: command timed out after {limit:g} s: "
                                             f"{command[:80]}") from None
                    return CommandResult(status if status is not None else (0 if cut else 255), out, err, cut)
                finally:  # never wait long for a station slow to acknowledge the close (cancel, timeout)
                    proc.close()
                    # The wait is owned (not shielded: a shielded wait outlived a cancelled read, left
                    # behind) and a cancel during it propagates (tasks.py's rule): it only waits.
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(proc.wait_closed(), 2)
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                if self._conn is conn:
                    self.drop()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None

    async def stream(self, command: str) -> AsyncIterator[str]:
        """Lines of a long-running remote command; closing the iterator ends the remote process.

        Closing never waits more than a moment for the station: quitting the console or
        reconnecting must not hang on a peer that is slow to acknowledge the channel close.
        """
        conn = await self.connect()
        slot = self.budget.stream(command)  # this context's kind: the dashboard's, or a job's
        try:
            await slot.__aenter__()
        except SlotTimeout as exc:
            raise ChannelShortage(exc.wait) from None
        try:
            try:
                proc = await self._open(command, lambda: conn.create_process(
                    command, encoding="utf-8", errors="replace", term_type="dumb", request_pty="force"))
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                if self._conn is conn:
                    self.drop()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None
            try:
                async for line in clipped_lines(proc.stdout.read):  # one line, however long
                    yield line
            except (asyncssh.ConnectionLost, asyncssh.DisconnectError, OSError) as exc:
                if self._conn is conn:
                    self.drop()
                raise Unreachable(f"{self.station.name}: connection lost: {_one_line(exc)}") from None
            finally:
                proc.close()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(proc.wait_closed()), 2)
            if conn is not self._conn:  # ended because the connection went away, not the command
                raise Unreachable(f"{self.station.name}: connection dropped")
        finally:
            await slot.__aexit__(None, None, None)

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), 2)


async def tcp_probe(host: str, port: int, timeout: float = 1.5) -> bool:
    """Does anything accept a TCP connection at host:port (the cheap "is it back?" question)?"""
    try:
        _r, w = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    w.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(w.wait_closed(), 0.5)
    return True


def _one_line(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return " ".join(text.split())


def ssh_of(transport: object) -> SSHTransport | None:
    """The SSH transport behind a transport or a shared session handle (None when local)."""
    inner = getattr(transport, "inner", transport)
    return inner if isinstance(inner, SSHTransport) else None


def new_transport(station: Station, connect_timeout: float = 10.0, command_timeout: float = 30.0) -> Transport:
    if station.local:
        return LocalTransport(station, command_timeout)
    return SSHTransport(station, connect_timeout, command_timeout)
