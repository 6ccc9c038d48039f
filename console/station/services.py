"""The stations' services, started and stopped the same way by the TUI and by ``watch``.

One ``StationService`` per station, each run as the supervisor's job ``station <name>``
(console/supervisor.py). The service's own loop turns every failure into a state of its station and
retries; should the loop itself die (a bug in the code that shows those states), the job's failure
becomes that station's ``error`` state too, with the reason and the restart time, and the job
restarts. ``Supervisor.stop()`` ends every service and closes its connection.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message

from console.config import Config
from console.remote.session import SessionRegistry
from console.station.monitor import StationService
from console.supervisor import JobFailure, Supervisor


def job_name(station: str) -> str:
    """The supervisor's name for a station's service."""
    return f"station {station}"


def start_station_services(jobs: Supervisor, config: Config, post: Callable[[Message], object],
                           sessions: SessionRegistry, gpu_interval_ms: int | None = None
                           ) -> dict[str, StationService]:
    """A service per station of ``config`` over its session, each a job of ``jobs``; by station name."""
    services: dict[str, StationService] = {}
    for st in config.stations:
        svc = StationService(config, st, post, sessions.transport(st.name), gpu_interval_ms)

        def failed(f: JobFailure, svc: StationService = svc) -> None:
            svc.show_failure(f.reason, f.retry_in_s, f.traceback)

        jobs.start(job_name(st.name), svc.run, on_failure=failed, close=svc.stop)
        services[st.name] = svc
    return services
