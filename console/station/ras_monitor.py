"""The continuous NCCL RAS watch's job: while an engine serves, one short one-shot ``ncclras``
(``remote/cmdlines/nccl.py``: ``ncclras_watch``, bounded station-side) every ``RAS_WATCH_EVERY_S`` on the
head, or on the first serving station by rank when the head's engine is gone (its RAS service died
with it), posted as a ``RasSample`` and folded into the fleet's one ``RasWatch``
(console/station/ras_watch.py). A one-shot command over the station's existing session: no
long-lived stream, one channel for a few milliseconds of RAS and a ``docker exec``.

The TUI and ``watch`` start it the same way, as a supervised job beside the stations' services.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from console.remote import cmdlines as rc
from console.remote.session import SessionRegistry
from console.remote.transport import TransportError
from console.sanitize import one_line
from console.station.messages import RasSample
from console.station.state import Stations
from console.vocabulary import CONTAINER_UP_STATES, EnginePhase

JOB = "ras watch"
#: One read's bound on the console's side: the script may try json, then text, then the socket.
READ_TIMEOUT_S = 3 * rc.RAS_WATCH_LIMIT_S + 5.0


def serving(stations: Stations) -> list[str]:
    """The stations whose engine serves now (container up, engine ready), the head first."""
    out = [s.name for s in stations.by_rank() if s.container is not None and s.container.state in CONTAINER_UP_STATES
           and s.engine is not None and s.engine.phase == EnginePhase.READY and s.conn.live]
    return sorted(out, key=lambda n: n != stations.head_name)


def ras_target(stations: Stations) -> tuple[str, str] | None:
    """(station, container) to read RAS on now, or None (no engine serves: nothing to watch)."""
    names = serving(stations)
    if not names:
        return None
    st = stations[names[0]]
    return st.name, (st.container.name if st.container is not None and st.container.name else st.container_name)


class RasMonitor:
    """Reads RAS every ``every_s`` on the station ``target()`` names (None: skip this round)."""

    def __init__(self, sessions: SessionRegistry, post: Callable[[RasSample], object],
                 target: Callable[[], tuple[str, str] | None], every_s: float = rc.RAS_WATCH_EVERY_S) -> None:
        self.sessions, self.post, self.target, self.every_s = sessions, post, target, every_s

    async def read(self, station: str, container: str) -> RasSample:
        at = time.time()
        try:
            res = await self.sessions.transport(station).run(rc.ncclras_watch(container), timeout=READ_TIMEOUT_S)
        except TransportError as exc:
            return RasSample(station, "", at, error=one_line(f"{type(exc).__name__}: {exc}", 300))
        return RasSample(station, res.stdout + res.stderr, at)

    async def run(self) -> None:
        while True:
            pick = self.target()
            if pick is not None:
                self.post(await self.read(*pick))
            await asyncio.sleep(self.every_s)


def start_ras_watch(jobs, sessions: SessionRegistry, stations: Stations, post: Callable[[RasSample], object],
                    on_failure=None) -> None:
    """The watch as the supervisor's job ``ras watch`` (the TUI and ``watch`` alike)."""
    monitor = RasMonitor(sessions, post, lambda: ras_target(stations))
    if on_failure is None:
        jobs.start(JOB, monitor.run)
    else:
        jobs.start(JOB, monitor.run, on_failure=on_failure)
