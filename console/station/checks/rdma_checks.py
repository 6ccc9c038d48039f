"""Checks of the RDMA side of the rail (device <-> netdev, port state, RoCE v2 GID, error counters)
and of the stations' clocks."""

from __future__ import annotations

import asyncio
import time

from console.config import Station
from console.durations import elapsed
from console.probes import clock as clock_probe
from console.probes import rdma as rdma_probe
from console.remote import cmdlines as rc
from console.station.checks.context import (
    COUNTER_INTERVAL_S,
    SKEW_LIMIT_S,
    CheckResult,
    CheckRun,
    evidence,
    join_parts,
)
from console.tasks import gather_owned
from console.vocabulary import CheckStatus

# ------------------------------------------------------------------ RDMA


async def check_rdma_netdev(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.ibdev2netdev()
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    rows = rdma_probe.parse_ibdev2netdev(res.stdout)
    mine = [r for r in rows if r.device == st.rdma_device]
    fix = (f"Set rdma_device/rail_netdev in the config (and NETDEV/RDMA device in {st.env_file}) to a pair "
           "that `ibdev2netdev` shows as `==> NETDEV (Up)`.")
    if not mine:
        return CheckResult("rdma-netdev", st.name, CheckStatus.FAIL,
                           f"no RDMA device {st.rdma_device} in ibdev2netdev", ev, fix)
    if mine[0].netdev != st.rail_netdev:
        return CheckResult("rdma-netdev", st.name, CheckStatus.FAIL,
                           f"{st.rdma_device} maps to {mine[0].netdev}, not {st.rail_netdev}", ev, fix)
    return CheckResult("rdma-netdev", st.name, CheckStatus.PASS,
                       f"{st.rdma_device} port {mine[0].port} ==> {st.rail_netdev}", ev)


async def check_rdma_port(run: CheckRun, st: Station) -> CheckResult:
    c1, c2 = rc.rdma_link(), rc.ibv_devinfo(st.rdma_device)
    r1, r2 = await gather_owned(run.run(st.name, c1), run.run(st.name, c2))
    ev = join_parts(evidence(c1, r1), evidence(c2, r2))
    links = [x for x in rdma_probe.parse_rdma_link(r1.stdout) if x.device == st.rdma_device]
    ports = rdma_probe.parse_ibv_devinfo(r2.stdout) if r2.ok else []
    problems = []
    if links and links[0].state != "ACTIVE":
        problems.append(f"rdma link: state {links[0].state} physical_state {links[0].physical_state}")
    if not ports:
        problems.append(f"ibv_devinfo -d {st.rdma_device} failed")
    elif not ports[0].active:
        problems.append(f"ibv_devinfo: {ports[0].state}")
    elif ports[0].link_layer and ports[0].link_layer != "Ethernet":
        problems.append(f"link_layer {ports[0].link_layer}, RoCE needs Ethernet")
    if problems:
        return CheckResult("rdma-port-down", st.name, CheckStatus.FAIL,
                           f"{st.rdma_device}: " + "; ".join(problems), ev,
                           f"Bring the port up: check the link first (`ethtool {st.rail_netdev}`), then "
                           f"`rdma link show`; a DISABLED port needs `ip link set dev {st.rail_netdev} up` "
                           "or a NIC/firmware reset (mlxconfig/mstfwreset).")
    mtu = f", active_mtu {ports[0].active_mtu}" if ports[0].active_mtu else ""
    return CheckResult("rdma-port-down", st.name, CheckStatus.PASS, f"{st.rdma_device}: PORT_ACTIVE{mtu}", ev)


async def check_roce_gid(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.show_gids(st.rdma_device)
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    gids = rdma_probe.parse_show_gids(res.stdout)
    idx = rdma_probe.roce_v2_index(gids, st.rail_ip, st.rdma_device)
    if idx is None:
        return CheckResult("roce-gid", st.name, CheckStatus.FAIL,
                           f"no RoCE v2 GID for {st.rail_ip} on {st.rdma_device}", ev,
                           f"Assign {st.rail_ip} to {st.rail_netdev} (the GID table follows the netdev's "
                           "addresses) and check `show_gids`; NCCL needs `NCCL_IB_GID_INDEX` = that v2 index.")
    note = "" if idx == 3 else " (not the usual 3: set NCCL_IB_GID_INDEX to it)"
    return CheckResult("roce-gid", st.name, CheckStatus.PASS if idx == 3 else CheckStatus.WARN,
                       f"RoCE v2 GID index {idx} for {st.rail_ip}{note}", ev,
                       "" if idx == 3 else f"export NCCL_IB_GID_INDEX={idx} in the launch environment.")


async def check_rdma_errors(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.rdma_counters(st.rdma_device)
    first = await run.run(st.name, cmd, tag="read1:")
    t1 = time.monotonic()
    # the pass has been running meanwhile: wait out the rest of the interval, at least half of it
    await asyncio.sleep(max(COUNTER_INTERVAL_S - (t1 - run.started), COUNTER_INTERVAL_S / 2))
    second = await run.run(st.name, cmd, tag="read2:")
    gap = time.monotonic() - t1
    ev = join_parts(evidence(cmd, first), f"(second read {elapsed(gap)} later)\n" + evidence(cmd, second))
    if not first.ok or not second.ok:
        return CheckResult("rdma-errors", st.name, CheckStatus.WARN,
                           f"port counters of {st.rdma_device} not readable", ev,
                           "Check that /sys/class/infiniband/DEV/ports/1/counters exists (RDMA driver loaded).")
    a, b = rdma_probe.parse_counters(first.stdout), rdma_probe.parse_counters(second.stdout)
    grown = rdma_probe.counter_growth(a, b)
    if grown:
        g = ", ".join(f"{k} +{v}" for k, v in sorted(grown.items()))
        return CheckResult("rdma-errors", st.name, CheckStatus.FAIL,
                           f"{st.rdma_device} error counters growing: {g}", ev,
                           "Errors are increasing now: reseat or replace the cable/transceiver, check "
                           "`ethtool -S` on both ends; symbol errors mean a bad physical link.")
    nonzero = {k: v for k, v in b.items() if v}
    if nonzero:
        n = ", ".join(f"{k}={v}" for k, v in sorted(nonzero.items()))
        return CheckResult("rdma-errors", st.name, CheckStatus.WARN,
                           f"{st.rdma_device} past errors (not growing): {n}", ev,
                           "Old errors, stable over the interval: watch them after a load test.")
    return CheckResult("rdma-errors", st.name, CheckStatus.PASS,
                       f"{st.rdma_device} error counters 0, not growing", ev)


# ------------------------------------------------------------------ clocks


async def check_clock_sync(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.clock_sync()
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    sync = clock_probe.parse_clock_sync(res.stdout)
    if sync.synchronised:
        off = f", offset {sync.offset_s * 1000:+.3f} ms" if sync.offset_s is not None else ""
        return CheckResult("clock-unsynced", st.name, CheckStatus.PASS,
                           f"synchronised ({sync.source}{off})", ev)
    return CheckResult("clock-unsynced", st.name, CheckStatus.FAIL,
                       f"clock not synchronised ({sync.source})", ev,
                       "Enable NTP: `sudo timedatectl set-ntp true` (or start chrony: `sudo systemctl enable "
                       "--now chrony`), then `chronyc tracking` must show `Leap status : Normal`.")


async def _best_clock(run: CheckRun, st: Station, samples: int = 3) -> tuple[clock_probe.ClockReading, str]:
    best = None
    text = ""
    for _ in range(samples):
        t0, res, t1 = await run.timed(st.name, rc.epoch())
        reading = clock_probe.ClockReading(t0, clock_probe.parse_epoch(res.stdout), t1)
        text += f"sent {t0:.6f} station {reading.remote:.6f} received {t1:.6f}\n"
        if best is None or reading.uncertainty < best.uncertainty:
            best = reading
    assert best is not None
    return best, f"[{st.name}] $ {rc.epoch()} (x{samples}, lowest round trip kept)\n{text.rstrip()}"


async def check_clock_skew(run: CheckRun, a: Station, b: Station) -> CheckResult:
    await asyncio.sleep(0.2)  # let the other checks start their commands, then wait for quiet
    await run.quiet()
    (ra, ea), (rb, eb) = await gather_owned(_best_clock(run, a), _best_clock(run, b))
    s, unc = clock_probe.skew(ra, rb)
    ev = join_parts(ea, eb, f"skew {b.name}-{a.name} = {s:+.4f} s, +/- {unc:.4f} s (half the round trips)")
    label = f"{a.name}<->{b.name}"
    summary = f"{b.name} is {abs(s) * 1000:.0f} ms {'ahead of' if s >= 0 else 'behind'} {a.name} (+/- {unc * 1000:.0f} ms)"
    if abs(s) - unc > SKEW_LIMIT_S:
        return CheckResult("clock-skew", label, CheckStatus.FAIL, summary, ev,
                           "Synchronise both clocks to the same NTP source (chrony), then recheck; skewed "
                           "clocks break log correlation and timeouts between the ranks.")
    if abs(s) > SKEW_LIMIT_S:
        return CheckResult("clock-skew", label, CheckStatus.WARN,
                           summary + ": round trip too slow to tell", ev)
    return CheckResult("clock-skew", label, CheckStatus.PASS, summary, ev)
