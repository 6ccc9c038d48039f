"""One-shot status of every station (``dgx-console status``): the same parsers and sessions as
the dashboard's streams, run once, concurrently, each station with its own timeout.

A GPU nvidia-smi could not read is a row with ``"error"`` (what it printed) and null values, next
to the good rows (every row carries ``"error"``: null when fine; additive to the JSON contract)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from console.config import Config, Station
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi
from console.probes.engine_log import EngineLogTracker, EngineProgress
from console.probes.meminfo import parse_meminfo
from console.remote import cmdlines
from console.remote.host_keys import connect_with_trust
from console.remote.session import SessionRegistry
from console.remote.transport import Transport, TransportError


def gpu_dict(g: smi.GpuReading) -> dict[str, Any]:
    """One GPU as ``status --json`` and ``watch --json`` show it (unknown values null)."""
    return {"index": g.index, "name": g.name or None, "uuid": g.uuid or None, "memory_used_mib": g.memory_used_mib,
            "memory_total_mib": g.memory_total_mib, "util_pct": g.util_pct, "temp_c": g.temp_c,
            "power_w": g.power_w, "error": g.error}


async def station_status(config: Config, station: Station, transport: Transport, trust: bool = False,
                         replace: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": station.name, "rank": station.rank, "reachable": False, "error": None,
                           "gpus": [], "host_memory": None,
                           "container": {"name": station.container, "state": None}}
    try:
        await connect_with_trust(transport, trust, replace)
        gpu_res, mem_res, ctr_res = await asyncio.gather(
            transport.run(cmdlines.gpu_query()),
            transport.run(cmdlines.meminfo_once()),
            transport.run(cmdlines.docker_inspect(station.container)),
        )
        out["reachable"] = True
        errors = []
        # A broken GPU makes nvidia-smi exit non-zero while it still prints the good rows: parse anyway.
        if gpu_res.ok or gpu_res.stdout.strip():
            try:
                gpus = smi.parse_gpus(gpu_res.stdout)
                out["gpus"] = [gpu_dict(g) for g in gpus]
                errors += [f"GPU{g.index}: {g.error}" for g in gpus if g.error]
                if any(g.memory_used_mib is None and g.name for g in gpus):
                    apps_res = await transport.run(cmdlines.compute_apps_query())
                    if apps_res.ok:
                        apps = smi.parse_compute_apps(apps_res.stdout)
                        for g in (g for g in out["gpus"] if g["name"]):
                            used = [a.used_memory_mib for a in apps if a.gpu_uuid == g["uuid"] and a.used_memory_mib]
                            g["process_memory_mib"] = sum(used) if used else 0
            except ParseError as exc:
                errors.append(str(exc))
        else:
            errors.append(f"nvidia-smi failed: {(gpu_res.stderr or gpu_res.stdout).strip()[:160]}")
        if mem_res.ok:
            try:
                m = parse_meminfo(mem_res.stdout)
                out["host_memory"] = {"total_mib": m.total_mib, "available_mib": m.available_mib}
            except ParseError as exc:
                errors.append(str(exc))
        info = docker_probe.parse_inspect(station.container, ctr_res.stdout, ctr_res.exit_status)
        out["container"] = {"name": info.name, "state": info.state, "started_at": info.started_at,
                            "exit_code": info.exit_code, "image": info.image,
                            "image_id": info.image_id}  # the local ID; "image" is the reference it ran
        out["error"] = "; ".join(errors) or None
    except TransportError as exc:
        out["error"] = str(exc)
    except ParseError as exc:
        out["error"] = str(exc)
    return out


#: How much of a container's log ``status`` reads to tell the engine's phase when the API is down.
ENGINE_LOG_TAIL = 5000


def engine_dict(p: EngineProgress | None) -> dict[str, Any] | None:
    """The engine phase as ``status --json`` and ``watch --json`` show it (None: not read)."""
    if p is None:
        return None
    return {"phase": p.phase, "load_pct": p.load_pct, "transport": p.transport, "fatal": p.fatal}


async def engine_status(config: Config, station: Station, transport: Transport) -> EngineProgress | None:
    """The engine phase from the tail of the container's log (None when it cannot be read): why an API
    does not answer yet — still loading, or failed — without the operator reading the log."""
    try:
        res = await transport.run(cmdlines.docker_logs(station.container, tail=ENGINE_LOG_TAIL, follow=False))
    except TransportError:
        return None
    if not res.ok:
        return None
    tracker = EngineLogTracker(config.profile.engine, head=station.is_head)
    tracker.feed_batch([docker_probe.split_timestamp(x)[1] for x in res.stdout.splitlines()])
    return tracker.progress


async def api_status(config: Config) -> dict[str, Any]:
    url = config.api_url()
    res: dict[str, Any] = {"url": url, "healthy": False, "model": None, "error": None}
    headers = {}
    key = config.api_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        async with httpx.AsyncClient(timeout=config.api.timeout_s, headers=headers) as client:
            h = await client.get(url + "/health")
            res["healthy"] = h.status_code == 200
            if h.status_code != 200:
                res["error"] = f"/health returned {h.status_code}"
            m = await client.get(url + "/v1/models")
            if m.status_code == 200:
                data = m.json().get("data") or []
                res["model"] = data[0].get("id") if data else None
            elif m.status_code == 401:
                res["error"] = "/v1/models returned 401: API key missing or wrong (api.api_key_env)"
    except httpx.HTTPError as exc:
        res["error"] = f"{type(exc).__name__}: {exc}".strip(": ") or "connection failed"
    return res


async def collect_status(config: Config, trust: bool = False, transports: dict[str, Transport] | None = None,
                         replace: str | None = None) -> dict[str, Any]:
    own = transports is None
    registry = SessionRegistry(config) if own else None
    transports = transports or registry.transports()  # type: ignore[union-attr]
    limit = config.connect_timeout_s + config.command_timeout_s + 2
    try:
        async def one(s: Station) -> dict[str, Any]:
            try:
                return await asyncio.wait_for(station_status(config, s, transports[s.name], trust, replace), limit)
            except TimeoutError:
                return {"name": s.name, "rank": s.rank, "reachable": False,
                        "error": f"{s.name}: no answer within {limit:g} s", "gpus": [], "host_memory": None,
                        "container": {"name": s.container, "state": None}}

        stations, api = await asyncio.gather(asyncio.gather(*(one(s) for s in config.stations)),
                                             api_status(config))
        # Only when the API does not answer: the engine's own log says whether it is still loading or
        # failed ("not healthy (ConnectError)" alone reads as an outage while the weights load).
        if not api["healthy"]:
            # An exited container's log is the evidence of why it stopped: read it too.
            present = [(st, s) for st, s in zip(stations, config.stations, strict=True)
                       if st["reachable"] and st["container"].get("state") not in (None, "absent")]
            phases = await asyncio.gather(*(asyncio.wait_for(engine_status(config, s, transports[s.name]), limit)
                                            for _st, s in present), return_exceptions=True)
            for (st, _s), p in zip(present, phases, strict=True):
                st["engine"] = engine_dict(p if isinstance(p, EngineProgress) else None)
    finally:
        if registry is not None:
            await registry.close()
    head = config.head.name
    for st in stations:
        st.setdefault("engine", None)  # read only while the API does not answer
        # Workers serve no API: their fields are null (unknown), never invented.
        st["api"] = ({"healthy": api["healthy"], "model": api["model"], "url": api["url"], "error": api["error"]}
                     if st["name"] == head else {"healthy": None, "model": None, "url": None, "error": None})
    return {"profile": config.profile.name, "simulated": config.simulated, "stations": list(stations)}

