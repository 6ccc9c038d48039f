"""The station service's health stream: one long-lived channel beside the GPU and
host-memory loops, multiplexing three sources (``cmdlines.health_stream``; the session's long-lived
streams are few, so the three share one):

- ``H`` the GPU health rows of a second, slower ``nvidia-smi --query-gpu ... -lms``
  (console/probes/gpu_health.py). It asks with the newer ``clocks_event_reasons.*`` names; an older
  driver answers ``Field ... is not a valid field to query`` once, and from then on the service asks
  with ``clocks_throttle_reasons.*`` (the stream starts again with them);
- ``K`` the kernel log (``journalctl -k -f`` since an hour before): every event it reads (Xid, link
  flaps, AER) is posted as ``KernelEvents`` (the state keeps each Xid once, whatever restarts);
- ``R`` the rails rounds: link state, speed, MTU, carrier changes and RoCE counters read from sysfs
  by bash builtins (no process per round).

None of them is the connection's heartbeat: the GPU samples are. A source that fails says so in its
own error; the station stays as live as its GPU samples say.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from console.probes import gpu_health as gh
from console.probes import kernel_log
from console.probes.nvidia_smi import is_tool_failure
from console.probes.rails import END, parse_round
from console.remote import cmdlines
from console.station.messages import GpuHealthSample, KernelEvents, RailsSample


class StationService(Protocol):
    """What the health stream needs of the station service that feeds it (``monitor.py``): its
    station, transport and message post, its supervised loop and the GPU count it read."""

    station: Any
    transport: Any

    def post(self, msg: Any) -> None: ...

    def forever(self, stream: Callable[[], Awaitable[None]]) -> Awaitable[None]: ...

    @property
    def gpu_count(self) -> int | None: ...

START_AFTER_S = 2.0  # after a (re)connect the health channel opens this much after the other streams
HEALTH_RETRY_S = 10.0  # a health tool that ended (a driver failure) is asked again this often
KERNEL_LOOKBACK_S = 3600.0  # the kernel log is read from this far back (the state keeps this run's Xids)
ENDED = "@@end"
BUSY = "@@busy"  # a source had more lines than a round forwards (a kernel-log flood): the rest follows


def rails_of(svc: StationService) -> list[tuple[str, str]]:
    """(netdev, RDMA device) of the station's rail: what its configuration names."""
    st = svc.station
    return [(st.rail_netdev, st.rdma_device or "")] if st.rail_netdev else []


class HealthStreams:
    """The health stream of one station's service (kept across restarts: the field names asked for)."""

    def __init__(self, svc: StationService) -> None:
        self.svc = svc
        self.prefix = gh.EVENT_PREFIX  # switched once to the older names when the driver asks for them
        self.kernel_said: str | None = None  # why the kernel log is unreadable, once said
        self.busy_rounds = 0  # rounds in which a source had more lines than one round forwards

    def jobs(self) -> list:
        return [self._later()]

    async def _later(self) -> None:
        """Started a moment after the other streams: on a (re)connect the GPU samples, the container
        and its log come first (the station's state), health right after."""
        await asyncio.sleep(START_AFTER_S)
        await self.svc.forever(self.stream)

    def _post(self, msg) -> None:
        self.svc.post(msg)

    async def stream(self) -> None:
        svc, name = self.svc, self.svc.station.name
        rails = rails_of(svc)
        netdevs = [n for n, _ in rails]
        rounds = gh.HealthRounds(svc.gpu_count)
        since = time.time() - KERNEL_LOOKBACK_S
        block: list[str] = []
        ended: float | None = None  # when the health tool ended (the rails and the kernel log go on)
        async for line in svc.transport.stream(cmdlines.health_stream(rails, since, self.prefix)):
            tag, _, text = line.rstrip("\r\n").partition(" ")
            if text.strip() == BUSY:
                self.busy_rounds += 1
                continue
            if tag == "R":
                if text.strip() == END:
                    if netdevs:
                        self._post(RailsSample(name, parse_round(block, netdevs), time.time()))
                    block = []
                    if ended is not None and time.monotonic() - ended >= HEALTH_RETRY_S:
                        return  # ask the health tool again (the channel starts again within a second)
                else:
                    block.append(text)
            elif tag == "H":
                if text.strip() == ENDED:
                    ended = time.monotonic()
                elif not self._health(rounds, text):
                    return  # the older names wanted: the stream starts again with them
            elif tag == "K":
                self._kernel(text, since)

    def _health(self, rounds: gh.HealthRounds, text: str) -> bool:
        """One health line; False when the stream must start again (with the older names)."""
        name = self.svc.station.name
        try:
            got = rounds.feed(text)
        except gh.InvalidField as exc:
            if exc.name.startswith(gh.EVENT_PREFIX) and self.prefix == gh.EVENT_PREFIX:
                self.prefix = gh.THROTTLE_PREFIX  # an older driver: ask with its names from now on
                return False
            self._post(GpuHealthSample(name, [], time.time(), str(exc)))
            return True
        if got is None and is_tool_failure(text):
            self._post(GpuHealthSample(name, [], time.time(), f"nvidia-smi: {text.strip()[:200]}"))
        elif got is not None:
            self._post(GpuHealthSample(name, got, time.time()))
        return True

    def _kernel(self, text: str, since: float) -> None:
        name = self.svc.station.name
        if text.strip() == ENDED:
            return
        why = kernel_log.unreadable(text)
        if why:
            if why != self.kernel_said:
                self.kernel_said = why
                self._post(KernelEvents(name, [], time.time(), unreadable=why))
            return
        ev = kernel_log.parse_kernel_line(text)
        if ev is not None and (ev.time is None or ev.time >= since):
            self._post(KernelEvents(name, [ev], time.time()))
