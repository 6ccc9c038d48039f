"""What every check shares: its result, the per-run context (one login check per station, identical
command lines run once per pass), the evidence text and the catalogue entry (``Spec``)."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from console.config import Config, Station
from console.remote import cmdlines as rc
from console.remote.transport import ChannelRefused, CommandResult, Transport, TransportError
from console.tasks import cancel_and_wait
from console.vocabulary import CheckStatus

STATUSES = tuple(CheckStatus)
COUNTER_INTERVAL_S = 1.0
SKEW_LIMIT_S = 0.25
EVIDENCE_MAX = 4000


@dataclass(frozen=True)
class CheckResult:
    id: str
    station: str  # "A"; "A->B" for one direction; "A<->B" for a pair; "A,B" across all stations
    status: CheckStatus
    summary: str
    evidence: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


# The commands the current check ran (evidence when its output cannot be parsed).
TRANSCRIPT: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("transcript", default=None)


class StationDown(Exception):
    """The station could not be reached; its checks are skipped with this reason."""


class ToolMissing(Exception):
    """A command the check needs is not installed on the station (exit status 127)."""


# Where the tools come from, for the fix of a ToolMissing.
TOOL_PACKAGES = {
    "ethtool": "ethtool", "ip": "iproute2", "rdma": "iproute2", "ping": "iputils-ping", "ssh": "openssh-client",
    "ibv_devinfo": "ibverbs-utils (rdma-core)", "ibdev2netdev": "MLNX_OFED / DOCA-OFED (mlnx-tools)",
    "show_gids": "MLNX_OFED / DOCA-OFED (mlnx-tools)", "ib_write_bw": "perftest", "chronyc": "chrony",
    "timedatectl": "systemd", "docker": "Docker", "nvidia-smi": "the NVIDIA driver", "df": "coreutils",
    "loginctl": "systemd", "ss": "iproute2",
}


# ------------------------------------------------------------------ the per-run context


class CheckRun:
    """Transports, the memo of command results, and the station reachability of one pass."""

    def __init__(self, config: Config, transports: dict[str, Transport], cmd_timeout: float):
        self.config = config
        self.profile = config.profile
        self.transports = transports
        self.cmd_timeout = cmd_timeout
        self._memo: dict[tuple[str, str], asyncio.Task] = {}
        self._reach: dict[str, asyncio.Task] = {}
        self.started = time.monotonic()

    def station(self, name: str) -> Station:
        return self.config.station(name)

    async def reachable(self, name: str) -> str:
        """The login user on the station; raises StationDown with the reason."""
        if name not in self._reach:
            self._reach[name] = asyncio.ensure_future(self._login(name))
        return await asyncio.shield(self._reach[name])

    async def _login(self, name: str) -> str:
        try:
            res = await self._raw(name, rc.whoami(), self.config.connect_timeout_s + self.cmd_timeout)
        except ChannelRefused as exc:
            raise StationDown(f"busy: {exc}") from None
        except TransportError as exc:
            raise StationDown(f"unreachable: {exc}") from None
        if not res.ok:
            raise StationDown(f"unreachable: 'id -un' failed with status {res.exit_status}: {res.stderr.strip()[:120]}")
        return res.stdout.strip()

    async def _raw(self, name: str, cmd: str, timeout: float) -> CommandResult:
        t = self.transports[name]
        try:
            # the transport times the command itself; this guard also covers waiting for a channel
            return await asyncio.wait_for(t.run(cmd, timeout=timeout), 2 * timeout + 5)
        except TimeoutError:
            raise TransportError(f"{name}: no answer within {timeout:g} s: {cmd[:80]}") from None

    async def run(self, name: str, cmd: str, timeout: float | None = None, tag: str = "") -> CommandResult:
        """Run ``cmd`` on station ``name`` once per pass (``tag`` separates deliberate re-reads)."""
        await self.reachable(name)
        key = (name, tag + cmd)
        if key not in self._memo:
            self._memo[key] = asyncio.ensure_future(self._raw(name, cmd, timeout or self.cmd_timeout))
        try:
            res = await asyncio.shield(self._memo[key])
        except TransportError as exc:
            raise StationDown(str(exc)) from None
        log = TRANSCRIPT.get()
        if log is not None:
            log.append(evidence(cmd, res, name))
        if res.exit_status == 127:
            tool = cmd.split()[0] if cmd.split() else cmd
            raise ToolMissing(f"{tool} not found on {name}")
        return res

    async def close(self) -> None:
        """End the pass: every command still running is cancelled and waited for (a cancelled or
        failed caller leaves none behind; each one's error is retrieved)."""
        await cancel_and_wait([*self._memo.values(), *self._reach.values()])

    async def quiet(self, limit_s: float = 10.0) -> None:
        """Wait until the other commands of this pass are done (a busy link widens round trips)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            pending = [t for t in self._memo.values() if not t.done()]
            if not pending:
                return
            await asyncio.wait(pending, timeout=deadline - time.monotonic())

    async def timed(self, name: str, cmd: str) -> tuple[float, CommandResult, float]:
        """(local send time, result, local receive time) for the clock measurement."""
        await self.reachable(name)
        t0 = time.time()
        try:
            res = await self._raw(name, cmd, self.cmd_timeout)
        except TransportError as exc:
            raise StationDown(str(exc)) from None
        return t0, res, time.time()


def evidence(cmd: str, res: CommandResult, station: str | None = None) -> str:
    where = f"[{station}] " if station else ""
    text = (res.stdout or "") + (res.stderr or "")
    if len(text) > EVIDENCE_MAX:
        text = text[:EVIDENCE_MAX] + "\n... (truncated)"
    tail = "" if res.exit_status == 0 else f"\n(exit status {res.exit_status})"
    return f"{where}$ {cmd}\n{text.rstrip()}{tail}"


def join_parts(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


# ------------------------------------------------------------------ check catalogue

StationFn = Callable[[CheckRun, Station], Awaitable[CheckResult]]
DirFn = Callable[[CheckRun, Station, Station], Awaitable[CheckResult]]
PairFn = Callable[[CheckRun, Station, Station], Awaitable[CheckResult]]
AllFn = Callable[[CheckRun, list[Station]], Awaitable[CheckResult]]


@dataclass(frozen=True)
class Spec:
    id: str
    scope: str  # station | direction | head-to-worker | pair | all | head
    fn: Callable[..., Awaitable[CheckResult]]
    title: str
    needs: tuple[str, ...] = ()  # how the station answers it: "real" commands or simulated shims (lab report)
    login: bool = True  # skipped (with the reason) when a station it needs cannot be reached
