"""The station service's health streams (issue 24), each one long-lived process on the station's one
session, run by ``StationService._run_streams`` beside the GPU and host-memory loops:

- the GPU health stream: a second, slower ``nvidia-smi --query-gpu ... -lms`` (console/probes/gpu_health.py).
  It asks with the newer ``clocks_event_reasons.*`` names; an older driver answers ``Field ... is not a
  valid field to query`` once, and from then on the service asks with ``clocks_throttle_reasons.*``;
- the rails loop: link state, speed, MTU, carrier changes and RoCE counters read from sysfs by bash
  builtins (``cmdlines.rails_stream``: no process per round);
- the kernel follower: ``journalctl -k -f`` (else ``dmesg -w``) since an hour before the service
  started; every event it reads (Xid, link flaps, AER) is posted as ``KernelEvents``.

None of them is the connection's heartbeat: the GPU samples are. A stream that fails says so in its
own source's error; the station stays as live as its GPU samples say.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from console.probes import gpu_health as gh
from console.probes import kernel_log
from console.probes.nvidia_smi import is_tool_failure
from console.probes.rails import END, parse_round
from console.remote import cmdlines
from console.station.messages import GpuHealthSample, KernelEvents, RailsSample

if TYPE_CHECKING:
    from console.station.monitor import StationService

KERNEL_LOOKBACK_S = 3600.0  # the follower starts this far back (the state keeps this run's Xids)


def rails_of(svc: StationService) -> list[tuple[str, str]]:
    """(netdev, RDMA device) of the station's rail(s): what its configuration names."""
    st = svc.station
    return [(st.rail_netdev, st.rdma_device or "")] if st.rail_netdev else []


class HealthStreams:
    """The three streams of one station's service (state kept across restarts: the field names)."""

    def __init__(self, svc: StationService) -> None:
        self.svc = svc
        self.prefix = gh.EVENT_PREFIX  # switched once to the older names when the driver asks for them

    def jobs(self) -> list:
        svc = self.svc
        out = [svc._forever(self.health), svc._forever(self.kernel)]
        if rails_of(svc):
            out.append(svc._forever(self.rails))
        return out

    def _post(self, msg) -> None:
        self.svc.post(msg)

    async def health(self) -> None:
        svc = self.svc
        rounds = gh.HealthRounds(svc._gpu_count)
        cmd = cmdlines.gpu_health_query(int(cmdlines.HEALTH_EVERY_S * 1000), self.prefix)
        async for line in svc.transport.stream(cmd):
            try:
                got = rounds.feed(line)
            except gh.InvalidField as exc:
                if exc.name.startswith(gh.EVENT_PREFIX) and self.prefix == gh.EVENT_PREFIX:
                    self.prefix = gh.THROTTLE_PREFIX  # an older driver: ask with its names from now on
                    return
                self._post(GpuHealthSample(svc.station.name, [], time.time(), str(exc)))
                return
            if got is None and is_tool_failure(line):
                self._post(GpuHealthSample(svc.station.name, [], time.time(), f"nvidia-smi: {line.strip()[:200]}"))
            elif got is not None:
                self._post(GpuHealthSample(svc.station.name, got, time.time()))

    async def rails(self) -> None:
        svc = self.svc
        rails = rails_of(svc)
        netdevs = [n for n, _ in rails]
        block: list[str] = []
        async for line in svc.transport.stream(cmdlines.rails_stream(rails)):
            if line.strip() == END:
                self._post(RailsSample(svc.station.name, parse_round(block, netdevs), time.time()))
                block = []
            else:
                block.append(line)

    async def kernel(self) -> None:
        svc = self.svc
        since = time.time() - KERNEL_LOOKBACK_S
        said_unreadable = False
        async for line in svc.transport.stream(cmdlines.kernel_follow(since)):
            why = kernel_log.unreadable(line)
            if why and not said_unreadable:
                said_unreadable = True
                self._post(KernelEvents(svc.station.name, [], time.time(), unreadable=why))
                continue
            ev = kernel_log.parse_kernel_line(line)
            if ev is not None and (ev.time is None or ev.time >= since):
                self._post(KernelEvents(svc.station.name, [ev], time.time()))

