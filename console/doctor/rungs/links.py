"""Rung 1, reach and links: the link and clock checks of ``dgx-console check`` on every station pair,
plus a jumbo-frame ping from every station to every other station's address on every rail (twin ports
too)."""

from __future__ import annotations

from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.station.checks import CheckResult, StationDown, ToolMissing, run_checks
from console.station.checks.links import check_jumbo_ping
from console.tasks import gather_owned
from console.vocabulary import CheckStatus

ID = "links"
LINK_CHECKS = ("link-down", "link-speed", "mtu-value", "mtu-mismatch", "rail-route", "rdma-netdev",
               "rdma-port-down", "roce-gid", "rdma-errors", "ssh-a-to-b",
               # the stations' clocks: a skew breaks NCCL's and the engines' timeouts between the ranks and
               # every comparison of their logs (the ladder never said so)
               "clock-unsynced", "clock-skew",
               "rail-live")  # the rail as the dashboard's rails loop reads it (same read, same tracker)
CAUSES = {"link-down", "link-speed", "mtu-value", "mtu-mismatch", "jumbo-ping", "rail-route", "rdma-netdev",
          "rdma-port-down", "roce-gid", "rail-live"}


def from_check(r: CheckResult, what: str | None = None) -> RungResult:
    return RungResult(ID, r.station, r.status, f"{what or r.id}: {r.summary}",  # type: ignore[arg-type]
                      (r.evidence,) if r.evidence else (), r.fix, cause=r.status == CheckStatus.FAIL and r.id in CAUSES)


async def run(ctx: DoctorContext) -> list[RungResult]:
    ctx.progress(ID, "link checks on every rail pair")
    checks = await run_checks(ctx.config, ctx.transports, only=LINK_CHECKS,
                              cmd_timeout=ctx.options.cmd_timeout_s or ctx.config.command_timeout_s)
    out = [from_check(r) for r in checks]
    if len(ctx.stations) < 2:
        return out
    ctx.progress(ID, "jumbo pings to every other station's rail addresses")
    rails: dict[str, list[facts.RailInfo]] = {}
    for st in ctx.stations:
        try:
            rails[st.name] = await facts.rails(ctx, st)
        except (StationDown, ToolMissing) as exc:
            out.append(RungResult(ID, st.name, CheckStatus.SKIP, f"rails of {st.name} unknown: {exc}"))
            rails[st.name] = []

    async def ping(src, dst, a: facts.RailInfo, b: facts.RailInfo) -> RungResult:
        label = f"{src.name}->{dst.name}"
        what = f"jumbo ping {a.device}" + ("" if a.primary else " (twin port)")
        if not a.ip or not b.ip:
            return RungResult(ID, label, CheckStatus.SKIP, f"{what}: no IPv4 address on "
                              + (f"{src.name} {a.netdev}" if not a.ip else f"{dst.name} {b.netdev}"))
        try:
            r = await check_jumbo_ping(ctx.cmd, facts.rail_station(src, a), facts.rail_station(dst, b))
        except (StationDown, ToolMissing) as exc:
            return RungResult(ID, label, CheckStatus.SKIP, f"{what}: {exc}")
        return from_check(r, what)

    jobs = []
    for src in ctx.stations:
        for dst in ctx.stations:
            if src is dst:
                continue
            theirs = {r.device: r for r in rails[dst.name]}
            for a in rails[src.name]:
                b = theirs.get(a.device) or (rails[dst.name][0] if a.primary and rails[dst.name] else None)
                if b is not None:
                    jobs.append(ping(src, dst, a, b))
    out += await gather_owned(*jobs)
    return out
