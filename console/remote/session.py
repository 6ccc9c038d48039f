"""One owner per station connection: the per-station session registry of this process.

The console app and each CLI command create one ``SessionRegistry`` and make it active; while it
is active, ``make_transport`` (used by the monitor, checks, actions, RDMA validation, the
diagnosis fetch and status) hands out a ``SharedTransport`` on the station's one session instead
of opening a connection of its own. The session's channel budget (``channels.py``: the
dashboard's streams, on-demand jobs' streams and one-shot commands, each kind its own share) therefore
counts everybody's channels together, and a channel refused by sshd is retried there. Users keep the ``Transport`` protocol:
their ``close()`` only lets go of the handle; the registry closes the connections.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from console.config import Config, Station
from console.remote.bounded import DEFAULT_MAX_BYTES
from console.remote.transport import CommandResult, Transport, new_transport

_ACTIVE: list[SessionRegistry] = []


class SharedTransport:
    """A user's handle on a station's session: everything but ``close()`` goes to the session."""

    def __init__(self, inner: Transport):
        self.inner = inner
        self.station = inner.station

    async def run(self, command: str, timeout: float | None = None, input: str | None = None,
                  max_bytes: int = DEFAULT_MAX_BYTES) -> CommandResult:
        if max_bytes == DEFAULT_MAX_BYTES:  # (a transport written before the cap takes no max_bytes)
            return await self.inner.run(command, timeout=timeout, input=input)
        return await self.inner.run(command, timeout=timeout, input=input, max_bytes=max_bytes)

    def stream(self, command: str) -> AsyncIterator[str]:
        return self.inner.stream(command)

    async def close(self) -> None:
        """The registry owns the connection: closing a handle never closes it under the others."""
        return None

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class SessionRegistry:
    """The sessions of one config's stations, opened lazily, shared by every service."""

    def __init__(self, config: Config, transports: dict[str, Transport] | None = None):
        self.config = config
        self._stations = {s.name: s for s in config.stations}
        self._sessions: dict[str, Transport] = dict(transports or {})

    def serves(self, station: Station) -> bool:
        return self._stations.get(station.name) == station

    def session(self, name: str) -> Transport:
        """The station's one underlying transport (opened on first use)."""
        if name not in self._sessions:
            st = self._stations[name]
            self._sessions[name] = new_transport(st, self.config.connect_timeout_s, self.config.command_timeout_s)
        return self._sessions[name]

    def transport(self, name: str) -> SharedTransport:
        return SharedTransport(self.session(name))

    def transports(self) -> dict[str, Transport]:
        return {name: self.transport(name) for name in self._stations}

    @contextlib.contextmanager
    def active(self) -> Iterator[SessionRegistry]:
        """Make this the registry ``make_transport`` hands sessions out of (nested: innermost wins)."""
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)

    async def close(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for t in sessions:
            with contextlib.suppress(Exception):
                await t.close()

    async def __aenter__(self) -> SessionRegistry:
        _ACTIVE.append(self)
        return self

    async def __aexit__(self, *exc) -> None:
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        await self.close()


def active_registry() -> SessionRegistry | None:
    return _ACTIVE[-1] if _ACTIVE else None


def make_transport(station: Station, connect_timeout: float = 10.0, command_timeout: float = 30.0) -> Transport:
    """The station's transport: the shared session when a registry is active in this process (the
    console app, a CLI command), so every service uses the one connection; a new one otherwise."""
    reg = active_registry()
    if reg is not None and reg.serves(station):
        return reg.transport(station.name)
    return new_transport(station, connect_timeout, command_timeout)
