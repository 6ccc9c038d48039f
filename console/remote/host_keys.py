"""The one host-key trust step: every command and the TUI decide about a station's host key here.

An UNKNOWN key is added to known_hosts only when the operator says so (``--trust-host-key``, or
the TUI's trust dialog after showing its fingerprint); a CHANGED key is never trusted that way:
only the fingerprint the station offers now, read there by the operator and given back
(``--replace-host-key SHA256:...`` or typed in the TUI), replaces the old line(s). A key marked
``@revoked`` in known_hosts is refused always (as OpenSSH does): neither trust nor replace takes it.
A local station has no host key: nothing to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.remote.transport import HostKeyError, Transport, TransportError, ssh_of


@dataclass(frozen=True)
class HostKeyChoice:
    """The operator's decision, made before the command connects."""

    trust: bool = False  # --trust-host-key: add an UNKNOWN key after printing its fingerprint
    replace: str | None = None  # --replace-host-key: the fingerprint that may replace a CHANGED key

    def __bool__(self) -> bool:
        return self.trust or bool(self.replace)


def _stderr(text: str) -> None:
    print(text, file=sys.stderr)


async def connect_with_trust(transport: Transport, trust: bool, replace: str | None = None,
                             say: Callable[[str], None] = _stderr) -> None:
    """Open the connection. With ``trust`` an UNKNOWN host key is shown, then added; a CHANGED key
    is never trusted that way (the error says so): only ``replace`` naming the fingerprint the
    station now offers replaces it, removing the old line(s)."""
    ssh = ssh_of(transport)
    if ssh is None:
        return
    try:
        await ssh.connect()
    except HostKeyError as exc:
        if exc.revoked:
            raise
        if exc.changed and replace:
            if exc.fingerprint != replace.strip():
                raise HostKeyError(exc.station, exc.host, exc.port, exc.kind, exc.offered, exc.known,
                                   exc.known_hosts, f" (--replace-host-key {replace.strip()} is not the offered key)"
                                   ) from None
            say(f"dgx-console: replacing the CHANGED host key of {exc.station} ({exc.host}:{exc.port}): "
                f"{', '.join(str(k) for k in exc.known)} -> {exc.offered}")
            await ssh.replace_host_key(replace)
            await ssh.connect()
            return
        if exc.changed or not trust or not exc.fingerprint:
            raise
        say(f"dgx-console: trusting host key of {exc.station} ({exc.host}:{exc.port}): {exc.offered}")
        await ssh.trust_host_key(exc.fingerprint)
        await ssh.connect()


async def trust_stations(transports: Iterable[Transport], choice: HostKeyChoice | None, timeout_s: float) -> None:
    """The operator's choice applied to every station, one after another (one line each on stderr).
    A station refused here (a changed key, unreachable) is left for the command's own step to report,
    with the same message; without a choice nothing connects early."""
    if not choice:
        return
    for t in transports:
        with contextlib.suppress(TransportError, TimeoutError):
            await asyncio.wait_for(connect_with_trust(t, choice.trust, choice.replace), timeout_s)


async def decide(station: str, transport: Transport, fingerprint: str, replace: bool) -> str:
    """The TUI's decision, taken: trust the UNKNOWN key whose ``fingerprint`` was shown, or replace a
    CHANGED key by the ``fingerprint`` the operator typed. Returns what to tell the operator;
    raises ``TransportError`` (its message is the reason) when the station offers another key."""
    ssh = ssh_of(transport)
    if ssh is None:
        raise TransportError(f"{station}: a local station has no host key")
    if replace:
        fp = await ssh.replace_host_key(fingerprint)
        return f"{station}: host key replaced by {fp} (old line removed)"
    fp = await ssh.trust_host_key(fingerprint)
    return f"{station}: trusted {fp}"
