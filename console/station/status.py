"""One-shot status of every station (``dgx-console status``): the same parsers and sessions as
the dashboard's streams, run once, concurrently, each station with its own timeout.

A GPU nvidia-smi could not read is a row with ``"error"`` (what it printed) and null values, next
to the good rows (every row carries ``"error"``: null when fine; additive to the JSON contract)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from console.config import Config, Station
from console.secrets import mask_url, redact_text
from console.probes import ParseError, gpu_health
from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi
from console.probes.docker import parse_time
from console.probes.engine_log import EngineLogTracker, EngineProgress
from console.probes.meminfo import parse_meminfo
from console.probes.ncclras import unavailable as ncclras_unavailable
from console.probes.rails import parse_round
from console.remote import cmdlines
from console.remote.host_keys import connect_with_trust
from console.remote.session import SessionRegistry
from console.remote.transport import CommandTimeout, HostKeyError, Transport, TransportError
from console.serving.probe import api_status as serving_api_status
from console.serving.probe import counter_look
from console.station.messages import (
    AppsSample,
    ConnectionState,
    ContainerUpdate,
    EngineUpdate,
    GpuHealthSample,
    GpuSample,
    HostMemSample,
    LogBatch,
    RailsSample,
    RasSample,
    ServingUpdate,
)
from console.station.progress import job_ras, judge_look
from console.station.ras_monitor import READ_TIMEOUT_S
from console.station.snapshot import progress_json, status_dict
from console.station.state import Stations, StationState
from console.tasks import gather_owned
from console.vocabulary import ConnState


async def station_state(config: Config, station: Station, transport: Transport, trust: bool = False,
                        replace: str | None = None) -> tuple[StationState, str | None]:
    """One round of one-shot reads applied to a fresh ``StationState`` as the messages the live
    monitor posts (so ``status`` says what the dashboard says); with the failure that cut the round
    short after the station answered (a read that broke off, an unreadable ``docker inspect``)."""
    state = StationState.for_station(station)
    state.rails.expected_mbps, state.rails.expected_mtu = config.profile.link.speed_mbps, config.profile.link.mtu
    name = station.name
    try:
        await connect_with_trust(transport, trust, replace)

        async def gpu_read():  # a hung nvidia-smi is that source's failure, not the station's
            try:
                return await transport.run(cmdlines.gpu_query())
            except CommandTimeout as exc:
                return exc

        gpu_res, mem_res, ctr_res = await gather_owned(  # one read failing ends the others (owned)
            gpu_read(),
            transport.run(cmdlines.meminfo_once()),
            transport.run(cmdlines.docker_inspect(station.container)),
        )
        now = time.time()
        state.apply(ConnectionState(name, ConnState.LIVE, last_sample_at=now))
        if isinstance(gpu_res, CommandTimeout):
            state.apply(GpuSample(name, [], now, error=f"nvidia-smi not answering ({gpu_res}); SSH fine"))
        elif gpu_res.exit_status == cmdlines.KILLED_STATUS and not gpu_res.stdout.strip():
            state.apply(GpuSample(name, [], now, error=smi.not_answering(cmdlines.TOOL_LIMIT_S)))
        # A broken GPU makes nvidia-smi exit non-zero while it still prints the good rows: parse anyway.
        elif gpu_res.ok or gpu_res.stdout.strip():
            try:
                state.apply(GpuSample(name, smi.parse_gpus(gpu_res.stdout), now))
            except ParseError as exc:
                state.apply(GpuSample(name, [], now, error=str(exc)))
            if state.unified_gpus:  # GB10: the processes hold the only GPU memory figure
                apps_res = await transport.run(cmdlines.compute_apps_query())
                if apps_res.ok:
                    try:
                        state.apply(AppsSample(name, smi.parse_compute_apps(apps_res.stdout), now))
                    except ParseError as exc:
                        state.apply(AppsSample(name, [], now, error=str(exc)))
        else:
            failed = (gpu_res.stderr or gpu_res.stdout).strip()[:160]
            state.apply(GpuSample(name, [], now, error=f"nvidia-smi failed: {failed}"))
        if mem_res.ok:
            try:
                state.apply(HostMemSample(name, parse_meminfo(mem_res.stdout), now))
            except ParseError as exc:
                state.apply(HostMemSample(name, None, now, error=str(exc)))
        state.apply(ContainerUpdate(name, docker_probe.parse_inspect(station.container, ctr_res.stdout,
                                                                     ctr_res.exit_status), now))
        if state.gpus and not state.gpu_error:  # each GPU's health, the rail
            await read_health(station, transport, state, now)
    except TransportError as exc:
        if state.conn.live:  # it answered, then a read broke off
            return state, str(exc)
        if isinstance(exc, HostKeyError):
            kind = ConnState.HOST_KEY_CHANGED if exc.changed else ConnState.HOST_KEY_UNKNOWN
            state.apply(ConnectionState(name, kind, str(exc), host_key=exc))
        else:
            state.apply(ConnectionState(name, ConnState.UNREACHABLE, str(exc)))
    except ParseError as exc:  # docker inspect said something we cannot read
        return state, str(exc)
    return state, None


async def read_health(station: Station, transport: Transport, state: StationState, now: float) -> None:
    """One round of the health query and the rails read (the live stream's, once), applied as its
    messages; an older driver's field names are asked for when the newer ones are refused."""
    res = await transport.run(cmdlines.gpu_health_query())
    try:
        state.apply(GpuHealthSample(station.name, gpu_health.parse_health(res.stdout), now))
    except gpu_health.InvalidField:
        res = await transport.run(cmdlines.gpu_health_query(prefix=gpu_health.THROTTLE_PREFIX))
        with contextlib.suppress(gpu_health.InvalidField):
            state.apply(GpuHealthSample(station.name, gpu_health.parse_health(res.stdout), now))
    if station.rail_netdev:
        res = await transport.run(cmdlines.rails_once([(station.rail_netdev, station.rdma_device or "")]))
        state.apply(RailsSample(station.name, parse_round(res.stdout.splitlines(), [station.rail_netdev]), now))


#: How much of a container's log ``status`` reads to tell the engine's phase when the API is down.
ENGINE_LOG_TAIL = 5000


async def engine_status(config: Config, station: Station, transport: Transport
                        ) -> tuple[EngineProgress, str | None] | None:
    """The engine phase from the tail of the container's log (None when it cannot be read): why an API
    does not answer yet — still loading, or failed — without the operator reading the log; with the
    last line's docker stamp (how long the start-up has been silent)."""
    try:
        res = await transport.run(cmdlines.docker_logs(station.container, tail=ENGINE_LOG_TAIL, follow=False))
    except TransportError:
        return None
    if not res.ok:
        return None
    tracker = EngineLogTracker(config.profile.engine, head=station.is_head)
    split = [docker_probe.split_timestamp(x) for x in res.stdout.splitlines()]
    tracker.feed_batch([line for _stamp, line in split])
    return tracker.progress, next((stamp for stamp, _line in reversed(split) if stamp), None)


async def api_status(config: Config) -> dict[str, Any]:
    """The head's API through the one bounded client (console/serving/probe.py)."""
    return await serving_api_status(config.api_url(), config.api_key(), config.api.timeout_s)


async def collect_status(config: Config, trust: bool = False, transports: dict[str, Transport] | None = None,
                         replace: str | None = None) -> dict[str, Any]:
    own = transports is None
    registry = SessionRegistry(config) if own else None
    transports = transports or registry.transports()  # type: ignore[union-attr]
    limit = config.connect_timeout_s + config.command_timeout_s + 2
    try:
        async def one(s: Station) -> tuple[StationState, str | None]:
            try:
                return await asyncio.wait_for(station_state(config, s, transports[s.name], trust, replace), limit)
            except TimeoutError:
                state = StationState.for_station(s)
                state.apply(ConnectionState(s.name, ConnState.UNREACHABLE, f"{s.name}: no answer within {limit:g} s"))
                return state, None

        read, api, looks = await gather_owned(gather_owned(*(one(s) for s in config.stations)), api_status(config),
                                              counter_look(config.api_url(), config.api_key(), config.api.timeout_s))
        # Only when the API does not answer: the engine's own log says whether it is still loading or
        # failed ("not healthy (ConnectError)" alone reads as an outage while the weights load).
        if not api["healthy"]:
            # An exited container's log is the evidence of why it stopped: read it too.
            present = [(state, s) for (state, _f), s in zip(read, config.stations, strict=True)
                       if state.conn.live and state.container is not None and state.container.state != "absent"]
            phases = await asyncio.gather(*(asyncio.wait_for(engine_status(config, s, transports[s.name]), limit)
                                            for _st, s in present), return_exceptions=True)
            for (state, s), p in zip(present, phases, strict=True):
                if isinstance(p, tuple):
                    progress, stamp = p
                    last = parse_time(stamp) if stamp else None  # the phase began no later than the last line
                    state.apply(EngineUpdate(s.name, progress, at=min(last, time.time()) if last else None))
                    if stamp:
                        state.apply(LogBatch(s.name, ["(the log's last line)"], stamps=[stamp]))
        ras = await _ras_reads([st for st, _f in read], transports, limit)
    finally:
        if registry is not None:
            await registry.close()
    head = config.head.name
    states = [state for state, _f in read]
    fleet = Stations(states, head=head)  # one RAS watch for the job
    for sample in ras:
        fleet.apply(sample)
    head_state = next((st for st in states if st.name == head), None)
    if head_state is not None:
        for snap in looks:
            head_state.apply(ServingUpdate(snap, at=snap.polled_at))
    now = time.time()
    look_s = (looks[-1].polled_at or now) - (looks[0].polled_at or now) if len(looks) > 1 else 0.0
    stations = []
    for state, failure in read:
        st = status_dict(state, failure)  # "engine": read only while the API does not answer
        # "progress" and "progress_since_s" (additions)
        st |= progress_json(judge_look(state, head_state, now, config.ui.progress_window_s, look_s,
                                       bool(api["healthy"]), states), now)
        st["ras"] = job_ras(states, now).json(now)  # one read: a spread is only suspect, a rank gone is stuck
        # Workers serve no API: their fields are null (unknown), never invented.
        # the URL's userinfo and any secret in the error are masked (console.secrets)
        st["api"] = ({"healthy": api["healthy"], "model": api["model"], "url": mask_url(api["url"] or ""),
                      "error": api["error"] and redact_text(api["error"])}
                     if st["name"] == head else {"healthy": None, "model": None, "url": None, "error": None})
        stations.append(st)
    return {"profile": config.profile.name, "simulated": config.simulated, "stations": stations}


RAS_LOOK_GAP_S = 1.0  # status reads RAS twice this far apart: a spread that holds, or counts that move


async def _ras_reads(states: list[StationState], transports: dict[str, Transport], limit: float) -> list[RasSample]:
    """Two reads of NCCL's RAS report for ``status``, RAS_LOOK_GAP_S apart: on the head when its
    container runs, else on the first station by rank whose container runs ([]: none runs)."""
    up = sorted((s for s in states if s.conn.live and s.container is not None and s.container.state == "running"),
                key=lambda s: (not s.head, s.rank))
    if not up:
        return []
    st = up[0]
    container = st.container.name if st.container is not None and st.container.name else st.container_name
    out: list[RasSample] = []
    for k in range(2):
        if k:
            await asyncio.sleep(RAS_LOOK_GAP_S)
        at = time.time()
        try:
            res = await asyncio.wait_for(transports[st.name].run(cmdlines.ncclras_watch(container),
                                                                 timeout=READ_TIMEOUT_S), limit)
        except (TransportError, TimeoutError) as exc:
            out.append(RasSample(st.name, "", at, error=f"{type(exc).__name__}: {exc}"))
            break
        out.append(RasSample(st.name, res.stdout + res.stderr, at))
        if ncclras_unavailable(res.stdout + res.stderr):
            break  # no RAS service: a second read says the same
    return out
