"""Checks of the path between the stations: reachability, the rail's link, speed and MTU, jumbo
frames with DF set, the route to the peer."""

from __future__ import annotations

import os

from console.config import Station
from console.probes import ParseError
from console.probes import ethtool as ethtool_probe
from console.probes import iproute as ip_probe
from console.probes import ping as ping_probe
from console.remote import cmdlines as rc
from console.remote.transport import CommandResult
from console.station.checks.context import CheckResult, CheckRun, StationDown, evidence, join_parts
from console.tasks import gather_owned
from console.vocabulary import CheckStatus

# ------------------------------------------------------------------ reachability


def login_from_here(st: Station, command: str = "true") -> str:
    """The ``ssh`` line an operator runs on this machine to log in to ``st`` as the console does (its
    port with ``-p``, user with ``-l``, key with ``-i``, known_hosts file), printed in a fix text: it
    must run as printed, so every value is quoted and paths are expanded (a quoted ``~`` is not)."""
    parts = ["ssh", "-o", "ConnectTimeout=10"]
    if st.port:
        parts += ["-p", str(int(st.port))]
    if st.user:
        parts += ["-l", rc.q(st.user)]
    if st.identity_file:
        parts += ["-i", rc.q(os.path.expanduser(st.identity_file)), "-o", "IdentitiesOnly=yes"]
    if st.known_hosts:
        parts += ["-o", rc.q("UserKnownHostsFile=" + os.path.expanduser(st.known_hosts))]
    return " ".join([*parts, "--", rc.q(st.host), command])


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
        fix = (f"Check that the station is on and its SSH port answers from here (`{login_from_here(st)}`), "
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
    fix = (f"Check the cable and both ends: `sudo ip link set dev {rc.q(st.rail_netdev)} up` on both stations, reseat "
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
    (ca, ra, ma), (cb, rb, mb) = await gather_owned(_mtu(run, a), _mtu(run, b))
    ev = join_parts(evidence(ca, ra, a.name), evidence(cb, rb, b.name))
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
