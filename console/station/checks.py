"""Link and preflight checks: "is the cable path healthy end to end, and are both stations ready?".

Every check becomes a ``CheckResult`` (id, station, status, summary, evidence, fix) under the id it
reports when it fails (shared/reference/findings.md), so a healthy pair shows each id as ``pass``.
Commands run concurrently across stations, each with a timeout; identical command lines on a
station run once per pass and are shared by the checks that read them. A station that cannot be
reached fails ``station-reachable`` with the reason (so ``check`` exits 1) and yields ``skip`` for
its other checks, never a hang; the checks that run on the other station (its ping towards it,
its SSH login to it) still run and say what they see. A channel the station refused for a while
("no more sessions") is a busy station, not an unreachable one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict, dataclass

from console.config import Config, Station
from console.config.secrets import redact_env_lines, redact_text
from console.durations import elapsed
from console.probes import ParseError
from console.probes import clock as clock_probe
from console.probes import disk as disk_probe
from console.probes import envfile as env_probe
from console.probes import ethtool as ethtool_probe
from console.probes import iproute as ip_probe
from console.probes import ping as ping_probe
from console.probes import rdma as rdma_probe
from console.probes.docker import parse_image_identity, short_digest
from console.remote import cmdlines as rc
from console.remote.session import make_transport
from console.remote.transport import ChannelRefused, CommandResult, Transport, TransportError
from console.vocabulary import CheckStatus

STATUSES = tuple(CheckStatus)
COUNTER_INTERVAL_S = 1.0
SKEW_LIMIT_S = 0.25
EVIDENCE_MAX = 4000


@dataclass(frozen=True)
class CheckResult:
    id: str
    station: str  # "A"; "A->B" for one direction; "A<->B" for a pair; "A,B" across all stations
    status: CheckStatus
    summary: str
    evidence: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


# The commands the current check ran (evidence when its output cannot be parsed).
_transcript: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("transcript", default=None)


class StationDown(Exception):
    """The station could not be reached; its checks are skipped with this reason."""


class ToolMissing(Exception):
    """A command the check needs is not installed on the station (exit status 127)."""


# Where the tools come from, for the fix of a ToolMissing.
TOOL_PACKAGES = {
    "ethtool": "ethtool", "ip": "iproute2", "rdma": "iproute2", "ping": "iputils-ping", "ssh": "openssh-client",
    "ibv_devinfo": "ibverbs-utils (rdma-core)", "ibdev2netdev": "MLNX_OFED / DOCA-OFED (mlnx-tools)",
    "show_gids": "MLNX_OFED / DOCA-OFED (mlnx-tools)", "ib_write_bw": "perftest", "chronyc": "chrony",
    "timedatectl": "systemd", "docker": "Docker", "nvidia-smi": "the NVIDIA driver", "df": "coreutils",
}


# ------------------------------------------------------------------ the per-run context


class CheckRun:
    """Transports, the memo of command results, and the station reachability of one pass."""

    def __init__(self, config: Config, transports: dict[str, Transport], cmd_timeout: float):
        self.config = config
        self.profile = config.profile
        self.transports = transports
        self.cmd_timeout = cmd_timeout
        self._memo: dict[tuple[str, str], asyncio.Task] = {}
        self._reach: dict[str, asyncio.Task] = {}
        self.started = time.monotonic()

    def station(self, name: str) -> Station:
        return self.config.station(name)

    async def reachable(self, name: str) -> str:
        """The login user on the station; raises StationDown with the reason."""
        if name not in self._reach:
            self._reach[name] = asyncio.ensure_future(self._login(name))
        return await asyncio.shield(self._reach[name])

    async def _login(self, name: str) -> str:
        try:
            res = await self._raw(name, rc.whoami(), self.config.connect_timeout_s + self.cmd_timeout)
        except ChannelRefused as exc:
            raise StationDown(f"busy: {exc}") from None
        except TransportError as exc:
            raise StationDown(f"unreachable: {exc}") from None
        if not res.ok:
            raise StationDown(f"unreachable: 'id -un' failed with status {res.exit_status}: {res.stderr.strip()[:120]}")
        return res.stdout.strip()

    async def _raw(self, name: str, cmd: str, timeout: float) -> CommandResult:
        t = self.transports[name]
        try:
            # the transport times the command itself; this guard also covers waiting for a channel
            return await asyncio.wait_for(t.run(cmd, timeout=timeout), 2 * timeout + 5)
        except TimeoutError:
            raise TransportError(f"{name}: no answer within {timeout:g} s: {cmd[:80]}") from None

    async def run(self, name: str, cmd: str, timeout: float | None = None, tag: str = "") -> CommandResult:
        """Run ``cmd`` on station ``name`` once per pass (``tag`` separates deliberate re-reads)."""
        await self.reachable(name)
        key = (name, tag + cmd)
        if key not in self._memo:
            self._memo[key] = asyncio.ensure_future(self._raw(name, cmd, timeout or self.cmd_timeout))
        try:
            res = await asyncio.shield(self._memo[key])
        except TransportError as exc:
            raise StationDown(str(exc)) from None
        log = _transcript.get()
        if log is not None:
            log.append(evidence(cmd, res, name))
        if res.exit_status == 127:
            tool = cmd.split()[0] if cmd.split() else cmd
            raise ToolMissing(f"{tool} not found on {name}")
        return res

    async def quiet(self, limit_s: float = 10.0) -> None:
        """Wait until the other commands of this pass are done (a busy link widens round trips)."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            pending = [t for t in self._memo.values() if not t.done()]
            if not pending:
                return
            await asyncio.wait(pending, timeout=deadline - time.monotonic())

    async def timed(self, name: str, cmd: str) -> tuple[float, CommandResult, float]:
        """(local send time, result, local receive time) for the clock measurement."""
        await self.reachable(name)
        t0 = time.time()
        try:
            res = await self._raw(name, cmd, self.cmd_timeout)
        except TransportError as exc:
            raise StationDown(str(exc)) from None
        return t0, res, time.time()


def evidence(cmd: str, res: CommandResult, station: str | None = None) -> str:
    where = f"[{station}] " if station else ""
    text = (res.stdout or "") + (res.stderr or "")
    if len(text) > EVIDENCE_MAX:
        text = text[:EVIDENCE_MAX] + "\n... (truncated)"
    tail = "" if res.exit_status == 0 else f"\n(exit status {res.exit_status})"
    return f"{where}$ {cmd}\n{text.rstrip()}{tail}"


def _join(*parts: str) -> str:
    return "\n\n".join(p for p in parts if p)


# ------------------------------------------------------------------ check catalogue

StationFn = Callable[[CheckRun, Station], Awaitable[CheckResult]]
DirFn = Callable[[CheckRun, Station, Station], Awaitable[CheckResult]]
PairFn = Callable[[CheckRun, Station, Station], Awaitable[CheckResult]]
AllFn = Callable[[CheckRun, list[Station]], Awaitable[CheckResult]]


@dataclass(frozen=True)
class Spec:
    id: str
    scope: str  # station | direction | head-to-worker | pair | all | head
    fn: Callable[..., Awaitable[CheckResult]]
    title: str
    needs: tuple[str, ...] = ()  # how the station answers it: "real" commands or simulated shims (lab report)
    login: bool = True  # skipped (with the reason) when a station it needs cannot be reached


# ------------------------------------------------------------------ reachability


async def check_reachable(run: CheckRun, st: Station) -> CheckResult:
    """The gate of every other check of this station: the console can log in and run a command."""
    where = st.host + (f":{st.port}" if st.port else "")
    try:
        user = await run.reachable(st.name)
    except StationDown as exc:
        why = str(exc)
        if why.startswith("busy:"):
            return CheckResult("station-reachable", st.name, CheckStatus.WARN, why, "",
                               "The station refused new SSH channels for a while (sshd MaxSessions); rerun.")
        fix = ("Check that the station is on and its SSH port answers from here (`ssh " + where + " true`), "
               "and the address and port in the config.")
        if "host key" in why:
            fix = ("Verify the host key on the station (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`); an "
                   "unknown key is trusted with --trust-host-key, a changed one only replaced with "
                   "--replace-host-key SHA256:... (the new fingerprint).")
        elif "login refused" in why:
            fix = "Install the console's public key for the configured user on the station (ssh-copy-id)."
        return CheckResult("station-reachable", st.name, CheckStatus.FAIL, why, "", fix)
    return CheckResult("station-reachable", st.name, CheckStatus.PASS, f"SSH login as {user} on {where}")


# ------------------------------------------------------------------ link


async def _ethtool(run: CheckRun, st: Station) -> tuple[str, CommandResult, ethtool_probe.EthtoolLink]:
    cmd = rc.ethtool(st.rail_netdev)
    res = await run.run(st.name, cmd)
    return cmd, res, ethtool_probe.parse_ethtool(res.stdout)


async def check_link_down(run: CheckRun, st: Station) -> CheckResult:
    cmd, res, link = await _ethtool(run, st)
    ev = evidence(cmd, res)
    if link.link_detected:
        return CheckResult("link-down", st.name, CheckStatus.PASS, f"{st.rail_netdev}: link detected", ev)
    note = f" ({link.link_note})" if link.link_note else ""
    fix = (f"Check the cable and both ends: `ip link set dev {rc.q(st.rail_netdev)} up` on both stations, reseat "
           "the QSFP cable, then `ethtool " + rc.q(st.rail_netdev) + "` must say `Link detected: yes`.")
    if link.link_note and "overheat" in link.link_note.lower():
        fix = "The transceiver/NIC reports overheating: check airflow and the cable module, then re-enable the port."
    return CheckResult("link-down", st.name, CheckStatus.FAIL, f"{st.rail_netdev}: no link{note}", ev, fix)


async def check_link_speed(run: CheckRun, st: Station) -> CheckResult:
    cmd, res, link = await _ethtool(run, st)
    want = run.profile.link.speed_mbps
    ev = evidence(cmd, res)
    if link.link_detected is False:
        return CheckResult("link-speed", st.name, CheckStatus.SKIP,
                           f"{st.rail_netdev}: link down, speed unknown", ev)
    if link.speed_mbps == want:
        return CheckResult("link-speed", st.name, CheckStatus.PASS, f"{st.rail_netdev}: {want} Mb/s", ev)
    got = f"{link.speed_mbps} Mb/s" if link.speed_mbps else (link.speed_text or "no Speed line")
    return CheckResult("link-speed", st.name, CheckStatus.FAIL,
                       f"{st.rail_netdev}: {got}, expected {want} Mb/s", ev,
                       f"The rail negotiated below {want} Mb/s: check the cable is rated for it and seated on "
                       "the right ports, and that auto-negotiation is on at both ends (`ethtool -s "
                       f"{st.rail_netdev} autoneg on`).")


async def _mtu(run: CheckRun, st: Station) -> tuple[str, CommandResult, int]:
    cmd = rc.ip_link(st.rail_netdev)
    res = await run.run(st.name, cmd)
    return cmd, res, ip_probe.parse_mtu(res.stdout)


def _mtu_fix(iface: str, mtu: int) -> str:
    return (f"Set the same MTU on both ends: `sudo ip link set dev {iface} mtu {mtu}` on each station, and "
            "persist it (netplan `mtu:` or NetworkManager) so it survives a reboot.")


async def check_mtu_value(run: CheckRun, st: Station) -> CheckResult:
    cmd, res, mtu = await _mtu(run, st)
    want = run.profile.link.mtu
    ev = evidence(cmd, res)
    if mtu == want:
        return CheckResult("mtu-value", st.name, CheckStatus.PASS, f"{st.rail_netdev}: MTU {mtu}", ev)
    return CheckResult("mtu-value", st.name, CheckStatus.FAIL,
                       f"{st.rail_netdev}: MTU {mtu}, the profile wants {want}", ev,
                       _mtu_fix(st.rail_netdev, want))


async def check_mtu_mismatch(run: CheckRun, a: Station, b: Station) -> CheckResult:
    (ca, ra, ma), (cb, rb, mb) = await asyncio.gather(_mtu(run, a), _mtu(run, b))
    ev = _join(evidence(ca, ra, a.name), evidence(cb, rb, b.name))
    label = f"{a.name}<->{b.name}"
    if ma == mb:
        return CheckResult("mtu-mismatch", label, CheckStatus.PASS, f"both ends MTU {ma}", ev)
    return CheckResult("mtu-mismatch", label, CheckStatus.FAIL,
                       f"MTU differs: {a.name} {ma}, {b.name} {mb}", ev,
                       _mtu_fix(b.rail_netdev if mb < ma else a.rail_netdev, max(ma, mb, run.profile.link.mtu)))


async def check_jumbo_ping(run: CheckRun, src: Station, dst: Station) -> CheckResult:
    mtu = run.profile.link.mtu
    size = ping_probe.jumbo_payload(mtu)
    cmd = rc.jumbo_ping(src.rail_netdev, dst.rail_ip, size)
    res = await run.run(src.name, cmd)
    label = f"{src.name}->{dst.name}"
    ev = evidence(cmd, res, src.name)
    try:
        p = ping_probe.parse_ping(res.stdout + res.stderr)
    except ParseError as exc:
        return CheckResult("jumbo-ping", label, CheckStatus.FAIL, f"ping output not understood: {exc}", ev,
                           "Run the command by hand on " + src.name + " and read its error.")
    if p.ok:
        rtt = f", avg {p.rtt_avg_ms:.3f} ms" if p.rtt_avg_ms is not None else ""
        return CheckResult("jumbo-ping", label, CheckStatus.PASS, f"{size}+28 = {mtu} bytes with DF set: "
                           f"{p.received}/{p.transmitted} replies{rtt}", ev)
    why = {
        "local-mtu": f"{src.name}'s own rail MTU is {p.mtu_reported}, below {mtu} ({p.error_line})",
        "frag-needed": f"a hop on the path has MTU {p.mtu_reported} ({p.error_line})",
        "loss": f"{p.loss_pct:g}% loss with DF set and no error: the far end ({dst.name}) or a hop drops "
                f"{mtu}-byte frames (MTU smaller there), or the link is down",
        "partial-loss": f"{p.loss_pct:g}% loss: a flapping link or errors on the rail",
        "no-buffer": f"the kernel could not send ({p.error_line}): link down or frames dropped at the interface",
        "unreachable": f"{dst.rail_ip} unreachable ({p.error_line})",
        "no-route": f"no route to {dst.rail_ip} ({p.error_line})",
        "error": f"ping failed: {p.error_line}",
    }.get(p.failure or "", f"ping failed ({p.failure})")
    if p.failure == "local-mtu":
        fix = f"On {src.name}: `sudo ip link set dev {rc.q(src.rail_netdev)} mtu {mtu}` (and persist it)."
    elif p.failure == "frag-needed":
        fix = f"A switch or hop between the stations has a smaller MTU: raise it to {mtu} (or cable directly)."
    else:
        fix = (f"Compare `ip link show {rc.q(dst.rail_netdev)}` on {dst.name} (MTU {mtu}? carrier?) with "
               f"{src.name}'s; set `sudo ip link set dev {rc.q(dst.rail_netdev)} mtu {mtu}` there and check the link.")
    return CheckResult("jumbo-ping", label, CheckStatus.FAIL, why, ev, fix)


async def check_rail_route(run: CheckRun, src: Station, dst: Station) -> CheckResult:
    cmd = rc.route_get(dst.rail_ip)
    res = await run.run(src.name, cmd)
    ev = evidence(cmd, res)
    route = ip_probe.parse_route_get(res.stdout or res.stderr)
    if route.kind in (None, "local") and route.dev == src.rail_netdev and route.via is None:
        return CheckResult("rail-route", src.name, CheckStatus.PASS,
                           f"{dst.rail_ip} leaves through {route.dev}", ev)
    got = route.kind if route.kind and not route.dev else f"dev {route.dev}" + (f" via {route.via}" if route.via else "")
    return CheckResult("rail-route", src.name, CheckStatus.FAIL,
                       f"{dst.rail_ip} does not leave through {src.rail_netdev} ({got})",
                       ev, f"Give {src.rail_netdev} an address in the rail subnet (`ip addr add .../NN dev "
                       f"{rc.q(src.rail_netdev)}`) and check `ip route get {rc.q(dst.rail_ip)}`; NCCL would otherwise "
                       "bootstrap over another interface.")


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
    r1, r2 = await asyncio.gather(run.run(st.name, c1), run.run(st.name, c2))
    ev = _join(evidence(c1, r1), evidence(c2, r2))
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
    ev = _join(evidence(cmd, first), f"(second read {elapsed(gap)} later)\n" + evidence(cmd, second))
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
    (ra, ea), (rb, eb) = await asyncio.gather(_best_clock(run, a), _best_clock(run, b))
    s, unc = clock_probe.skew(ra, rb)
    ev = _join(ea, eb, f"skew {b.name}-{a.name} = {s:+.4f} s, +/- {unc:.4f} s (half the round trips)")
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


# ------------------------------------------------------------------ access


async def check_ssh(run: CheckRun, src: Station, dst: Station) -> CheckResult:
    target = dst.rail_ip or dst.host
    cmd = rc.ssh_peer(target)
    res = await run.run(src.name, cmd)
    label = f"{src.name}->{dst.name}"
    ev = evidence(cmd, res, src.name)
    if res.ok:
        return CheckResult("ssh-a-to-b", label, CheckStatus.PASS,
                           f"key login {src.name} -> {target} as {res.stdout.strip()}", ev)
    err = (res.stderr.strip().splitlines() or ["no output"])[-1]
    pasted = rc.q(target)  # fix texts are pasted into a shell: quoted like the commands we run
    fix = (f"On {src.name}: `ssh-keygen -t ed25519` (if there is no key), then `ssh-copy-id -- {pasted}` and "
           f"`ssh -- {pasted} true` once to accept the host key; the same user must exist on {dst.name}.")
    if "Host key verification failed" in res.stderr:
        fix = f"On {src.name}: `ssh -- {pasted} true` once and confirm the host key fingerprint of {dst.name}."
    return CheckResult("ssh-a-to-b", label, CheckStatus.FAIL,
                       f"{src.name} cannot log in to {target} without a password: {err}",
                       ev, fix)


async def check_same_user(run: CheckRun, stations: list[Station]) -> CheckResult:
    users = await asyncio.gather(*(run.reachable(s.name) for s in stations))
    label = ",".join(s.name for s in stations)
    ev = "\n".join(f"[{s.name}] $ id -un\n{u}" for s, u in zip(stations, users, strict=True))
    if len(set(users)) == 1:
        return CheckResult("user-mismatch", label, CheckStatus.PASS,
                           f"same user on every station: {users[0]}", ev)
    return CheckResult("user-mismatch", label, CheckStatus.FAIL, "different users: " +
                       ", ".join(f"{s.name}={u}" for s, u in zip(stations, users, strict=True)), ev,
                       "Use the same Linux account on every station (the launch scripts ssh as the same user); "
                       "set `user` in each [[stations]] table.")


# ------------------------------------------------------------------ software and files


async def check_image(run: CheckRun, stations: list[Station]) -> CheckResult:
    image = run.profile.image
    cmd = rc.docker_image_id(image)
    results = await asyncio.gather(*(run.run(s.name, cmd) for s in stations))
    ev = _join(*(evidence(cmd, r, s.name) for s, r in zip(stations, results, strict=True)))
    label = ",".join(s.name for s in stations)
    missing = [s.name for s, r in zip(stations, results, strict=True) if not r.ok or not r.stdout.strip()]
    if missing:
        return CheckResult("image-mismatch", label, CheckStatus.FAIL,
                           f"{image} not present on {', '.join(missing)}", ev,
                           f"`docker pull {image}` (pinned by digest) on {', '.join(missing)}.")
    found = {s.name: parse_image_identity(r.stdout) for s, r in zip(stations, results, strict=True)}
    ids = {name: i for name, i in found.items() if i is not None}
    if len({i.image_id for i in ids.values()}) == 1:  # the image ID is what says "the same image"
        one = next(iter(ids.values()))
        digest = one.digest_for(image)
        return CheckResult("image-mismatch", label, CheckStatus.PASS,
                           f"{image}: same image ID {one.short_id} everywhere"
                           + (f" (registry digest {short_digest(digest)})" if digest else
                              " (no registry digest: built locally?)"), ev)
    head = ids.get(stations[0].name)
    pin = head.digest_for(image) if head else None
    return CheckResult("image-mismatch", label, CheckStatus.FAIL, "image IDs differ: " + ", ".join(
        f"{k} {v.short_id}" + (f" (digest {short_digest(d)})" if (d := v.digest_for(image)) else "")
        for k, v in ids.items()), ev,
        f"Pull one registry digest on every station (`docker pull {pin or image.split(':')[0] + '@sha256:...'}`) "
        "and launch by digest, never by a moving tag; the image ID then matches too.")


async def check_toolkit(run: CheckRun, st: Station) -> CheckResult:
    cmd = rc.docker_runtimes()
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    if not res.ok:
        return CheckResult("container-toolkit", st.name, CheckStatus.FAIL,
                           "docker is not usable by this user", ev,
                           "Install Docker and add the user to the docker group (`sudo usermod -aG docker $USER`).")
    if "nvidia" in res.stdout:
        return CheckResult("container-toolkit", st.name, CheckStatus.PASS,
                           "Docker with the NVIDIA runtime", ev)
    return CheckResult("container-toolkit", st.name, CheckStatus.FAIL, "Docker has no NVIDIA runtime", ev,
                       "Install the NVIDIA Container Toolkit and run `sudo nvidia-ctk runtime configure "
                       "--runtime=docker && sudo systemctl restart docker`.")


async def check_model_config(run: CheckRun, st: Station) -> CheckResult:
    p = run.profile
    cmd = rc.model_config(p.model_dir)
    res = await run.run(st.name, cmd)
    ev = evidence(cmd, res)
    if not res.ok:
        return CheckResult("model-config", st.name, CheckStatus.FAIL, f"no config.json in {p.model_dir}", ev,
                           f"Download {p.model} to {p.model_dir} (or copy it from the head with rsync).")
    mc = disk_probe.parse_model_config(res.stdout)
    problems = []
    if p.architecture and p.architecture not in mc.architectures:
        problems.append(f"architectures {list(mc.architectures)}, expected {p.architecture}")
    if p.quantization and (mc.quantization or "").upper() != p.quantization.upper():
        problems.append(f"quantization {mc.quantization}, expected {p.quantization}")
    if problems:
        return CheckResult("model-config", st.name, CheckStatus.FAIL, "; ".join(problems), ev,
                           f"This is not the checkpoint the profile expects ({p.model}); download the right "
                           "revision.")
    return CheckResult("model-config", st.name, CheckStatus.PASS, f"{p.architecture}, {p.quantization}", ev)


async def check_checkpoint(run: CheckRun, stations: list[Station]) -> CheckResult:
    p = run.profile
    cmd = rc.model_revision(p.model_dir)
    results = await asyncio.gather(*(run.run(s.name, cmd) for s in stations))
    ev = _join(*(evidence(cmd, r, s.name) for s, r in zip(stations, results, strict=True)))
    label = ",".join(s.name for s in stations)
    seen = {}
    for s, r in zip(stations, results, strict=True):
        sums = disk_probe.parse_sha256sum(r.stdout)
        shards = disk_probe.parse_shards(r.stdout)
        if "config.json" not in sums or shards.count == 0:
            return CheckResult("checkpoint-mismatch", label, CheckStatus.FAIL,
                               f"checkpoint incomplete or absent on {s.name}",
                               ev, f"Copy {p.model_dir} from the head: `rsync -a --info=progress2 {p.model_dir}/ "
                               f"{s.name}:{p.model_dir}/`.")
        shard_lines = tuple(ln for ln in r.stdout.splitlines() if ln.endswith(".safetensors"))
        seen[s.name] = (tuple(sorted(sums.items())), shard_lines, shards)
    first = next(iter(seen.values()))
    differ = [n for n, v in seen.items() if v[:2] != first[:2]]
    if differ:
        return CheckResult("checkpoint-mismatch", label, CheckStatus.FAIL,
                           f"checkpoint on {', '.join(differ)} differs from {stations[0].name} "
                           "(config/index digests or shard sizes)", ev,
                           f"Recopy from the head with `rsync -a --checksum {p.model_dir}/ ...`, then compare "
                           "`sha256sum *.safetensors` on both.")
    sh = first[2]
    return CheckResult("checkpoint-mismatch", label, CheckStatus.PASS,
                       f"same revision everywhere: {sh.count} shards, "
                       f"{sh.total_bytes / 1e9:.0f} GB", ev)


async def check_disk(run: CheckRun, st: Station) -> CheckResult:
    p = run.profile
    c1, c2 = rc.disk_free(p.model_dir), rc.model_revision(p.model_dir)
    r1, r2 = await asyncio.gather(run.run(st.name, c1), run.run(st.name, c2))
    ev = _join(evidence(c1, r1), evidence(c2, r2))
    df = disk_probe.parse_df(r1.stdout)
    shards = disk_probe.parse_shards(r2.stdout)
    need = p.checkpoint_gb * 1e9
    free = f"{df.avail_bytes / 1e9:.0f} GB free on {df.mount}"
    if shards.total_bytes >= 0.98 * need:
        return CheckResult("disk-space", st.name, CheckStatus.PASS,
                           f"checkpoint present ({shards.total_bytes / 1e9:.0f} GB); "
                           f"{free}", ev)
    if df.avail_bytes >= need - shards.total_bytes:
        return CheckResult("disk-space", st.name, CheckStatus.PASS,
                           f"{free}, checkpoint needs {p.checkpoint_gb:g} GB", ev)
    return CheckResult("disk-space", st.name, CheckStatus.FAIL,
                       f"{free}; the checkpoint needs {p.checkpoint_gb:g} GB", ev,
                       f"Free space on {df.mount} (old images: `docker image prune`; old checkpoints) or point "
                       "model_dir at a larger disk.")


async def check_env(run: CheckRun, stations: list[Station]) -> CheckResult:
    label = ",".join(s.name for s in stations)
    head = run.config.head
    cmds = [rc.read_file(s.env_file) for s in stations]
    results = await asyncio.gather(*(run.run(s.name, c) for s, c in zip(stations, cmds, strict=True)))
    ev = _join(*(redact_env_lines(evidence(c, r, s.name)) for s, c, r in zip(stations, cmds, results, strict=True)))
    problems: list[str] = []
    for s, r in zip(stations, results, strict=True):
        if not r.ok:
            problems.append(f"{s.name}: no {s.env_file}")
            continue
        try:
            env = env_probe.parse_env(r.stdout)
        except ParseError as exc:
            problems.append(f"{s.name}: {exc}")
            continue
        rank = env_probe.first(env, env_probe.RANK_KEYS)
        if rank is None:
            problems.append(f"{s.name}: no RANK")
        elif rank[1] != str(s.rank):
            problems.append(f"{s.name}: {rank[0]}={rank[1]}, expected {s.rank}")
        for keys, want, what in ((env_probe.HEAD_IP_KEYS, head.rail_ip, "head IP"),
                                 (env_probe.LOCAL_IP_KEYS, s.rail_ip, "own IP"),
                                 (env_probe.NETDEV_KEYS, s.rail_netdev, "rail netdev")):
            got = env_probe.first(env, keys)
            if got and want and got[1] != want:
                problems.append(f"{s.name}: {got[0]}={got[1]}, {what} is {want}")
        got = env_probe.first(env, env_probe.RDMA_KEYS)
        if got and s.rdma_device and s.rdma_device not in re.split(r"[,:=^\s]+", got[1]):
            problems.append(f"{s.name}: {got[0]}={got[1]}, RDMA device is {s.rdma_device}")
        if s.is_head:
            for keys in (env_probe.PEER_IP_KEYS,):
                got = env_probe.first(env, keys)
                workers = {w.rail_ip for w in run.config.workers}
                if got and workers and got[1] not in workers:
                    problems.append(f"{s.name}: {got[0]}={got[1]}, worker IPs are {', '.join(sorted(workers))}")
    if problems:
        return CheckResult("env-mismatch", label, CheckStatus.FAIL, "; ".join(problems), ev,
                           "Write the same rail facts into the env file on every station: RANK=\"0\" on the head, "
                           "1.. on the workers, each end's rail IP, netdev and RDMA device; then "
                           "`source ~/glm53.env` after every reconnect.")
    return CheckResult("env-mismatch", label, CheckStatus.PASS,
                       "env files agree (ranks, rail IPs, devices)", ev)


def _launch_args(config: Config, head: Station) -> list[str] | None:
    """The head's engine arguments as the launch would build them (console.service.engines)."""
    from console.service import engines

    try:
        if config.profile.engine == "vllm":
            return engines.vllm_serve_args(config, head)
        return engines.sglang_args(config, head)
    except (ValueError, KeyError):
        return None


async def check_api_exposed(run: CheckRun, head: Station) -> CheckResult:
    cfg = run.config
    args = _launch_args(cfg, head)
    host = "0.0.0.0"
    if args and "--host" in args[:-1]:
        host = args[args.index("--host") + 1]
    key_in_args = bool(args) and any(a == "--api-key" or a.startswith("--api-key=") for a in args)
    key_configured = bool(cfg.api.api_key_env or cfg.api.api_key_file)
    has_key = key_in_args or (key_configured and cfg.api_key() is not None)
    shown = redact_text(" ".join(args or []))  # --api-key=..., --api-key ... as ***
    ev = (f"head launch arguments: {shown or '(not buildable from this config)'}\n"
          f"API key for the launch: {'yes' if has_key else 'no'} (api.api_key_env / api.api_key_file"
          + (", configured but empty" if key_configured and not has_key else "") + ")")
    port = run.profile.api_port
    if host in ("0.0.0.0", "::", "") and not has_key:
        return CheckResult("api-exposed", head.name, CheckStatus.WARN,
                           f"the API binds {host}:{port} on every interface without --api-key", ev,
                           "Set an API key (api.api_key_env in the config; the launch then passes --api-key), "
                           f"firewall port {port} to the operator's network, and put TLS in front before anyone "
                           "else uses it.")
    return CheckResult("api-exposed", head.name, CheckStatus.PASS,
                       f"API on {host}:{port}" + (" with an API key" if has_key else " (not on every interface)"), ev)


# ------------------------------------------------------------------ registry

SPECS: tuple[Spec, ...] = (
    Spec("station-reachable", "station", check_reachable, "SSH login works", ("sshd",), login=False),
    Spec("link-down", "station", check_link_down, "rail link up", ("ethtool",)),
    Spec("link-speed", "station", check_link_speed, "rail at the profile's speed", ("ethtool",)),
    Spec("mtu-value", "station", check_mtu_value, "rail MTU = profile", ("ip",)),
    Spec("mtu-mismatch", "pair", check_mtu_mismatch, "same MTU both ends", ("ip",)),
    Spec("jumbo-ping", "direction", check_jumbo_ping, "jumbo ping with DF set", ("ping",)),
    Spec("rail-route", "direction-src", check_rail_route, "route to the peer via the rail", ("ip",)),
    Spec("rdma-netdev", "station", check_rdma_netdev, "RDMA device <-> netdev", ("ibdev2netdev",)),
    Spec("rdma-port-down", "station", check_rdma_port, "RDMA port active", ("rdma", "ibv_devinfo")),
    Spec("roce-gid", "station", check_roce_gid, "RoCE v2 GID for the rail IP", ("show_gids",)),
    Spec("rdma-errors", "station", check_rdma_errors, "port error counters", ("sysfs counters",)),
    Spec("clock-unsynced", "station", check_clock_sync, "clock synchronised", ("chronyc", "timedatectl")),
    Spec("clock-skew", "pair", check_clock_skew, "skew between stations", ("date",)),
    Spec("ssh-a-to-b", "head-to-worker", check_ssh, "passwordless SSH head -> worker", ("ssh", "sshd")),
    Spec("user-mismatch", "all", check_same_user, "same Linux user", ("id", "sshd")),
    Spec("image-mismatch", "all", check_image, "same container image", ("docker",)),
    Spec("container-toolkit", "station", check_toolkit, "Docker + NVIDIA toolkit", ("docker",)),
    Spec("model-config", "station", check_model_config, "config.json architecture/quantization", ("files",)),
    Spec("checkpoint-mismatch", "all", check_checkpoint, "same model revision", ("files",)),
    Spec("disk-space", "station", check_disk, "free disk for the checkpoint", ("df",)),
    Spec("env-mismatch", "all", check_env, "env file consistent", ("files",)),
    Spec("api-exposed", "head", check_api_exposed, "API exposure", ("config",)),
)
CHECK_IDS = tuple(s.id for s in SPECS)


def _jobs(config: Config, only: set[str] | None) -> list[tuple[Spec, tuple[Station, ...], str, set[str]]]:
    """(spec, arguments, label, stations it needs) for every check of this pass."""
    head, workers, all_ = config.head, config.workers, list(config.stations)
    jobs = []
    for spec in SPECS:
        targets: list[tuple[tuple[Station, ...], str, set[str]]] = []
        if spec.scope == "station":
            targets = [((s,), s.name, {s.name}) for s in all_]
        elif spec.scope == "pair":
            targets = [((head, w), f"{head.name}<->{w.name}", {head.name, w.name}) for w in workers]
        elif spec.scope == "direction":
            for w in workers:
                targets += [((head, w), f"{head.name}->{w.name}", {head.name}),
                            ((w, head), f"{w.name}->{head.name}", {w.name})]
        elif spec.scope == "direction-src":
            targets = [((head, workers[0]), head.name, {head.name})] if workers else []
            targets += [((w, head), w.name, {w.name}) for w in workers]
        elif spec.scope == "head-to-worker":
            targets = [((head, w), f"{head.name}->{w.name}", {head.name}) for w in workers]
        elif spec.scope == "all":
            targets = [((tuple(all_)), ",".join(s.name for s in all_), {s.name for s in all_})] if len(all_) > 1 \
                else [((tuple(all_)), all_[0].name, {all_[0].name})]
        elif spec.scope == "head":
            targets = [((head,), head.name, set())]
        for args, label, needs in targets:
            if only is None or spec.id in only or f"{spec.id}@{label}" in only:
                jobs.append((spec, args, label, needs))
    return jobs


def _failed_line(log: list[str]) -> str | None:
    """'TOOL failed on STATION: first error line' for the last command that exited non-zero."""
    for entry in reversed(log):
        head, _, body = entry.partition("\n")
        if "(exit status" in body:
            m = re.match(r"\[(\S+)\] \$ (\S+)", head)
            lines = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("(exit status")]
            if m:
                return f"{m.group(2)} failed on {m.group(1)}" + (f": {lines[0].strip()[:160]}" if lines else "")
    return None


# Station fields a check cannot do without (from [[stations]] in the config).
_NEEDS_FIELDS = {
    "link-down": ("rail_netdev",), "link-speed": ("rail_netdev",), "mtu-value": ("rail_netdev",),
    "mtu-mismatch": ("rail_netdev",), "jumbo-ping": ("rail_netdev", "rail_ip"), "rail-route": ("rail_netdev", "rail_ip"),
    "rdma-netdev": ("rdma_device", "rail_netdev"), "rdma-port-down": ("rdma_device",),
    "roce-gid": ("rdma_device", "rail_ip"), "rdma-errors": ("rdma_device",),
}


def _missing_fields(spec: Spec, args: tuple[Station, ...]) -> list[str]:
    return [f"{st.name}.{f}" for st in args for f in _NEEDS_FIELDS.get(spec.id, ()) if not getattr(st, f)]


async def _one(run: CheckRun, spec: Spec, args: tuple[Station, ...], label: str, needs: set[str]) -> CheckResult:
    log: list[str] = []
    _transcript.set(log)
    missing = _missing_fields(spec, args)
    if missing:
        return CheckResult(spec.id, label, CheckStatus.SKIP, f"not configured: {', '.join(missing)}", "",
                           "Set rail_netdev, rdma_device and rail_ip in each [[stations]] table of the config "
                           "(`ibdev2netdev` shows the device -> netdev pairs, `ip -4 addr` the rail IP).")
    try:
        for name in sorted(needs) if spec.login else ():
            await run.reachable(name)
        if spec.scope == "all":
            return await spec.fn(run, list(args))
        return await spec.fn(run, *args)
    except StationDown as exc:
        return CheckResult(spec.id, label, CheckStatus.SKIP, str(exc))
    except ToolMissing as exc:
        tool = str(exc).split()[0]
        pkg = TOOL_PACKAGES.get(tool, "its package")
        return CheckResult(spec.id, label, CheckStatus.FAIL, str(exc), "\n\n".join(log),
                           f"Install {pkg} on the station (DGX OS ships it), or put it on the login shell's PATH.")
    except ParseError as exc:
        why = _failed_line(log)
        return CheckResult(spec.id, label, CheckStatus.FAIL,
                           why or f"output not understood: {exc}", "\n\n".join(log),
                           "Run the command in the evidence by hand on the station; the tool may be missing or "
                           "too old.")
    except Exception as exc:  # one broken check must not hide the others
        return CheckResult(spec.id, label, CheckStatus.FAIL,
                           f"check failed: {exc.__class__.__name__}: {exc}", "\n\n".join(log),
                           "This is a bug in the console's check; please report it with the evidence.")


def unknown_selection(config: Config | None, only: Iterable[str]) -> str | None:
    """The first ``--only`` item that names no check (``id``), or, with a config, no station of
    that check in it (``id@label``)."""
    labels: dict[str, set[str]] = {}
    for spec, _a, label, _n in _jobs(config, None) if config is not None else ():
        labels.setdefault(spec.id, set()).add(label)
    for item in only:
        cid, sep, label = item.partition("@")
        if cid not in CHECK_IDS:
            return f"unknown check {cid!r} (known: {', '.join(CHECK_IDS)})"
        if config is not None and sep and label not in labels.get(cid, set()):
            return (f"check {cid!r} has no station {label!r} in this config "
                    f"(it runs for: {', '.join(sorted(labels.get(cid, set()))) or 'none'})")
    return None


def planned(config: Config, only: Iterable[str] | None = None) -> list[tuple[str, str]]:
    """(id, station label) of every check a pass will report, in order (for placeholder rows)."""
    return [(spec.id, label) for spec, _a, label, _n in _jobs(config, set(only) if only is not None else None)]


async def run_checks(config: Config, transports: dict[str, Transport] | None = None,
                     only: Iterable[str] | None = None, cmd_timeout: float | None = None,
                     on_result: Callable[[CheckResult], None] | None = None) -> list[CheckResult]:
    """Every check (or those named in ``only``: ``id`` or ``id@station-label``), in catalogue order.
    ``on_result`` is called (on the caller's loop) as each check finishes."""
    own = transports is None
    if transports is None:
        transports = {s.name: make_transport(s, config.connect_timeout_s, config.command_timeout_s)
                      for s in config.stations}
    run = CheckRun(config, transports, cmd_timeout or config.command_timeout_s)
    try:
        jobs = _jobs(config, set(only) if only is not None else None)

        async def report(job) -> CheckResult:
            result = await _one(run, *job)
            if on_result is not None:
                on_result(result)
            return result

        return list(await asyncio.gather(*(report(j) for j in jobs)))
    finally:
        for task in list(run._memo.values()) + list(run._reach.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if own:
            await asyncio.gather(*(t.close() for t in transports.values()), return_exceptions=True)


def overall(results: Iterable[CheckResult]) -> int:
    """Exit code: 1 when any check fails, else 0."""
    return 1 if any(r.status == CheckStatus.FAIL for r in results) else 0


def station_summary(results: Iterable[CheckResult], station: str) -> dict[str, int]:
    """Counts per status for the checks that involve ``station`` (for its pane)."""
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        if r.status in counts and station in re.split(r"<->|->|,", r.station):
            counts[r.status] += 1
    return counts


def summary_line(counts: dict[str, int]) -> str:
    """One line for a station pane: ``checks: 1 FAIL, 2 warn, 28 pass`` (failures first)."""
    parts = [f"{counts.get(CheckStatus.FAIL, 0)} FAIL"] if counts.get(CheckStatus.FAIL) else []
    parts += [f"{counts[s]} {s}" for s in (CheckStatus.WARN,
                                           CheckStatus.SKIP, CheckStatus.PASS) if counts.get(s)]
    return "checks: " + (", ".join(parts) if parts else "not run")


def to_json(results: Iterable[CheckResult]) -> str:
    return json.dumps({"checks": [r.to_dict() for r in results]}, indent=2)
