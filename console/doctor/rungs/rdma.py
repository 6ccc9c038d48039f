"""Rung 2, RDMA on every rail and twin port, both directions: ``ib_write_bw`` in host memory and (where
the profile expects GPUDirect) GPU memory, and ``ib_write_lat``, judged in classes:

- healthy: >= 80 % of the profile's expected RDMA figure (NVIDIA measures 220-230 Gb/s host memory on
  a 400 Gb/s Station rail: that is the reference, not the line rate, which perftest never reaches);
- degraded: below that (a warning down to 50 %, a failure under it);
- stale: <= 12.5 % of the line rate (8-25 Gb/s on a 200 Gb/s Spark port) with the link up at full
  speed: a port in a stale state, cleared by reseating the cable or power-cycling, not by software;
- failed: no result (connect, QP, memory registration errors, a timeout).
The perftest server is always cleaned up (console.station.rdma's server handling, reused).
"""

from __future__ import annotations

import asyncio
import contextlib

from console.doctor import facts
from console.doctor.context import Countdown, DoctorContext
from console.doctor.model import RungResult, Status
from console.probes import ParseError
from console.probes.perftest_lat import parse_lat
from console.remote import cmdlines as rc
from console.remote.transport import ChannelRefused, TransportError
from console.station import rdma as rdma_run
from console.station.checks import StationDown, ToolMissing
from console.vocabulary import CheckStatus

ID = "rdma"
HEALTHY, WARN_FLOOR, STALE = 0.8, 0.5, 0.125
LAT_PORT = 18516
LAT_P99_WARN_US = 10.0
STALE_NEXT = ("A port in a stale state (the link is up at full speed, RDMA crawls): reseat the QSFP cable at both "
              "ends or power-cycle both stations (a driver reload does not clear it), then rerun this rung.")


def classify(gbps: float, line_gbps: float, expected_lo: float) -> tuple[Status, str, str]:
    """(status, class, next step) of one bandwidth figure (pure: tested on the classes' edges)."""
    ref = expected_lo or line_gbps
    if gbps >= HEALTHY * ref:
        return CheckStatus.PASS, "healthy", ""
    if line_gbps and gbps <= STALE * line_gbps:
        return CheckStatus.FAIL, "stale port", STALE_NEXT
    nxt = ("Degraded: compare `ethtool NETDEV` speed on both ends, the cable/port pairing, the MTU at both ends "
           "and PCIe relaxed ordering; the twin port's figure tells a port from a cable.")
    return (CheckStatus.WARN if gbps >= WARN_FLOOR * ref else CheckStatus.FAIL), "degraded", nxt


async def _latency(ctx: DoctorContext, srv, cli, rail_s: facts.RailInfo, gid: dict) -> RungResult:
    label = f"{cli.name}->{srv.name}"
    scmd = rc.perftest_lat_server(rail_s.device, gid.get(srv.name), LAT_PORT)
    server = rdma_run._Server(ctx.transports[srv.name], scmd)
    server.start()
    what = f"{rail_s.device} latency"
    try:
        if not await server.wait_ready(rdma_run.READY_TIMEOUT_S):
            if server.refused is not None:
                return _not_measured(label, what, server.refused)
            return RungResult(ID, label, CheckStatus.FAIL,
                              f"{what}: the ib_write_lat server on {srv.name} never became ready",
                              (f"[{srv.name}] $ {scmd}\n{server.output}",), rdma_run._FIX["rdma-timeout"])
        ccmd = rc.perftest_lat_client(rail_s.device, srv.rail_ip, gid.get(cli.name), LAT_PORT)
        res = await ctx.transports[cli.name].run(ccmd, timeout=rdma_run.RUN_TIMEOUT_S)
        evidence = (f"[{cli.name}] $ {ccmd}\n{(res.stdout + res.stderr).rstrip()}",)
        try:
            lat = parse_lat(res.stdout + res.stderr)
        except ParseError as exc:
            return RungResult(ID, label, CheckStatus.FAIL, f"{what}: output not understood ({exc})", evidence)
        if lat.error:
            return RungResult(ID, label, CheckStatus.FAIL, f"{what}: {lat.error_line}", evidence,
                              rdma_run._FIX.get({"qp-rtr": "rdma-qp", "connect": "rdma-connect"}.get(lat.error, ""),
                                                ""))
        typ, p99 = lat.typical_us or 0.0, lat.p99_us
        text = f"{what}: typical {typ:.2f} us" + (f", p99 {p99:.2f} us" if p99 is not None else " (no p99 column)")
        if p99 is not None and p99 > LAT_P99_WARN_US:
            return RungResult(ID, label, CheckStatus.WARN,
                              text + f" (p99 above {LAT_P99_WARN_US:g} us: retransmits or a "
                              "congested/stale port)", evidence, STALE_NEXT if typ > 4 else "")
        return RungResult(ID, label, CheckStatus.PASS, text, evidence)
    except ChannelRefused as exc:
        return _not_measured(label, what, exc)
    except TransportError as exc:
        return RungResult(ID, label, CheckStatus.FAIL, f"{what}: {exc}", (), rdma_run._FIX["rdma-timeout"])
    finally:
        await asyncio.shield(server.cleanup())


def _not_measured(label: str, what: str, exc: ChannelRefused) -> RungResult:
    return RungResult(ID, label, CheckStatus.SKIP, f"{what}: not measured: {exc}", (),
                      rdma_run._FIX[rdma_run.SHORTAGE_ID])


async def _bandwidth(ctx: DoctorContext, srv, cli, rail_s: facts.RailInfo, memory: str, gid: dict,
                     extra: dict) -> RungResult:
    p = ctx.profile
    run = rdma_run.RdmaRun(rail=rail_s.device, memory=memory, server=srv.name, client=cli.name,
                           line_gbps=p.link.speed_mbps / 1000, expected_gbps=tuple(p.link.rdma_host_gbps))
    run = await rdma_run.run_pair(ctx.config, ctx.transports, run, srv, cli, gid, extra, lambda k, d: None)
    label = f"{cli.name}->{srv.name}"
    where = f"{rail_s.device} {memory} memory"
    evidence = (run.evidence,) if run.evidence else ()
    if run.gbps_avg is None:
        if run.id in rdma_run.NOT_PROVED:  # no SSH channel, no memory over the floor: nothing known about the rail
            return RungResult(ID, label, CheckStatus.SKIP, run.summary, evidence, run.fix)
        if run.id == "rdma-mr" and memory == "gpu":
            return RungResult(ID, label, CheckStatus.WARN,
                              f"{where}: {run.summary.split(': ', 1)[-1]} (GPU memory cannot be "
                              "registered: no GPUDirect RDMA for perftest here)", evidence, run.fix)
        return RungResult(ID, label, CheckStatus.FAIL,
                          f"{where}: {run.summary.split(': ', 1)[-1]}", evidence, run.fix,
                          cause=run.id in ("rdma-qp", "rdma-port-down", "rdma-connect"))
    lo, hi = run.expected_gbps
    status, klass, nxt = classify(run.gbps_avg, run.line_gbps, lo)
    pct = f"{100 * run.gbps_avg / run.line_gbps:.0f}% of the {run.line_gbps:g} Gb/s line" if run.line_gbps else ""
    exp = f"; expected {lo:g}-{hi:g}" if hi else ""
    return RungResult(ID, label, status, f"{where}: {run.gbps_avg:.1f} Gb/s, {klass} ({pct}{exp})", evidence, nxt,
                      cause=status == CheckStatus.FAIL)


async def run(ctx: DoctorContext) -> list[RungResult]:
    out: list[RungResult] = []
    if len(ctx.stations) < 2:
        return [RungResult(ID, ctx.stations[0].name, CheckStatus.SKIP, "one station: no rail to test")]
    p = ctx.profile
    want_gpu = p.link.gpudirect if ctx.options.rdma_gpu is None else ctx.options.rdma_gpu
    plan = []
    for a, b in ctx.pairs():
        try:
            ra, rb = await facts.rails(ctx, a), await facts.rails(ctx, b)
        except (StationDown, ToolMissing) as exc:
            out.append(RungResult(ID, f"{a.name}<->{b.name}", CheckStatus.SKIP, f"rails unknown: {exc}"))
            continue
        theirs = {r.device: r for r in rb}
        plan.append((a, b, [(x, theirs.get(x.device) or (rb[0] if x.primary and rb else None)) for x in ra]))
    per_rail = 2 * ((2 if want_gpu else 1) + (1 if ctx.options.rdma_latency else 0))  # both directions
    steps = Countdown(sum(per_rail for _a, _b, pairs in plan for _x, y in pairs if y is not None))
    for a, b, pairs in plan:
        gpu_extra: dict[str, list[str]] = {a.name: [], b.name: []}
        if want_gpu:
            for st in (a, b):
                with contextlib.suppress(StationDown, ToolMissing):
                    res = await ctx.run(st.name, rc.gpu_index_names())
                    idx = rdma_run.gpu_index(res.stdout, p.gpu.name)
                    gpu_extra[st.name] = [f"--use_cuda={idx if idx is not None else 0}", "--use_cuda_dmabuf"]
        for x, y in pairs:
            if y is None or not x.ip or not y.ip:
                out.append(RungResult(ID, f"{a.name}<->{b.name}", CheckStatus.SKIP,
                                      f"{x.device}: no address on both ends"))
                steps.skip(per_rail if y is not None else 0)
                continue
            sa, sb = facts.rail_station(a, x), facts.rail_station(b, y)
            try:
                gid = {a.name: await rdma_run.gid_for(ctx.transports[a.name], sa, x.device),
                       b.name: await rdma_run.gid_for(ctx.transports[b.name], sb, y.device)}
            except TransportError as exc:
                out.append(RungResult(ID, f"{a.name}<->{b.name}", CheckStatus.SKIP, f"{x.device}: {exc}"))
                steps.skip(per_rail)
                continue
            for srv, cli in ((sb, sa), (sa, sb)):
                kinds = [("host", {a.name: [], b.name: []})] + ([("gpu", gpu_extra)] if want_gpu else [])
                for memory, extra in kinds:
                    ctx.progress(ID, steps.step(f"{x.device} {memory} memory {cli.name} -> {srv.name}"))
                    out.append(await _bandwidth(ctx, srv, cli, x if srv is sa else y, memory, gid, extra))
                if ctx.options.rdma_latency:
                    ctx.progress(ID, steps.step(f"{x.device} latency {cli.name} -> {srv.name}"))
                    out.append(await _latency(ctx, srv, cli, x if srv is sa else y, gid))
    return out
