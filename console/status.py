"""One-shot status of every station (``dgx-console status``): the same parsers and transport as
the dashboard's streams, run once, concurrently, each station with its own timeout."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx

from console.config import Config, Station
from console.probes import ParseError
from console.probes import docker as docker_probe
from console.probes import nvidia_smi as smi
from console.probes.meminfo import parse_meminfo
from console.remote import commands
from console.remote.transport import HostKeyError, SSHTransport, Transport, TransportError, make_transport


async def connect_with_trust(transport: Transport, trust: bool) -> None:
    """Open the connection; with ``trust`` an unknown host key is shown, then added."""
    if not isinstance(transport, SSHTransport):
        return
    try:
        await transport.connect()
    except HostKeyError as exc:
        if not trust or not exc.fingerprint:
            raise
        print(f"dgx-console: trusting host key of {exc.station} ({exc.host}:{exc.port}): {exc.fingerprint}",
              file=sys.stderr)
        await transport.trust_host_key(exc.fingerprint)
        await transport.connect()


async def station_status(config: Config, station: Station, transport: Transport, trust: bool = False
                         ) -> dict[str, Any]:
    out: dict[str, Any] = {"name": station.name, "rank": station.rank, "reachable": False, "error": None,
                           "gpus": [], "host_memory": None,
                           "container": {"name": station.container, "state": None}}
    try:
        await connect_with_trust(transport, trust)
        gpu_res, mem_res, ctr_res = await asyncio.gather(
            transport.run(commands.gpu_query()),
            transport.run(commands.meminfo_once()),
            transport.run(commands.docker_inspect(station.container)),
        )
        out["reachable"] = True
        errors = []
        if gpu_res.ok:
            try:
                gpus = smi.parse_gpus(gpu_res.stdout)
                out["gpus"] = [
                    {"index": g.index, "name": g.name, "uuid": g.uuid, "memory_used_mib": g.memory_used_mib,
                     "memory_total_mib": g.memory_total_mib, "util_pct": g.util_pct, "temp_c": g.temp_c,
                     "power_w": g.power_w}
                    for g in gpus
                ]
                if any(g.memory_used_mib is None for g in gpus):
                    apps_res = await transport.run(commands.compute_apps_query())
                    if apps_res.ok:
                        apps = smi.parse_compute_apps(apps_res.stdout)
                        for g in out["gpus"]:
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


async def collect_status(config: Config, trust: bool = False, transports: dict[str, Transport] | None = None
                         ) -> dict[str, Any]:
    own = transports is None
    transports = transports or {
        s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s) for s in config.stations
    }
    limit = config.connect_timeout_s + config.command_timeout_s + 2
    try:
        async def one(s: Station) -> dict[str, Any]:
            try:
                return await asyncio.wait_for(station_status(config, s, transports[s.name], trust), limit)
            except TimeoutError:
                return {"name": s.name, "rank": s.rank, "reachable": False,
                        "error": f"{s.name}: no answer within {limit:g} s", "gpus": [], "host_memory": None,
                        "container": {"name": s.container, "state": None}}

        stations, api = await asyncio.gather(asyncio.gather(*(one(s) for s in config.stations)),
                                             api_status(config))
    finally:
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)
    head = config.head.name
    for st in stations:
        # Workers serve no API: their fields are null (unknown), never invented.
        st["api"] = ({"healthy": api["healthy"], "model": api["model"], "url": api["url"], "error": api["error"]}
                     if st["name"] == head else {"healthy": None, "model": None, "url": None, "error": None})
    return {"profile": config.profile.name, "simulated": config.simulated, "stations": list(stations)}

