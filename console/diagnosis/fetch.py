"""Read a station's recent container log through its transport (diagnose --station, bundle), and for the
diagnosis its kernel log since the container started."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from console.config import Config, Station
from console.probes import ParseError
from console.probes.docker import ContainerInfo, parse_inspect
from console.remote import cmdlines
from console.remote.host_keys import connect_with_trust
from console.remote.session import make_transport
from console.remote.transport import TransportError


@dataclass(frozen=True)
class StationLog:
    station: str
    lines: list[str]
    error: str | None = None  # one line when the station or its container could not be read
    container: ContainerInfo | None = None  # its state (an exit code the log does not explain is a finding)
    kernel: list[str] | None = None  # the relevant kernel-log lines since the container started
    kernel_error: str | None = None  # why the kernel log could not be read (permissions), when asked for

    @property
    def ok(self) -> bool:
        return self.error is None


async def fetch_station_log(config: Config, station: Station, tail: int, trust: bool = False,
                            kernel: bool = False) -> StationLog:
    """The last ``tail`` lines of the station's container (docker --timestamps); with ``kernel`` also the
    station's kernel log since the container started (the last hour when that is unknown); never raises."""
    from console.diagnosis.kernel import read_kernel_log
    from console.probes.docker import run_started

    transport = make_transport(station, config.connect_timeout_s, config.command_timeout_s)
    info: ContainerInfo | None = None
    klines: list[str] | None = None
    kwhy: str | None = None
    try:
        await connect_with_trust(transport, trust)
        res = await transport.run(cmdlines.docker_logs(station.container, tail, follow=False),
                                  timeout=max(config.command_timeout_s, 30.0))
        if res.exit_status == 0:
            ins = await transport.run(cmdlines.docker_inspect(station.container), timeout=config.command_timeout_s)
            with contextlib.suppress(ParseError, ValueError):
                info = parse_inspect(station.container, ins.stdout, ins.exit_status)
        if kernel:
            t0 = run_started(info.started_at if info else None)
            since = t0 if t0 and t0 < time.time() + 60 else time.time() - 3600  # a start in the future: distrust
            try:
                klines, kwhy = await read_kernel_log(transport, since, max(config.command_timeout_s, 20.0))
            except TransportError as exc:
                kwhy = f"kernel log not read: {exc}"
    except TransportError as exc:
        return StationLog(station.name, [], f"unreachable: {exc}")
    except OSError as exc:
        return StationLog(station.name, [], f"unreachable: {exc.strerror or exc}")
    finally:
        try:
            await transport.close()
        except Exception:  # closing a dead connection must not mask the result
            pass
    lines = res.stdout.splitlines()
    if res.exit_status != 0:
        detail = (lines[-1] if lines else res.stderr.strip().splitlines()[-1:] or ["no output"])
        detail = detail if isinstance(detail, str) else detail[0]
        return StationLog(station.name, [], f"docker logs {station.container} failed "
                                            f"(exit {res.exit_status}): {detail}")
    return StationLog(station.name, lines, container=info, kernel=klines, kernel_error=kwhy)
