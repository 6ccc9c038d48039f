"""Rung 5, addresses: per station, which address each part uses -- the SSH host, the rail IP, the
NCCL socket interface, the Gloo interface, the head/master address in the launch command, and
``VLLM_HOST_IP`` / ``SGLANG_HOST_IP`` / the Ray node IP -- and which interface holds each. A
management address where the fabric is expected, and a master address that is not the head's rail
address, fail and name the cause."""

from __future__ import annotations

from console.config import Station
from console.doctor import facts
from console.doctor.context import DoctorContext
from console.doctor.model import RungResult
from console.probes import docker_env as de
from console.probes.iproute import parse_route_get
from console.remote import cmdlines as rc
from console.station.checks import StationDown, ToolMissing
from console.vocabulary import CheckStatus

ID = "addresses"


def iface_of(addrs: dict[str, list[str]], ip: str) -> str | None:
    return next((i for i, ips in addrs.items() if ip in ips), None)


def master_of(argv: list[str] | tuple[str, ...]) -> tuple[str | None, str]:
    """The head address a launch command names, and the flag that names it."""
    for flag in ("--master-addr", "--master_addr"):
        if v := de.flag_value(argv, flag):
            return v, flag
    if v := de.flag_value(argv, "--dist-init-addr"):
        return v.rsplit(":", 1)[0].strip("[]"), "--dist-init-addr"
    for a in argv:  # ray start --address=HEAD:6379 inside a bash -c script
        for word in str(a).replace(";", " ").split():
            if word.startswith("--address="):
                return word.split("=", 1)[1].rsplit(":", 1)[0], "ray --address"
    return None, ""


def node_ip_of(argv: list[str] | tuple[str, ...]) -> str | None:
    for a in argv:
        for word in str(a).replace(";", " ").split():
            if word.startswith("--node-ip-address="):
                return word.split("=", 1)[1]
    return None


async def _gather(ctx: DoctorContext, st: Station) -> dict:
    c = await facts.container(ctx, st)
    addrs, addr_ev = await facts.addresses(ctx, st)
    if c.runtime is not None and c.runtime.argv:
        argv, env, source = list(c.runtime.argv), dict(c.runtime.env), f"docker inspect {c.name}"
    else:
        argv = facts.launch_argv_of_config(ctx.config, st)
        env, source = facts.launch_env_of_config(ctx.config, st), "the console's launch command (no container yet)"
    return {"c": c, "addrs": addrs, "addr_ev": addr_ev, "argv": argv, "env": env, "source": source}


async def run(ctx: DoctorContext) -> list[RungResult]:
    stations = ctx.stations
    fs, out = await ctx.per_station(ID, lambda s: _gather(ctx, s))
    head = ctx.config.head
    head_addrs = fs.get(head.name, {}).get("addrs", {})
    for s in stations:
        f = fs.get(s.name)
        if f is None:
            continue
        addrs, rail = f["addrs"], s.rail_netdev
        evidence = [f["addr_ev"], f"[{s.name}] launch command ({f['source']}):\n" + " ".join(f["argv"])]
        table = [f"SSH host {s.host}" + (f" ({iface_of(addrs, s.host)})" if iface_of(addrs, s.host) else ""),
                 f"rail {s.rail_ip or '?'} on {rail or '?'}"]
        problems: list[RungResult] = []
        if s.rail_ip and rail and s.rail_ip not in addrs.get(rail, []):
            where = iface_of(addrs, s.rail_ip)
            problems.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                       f"the rail address {s.rail_ip} is not on {rail}"
                                       + (f" but on {where}" if where else " (nor on any interface)"),
                                       tuple(evidence), f"Assign {s.rail_ip} to {rail} on {s.name} (netplan).",
                                       cause=True))
        for var, what in (("NCCL_SOCKET_IFNAME", "NCCL socket"), ("GLOO_SOCKET_IFNAME", "Gloo")):
            val = f["env"].get(var)
            if val is None:
                table.append(f"{what} interface: not set")
                continue
            chosen = [i for i in addrs if de.ifname_matches(val, i)]
            ips = [ip for i in chosen for ip in addrs[i]]
            table.append(f"{what} {var}={val} -> " + (", ".join(f"{i} {' '.join(addrs[i])}" for i in chosen)
                                                       or "no interface"))
            if rail and chosen and rail not in chosen:
                problems.append(RungResult(ID, s.name, CheckStatus.FAIL, f"{var}={val} puts {what} traffic on "
                                           f"{', '.join(chosen)} ({', '.join(ips)}), not the rail {rail}",
                                           tuple(evidence), f"Set {var}={rail} on {s.name}.", cause=True,
                                           suggest=((s.name, var, rail),) if var.startswith("NCCL") else ()))
        master, flag = master_of(f["argv"])
        if master:
            where = iface_of(head_addrs, master)
            table.append(f"head address ({flag}) {master}" + (f" = {head.name}'s {where}" if where else ""))
            if head.rail_ip and master != head.rail_ip:
                mgmt = where is not None and where != head.rail_netdev
                summary = (f"{flag} {master} is {head.name}'s management address ({where}), not its rail address "
                           f"{head.rail_ip}: rendezvous and bootstrap leave over the management network"
                           if mgmt else f"{flag} {master} is not the head's rail address {head.rail_ip}"
                           + ("" if where else f" (no interface of {head.name} has it)"))
                problems.append(RungResult(ID, s.name, CheckStatus.FAIL, summary, tuple(evidence + [
                    fs.get(head.name, {}).get("addr_ev", "")]), f"Launch every station with {flag} {head.rail_ip} "
                    "(the head's rail address; the console's own launch does).", cause=True))
            elif s.name != head.name:
                with_route = await _route(ctx, s, master)
                if with_route is not None:
                    route, rev = with_route
                    evidence.append(rev)
                    table.append(f"route to it: dev {route.dev}")
                    if rail and route.dev and route.dev != rail:
                        problems.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                                   f"{s.name} reaches {master} through "
                                                   f"{route.dev}, not the rail {rail}", tuple(evidence),
                                                   f"Give {rail} an address in the rail subnet on {s.name}.",
                                                   cause=True))
        for var in ("VLLM_HOST_IP", "SGLANG_HOST_IP"):
            val = f["env"].get(var)
            if val is None:
                continue
            where = iface_of(addrs, val)
            table.append(f"{var}={val}" + (f" ({where})" if where else ""))
            if s.rail_ip and val != s.rail_ip:
                problems.append(RungResult(ID, s.name, CheckStatus.FAIL, f"{var}={val} is "
                                           + (f"{s.name}'s {where} address" if where else "no address of " + s.name)
                                           + f", not its rail address {s.rail_ip}", tuple(evidence),
                                           f"Set {var}={s.rail_ip} on {s.name}.", cause=True))
        node_ip = node_ip_of(f["argv"])
        if node_ip:
            table.append(f"Ray node IP {node_ip}")
            if s.rail_ip and node_ip != s.rail_ip:
                problems.append(RungResult(ID, s.name, CheckStatus.FAIL,
                                           f"ray --node-ip-address={node_ip} is not {s.name}'s "
                                           f"rail address {s.rail_ip}", tuple(evidence),
                                           "Start Ray with --node-ip-address = the station's rail IP (= VLLM_HOST_IP).",
                                           cause=True))
        evidence.insert(0, f"[{s.name}] addresses in use:\n  " + "\n  ".join(table))
        out += problems or [RungResult(ID, s.name, CheckStatus.PASS,
                                       "; ".join(table[1:]) or "rail addresses as configured",
                                       tuple(evidence))]
    return out


async def _route(ctx: DoctorContext, st: Station, ip: str):
    cmd = rc.route_get(ip)
    try:
        res = await ctx.run(st.name, cmd)
    except (StationDown, ToolMissing):
        return None
    try:
        return parse_route_get(res.stdout or res.stderr), facts.ev(st.name, cmd, res.stdout + res.stderr,
                                                                   res.exit_status)
    except Exception:  # noqa: BLE001 - an odd route line is evidence, not a crash
        return None
