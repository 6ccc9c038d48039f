"""Proving an action did what it says: a start is ready when the head printed its ready line, answers
``/health`` 200 and streams the first token of a real chat completion (retried on busy answers), on a
transport NCCL named in its log; a stop is clean when every station's container is down, the API
port closed, no compute process left and memory back to its pre-launch baseline (``stop_verify``
judges what is read here). After the load the engine's logged KV figure is shown beside the estimate.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any
from urllib.parse import urlsplit

from console.config import Station
from console.probes import docker as docker_probe
from console.probes.nccl_transport import worse
from console.remote.transport import TransportError
from console.sanitize import one_line
from console.service import fit, stop_verify
from console.service.context import ActionContext
from console.service.fit_inputs import read_memory
from console.service.steps import ActionFailed
from console.vocabulary import TRANSPORT_VERDICT, ContainerState, NcclTransport, StepStatus


async def serving(ctx: ActionContext) -> None:
    """The head's ready line, /health, the first token, the transport and the KV figure."""
    head = ctx.cfg.head
    ready_s = ctx.timeouts.ready_s
    ctx.ready_deadline = time.monotonic() + ready_s
    async with ctx.log.step(head.name, "ready") as st:
        f = ctx.follow[head.name]
        t0 = time.monotonic()
        await ctx.follow.wait(lambda: f.ready, ready_s, f"{head.name} to print {f.ready_marker!r}")
        st.detail = f"{f.ready_marker!r} after {time.monotonic() - t0:.1f} s"
    await health(ctx)
    await first_token(ctx)
    await transport(ctx)
    compare_kv(ctx)
    ctx.log.res.summary = (f"serving {ctx.cfg.profile.served_model_name} at {ctx.cfg.api_url_shown()} "
                           f"({len(ctx.cfg.stations)} stations)")


async def health(ctx: ActionContext) -> None:
    from console.serving.client import ApiClient

    head = ctx.cfg.head.name
    limit = ctx.timeouts.health_s
    async with ctx.log.step(head, "health") as st:
        url, shown = ctx.cfg.api_url(), ctx.cfg.api_url_shown()
        deadline = time.monotonic() + limit
        port_seen = False
        async with ApiClient(url, None, timeout=min(5.0, ctx.cfg.api.timeout_s)) as client:
            delay = 0.2
            while True:
                h = await client.health()
                if not port_seen and (h.ok or h.status is not None):  # an HTTP answer: the port is open
                    port_seen = True
                    ctx.log.record(head, "port-open", detail=shown)
                if h.ok:
                    ctx.log.record(head, "health-ok", detail=f"GET {shown}/health -> 200")
                    st.detail = f"GET {shown}/health -> 200"
                    return
                if time.monotonic() + delay > deadline:
                    raise ActionFailed(f"GET {shown}/health never returned 200 within {limit:g} s: {h.error}")
                # the server binds its port just after the ready line: a short, bounded retry
                ctx.follow.raise_if_fatal()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


async def first_token(ctx: ActionContext) -> None:
    """Ready means a reply (console.serving.readiness): the first streamed token, retried on
    busy answers until the launch timeout."""
    from console.serving.client import ApiClient
    from console.serving.readiness import NotReady, served_model
    from console.serving.readiness import first_token as stream_first_token

    head = ctx.cfg.head.name
    async with ctx.log.step(head, "first-token") as st:
        async with ApiClient(ctx.cfg.api_url(), ctx.api_key,
                             timeout=min(10.0, max(5.0, ctx.cfg.api.timeout_s)), stream_timeout=60.0) as client:
            model = await served_model(client, ctx.cfg.profile.served_model_name)

            def retrying(tries: int, err: Exception, delay: float) -> None:
                st.detail = f"try {tries}: {one_line(str(err), 120)}; retrying in {delay:g} s"

            try:
                tok = await stream_first_token(client, model, ctx.ready_deadline, retrying,
                                               ctx.follow.raise_if_fatal)
            except NotReady as exc:
                raise ActionFailed(f"{head} {one_line(exc.detail, 300)}") from None
        ctx.log.record(head, "first-token", tok.at, f"{tok.ttft_ms:.0f} ms after the request ({model})",
                       (("ttft_ms", round(tok.ttft_ms, 1)),))
        st.detail = f"first token {tok.ttft_ms:.0f} ms after the request" + (
            f" (try {tok.tries})" if tok.tries > 1 else "")


def compare_kv(ctx: ActionContext) -> None:
    """After the load: the engine's own KV figure beside the estimate."""
    if ctx.fit is None:
        return
    for f in ctx.fit.fits:
        tr = ctx.follow.trackers.get(f.station)
        ev = next((e for e in tr.progress.timeline if e.event == "kv-cache"), None) if tr else None
        if ev is None:
            continue
        gib = ev.value("gib") if ev.value("gib") is not None else (
            (ev.value("k") or 0) + (ev.value("v") or 0) or None)
        tokens = ev.value("tokens")
        text = fit.compare_logged(f, gib, int(tokens) if tokens is not None else None)
        if text:
            ctx.log.res.notes.append(f"{f.station}: KV cache {text}")


async def transport(ctx: ActionContext) -> None:
    """What NCCL chose on each station (the worse one is the pair's); sockets fail the launch, but
    the service runs, so it is not stopped for it."""
    overall = NcclTransport.UNKNOWN
    gdr_expected = ctx.cfg.profile.link.gpudirect
    for s in ctx.order_start:
        f = ctx.follow.get(s.name)
        t = f.transport.best if f else NcclTransport.UNKNOWN
        overall = worse(overall, t) if overall != NcclTransport.UNKNOWN else t
        async with ctx.log.step(s.name, "transport") as st:
            st.detail = TRANSPORT_VERDICT[t]
            if t == NcclTransport.SOCKET:
                st.status = StepStatus.FAILED
            elif t == NcclTransport.UNKNOWN or (t == NcclTransport.RDMA and gdr_expected):
                st.status = StepStatus.WARN
    ctx.log.res.transport = overall
    if overall == NcclTransport.SOCKET:
        raise ActionFailed("the service is up but NCCL fell back to TCP sockets (not RDMA): check the "
                           "RDMA devices in the container and NCCL_IB_HCA", service_up=True)


async def stopped(ctx: ActionContext, stations: list[Station], states: dict[str, docker_probe.ContainerInfo],
                  baseline: dict[str, dict[str, Any]] | None) -> dict[str, stop_verify.StopVerdict]:
    """Prove the stop on every station: poll until clean or the verify timeout (memory can take
    a few seconds to come back after the container exits)."""
    unified = ctx.cfg.profile.gpu.unified_memory
    api = urlsplit(ctx.cfg.api_url()).netloc.rpartition("@")[2]  # host:port, never the userinfo
    limit = ctx.timeouts.verify_s
    ctx.last_readings = {}

    async def one(s: Station) -> stop_verify.StopVerdict:
        async with ctx.log.step(s.name, "verify-stop") as st:
            t0 = time.monotonic()
            base = (baseline or {}).get(s.name)
            while True:
                info = await ctx.container_state(s)
                reading = await read_memory(ctx.run_cmd, ctx.cfg, s)
                port = await port_state(api) if s.is_head else None
                v = stop_verify.judge(s.name, s.container, info.state, reading, base, unified, port, api,
                                      time.monotonic() - t0)
                ctx.last_readings[s.name] = reading
                if v.clean or info.state == ContainerState.RUNNING or time.monotonic() - t0 >= limit:
                    break
                st.detail = "waiting: " + v.summary()
                await asyncio.sleep(min(1.0, max(0.2, limit / 20)))
            st.detail = v.summary() + f" ({v.seconds:.1f} s)"
            if not v.clean:
                st.status = StepStatus.FAILED
            return v

    out = await asyncio.gather(*(one(s) for s in stations), return_exceptions=True)
    verdicts = {}
    for s, x in zip(stations, out, strict=True):
        if isinstance(x, BaseException):
            if not isinstance(x, (ActionFailed, TransportError)):
                raise x
            x = stop_verify.unverified(s.name, states.get(s.name, docker_probe.ContainerInfo(
                s.container, ContainerState.UNKNOWN)).state, str(x))
        verdicts[s.name] = x
    ctx.log.res.verified.update(verdicts)
    return verdicts


async def port_state(hostport: str, timeout: float = 2.0) -> stop_verify.PortState:
    """From the console: does anything still accept a connection on the API's host:port?"""
    host, _, port_s = hostport.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    port_s = port_s.split("/", 1)[0]
    if not port_s.isdigit():
        return "unknown"
    try:
        _r, w = await asyncio.wait_for(asyncio.open_connection(host, int(port_s)), timeout)
    except (ConnectionRefusedError, ConnectionResetError):
        return "closed"
    except (TimeoutError, OSError):
        return "unknown"
    w.close()
    with contextlib.suppress(Exception):
        await w.wait_closed()
    return "open"
