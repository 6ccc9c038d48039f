"""Station facts several rungs read, each fetched once per doctor run: the serving container (the
running one, else the last run kept as ``NAME-prev``), the rails (profile devices -> netdev -> IPv4),
GID tables, IPv4 addresses of every interface, the NCCL lines of the container's log, and the NCCL
environment a launch uses (from the container, or as the console would build it)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from console.config import Config, Station
from console.secrets import is_secret_name
from console.doctor.context import DoctorContext
from console.probes import ParseError
from console.probes import docker_env as de
from console.probes import rdma as rdma_probe
from console.probes.iproute import parse_link
from console.probes.nccl_tests import NcclInfo, parse_nccl_info
from console.remote import cmdlines as rc
from console.service import engines
from console.station.checks import StationDown


@dataclass(frozen=True)
class ContainerFacts:
    station: str
    runtime: de.ContainerRuntime | None
    name: str  # the container it describes (NAME or NAME-prev)
    evidence: str
    note: str = ""  # why there is none, or that it is the last run

    @property
    def running(self) -> bool:
        return self.runtime is not None and self.runtime.running


@dataclass(frozen=True)
class RailInfo:
    device: str
    netdev: str
    ip: str | None
    primary: bool
    up: bool = True


def ev(station: str, cmd: str, out: str, status: int = 0) -> str:
    tail = "" if status == 0 else f"\n(exit status {status})"
    return f"[{station}] $ {cmd}\n{out.rstrip()}{tail}"


async def container(ctx: DoctorContext, st: Station, fresh: str = "") -> ContainerFacts:
    """``fresh``: a tag for a new read (the hang rung wants the state now, not at the start of the run)."""
    async def make() -> ContainerFacts:
        logs = []
        for name in (st.container, f"{st.container}-prev"):
            cmd = rc.docker_inspect_json(name)
            res = await ctx.run(st.name, cmd, tag=fresh)
            try:
                rt = de.parse_inspect_json(name, res.stdout + res.stderr) if res.ok else None
            except ParseError:
                rt = None
            logs.append(ev(st.name, cmd, _short_inspect(res.stdout or res.stderr), res.exit_status))
            if rt is not None:
                note = "" if name == st.container else f"{st.container} does not exist: the last run, {name}"
                if name == st.container and not rt.running:
                    note = f"{name} is {rt.state} (exit code {rt.exit_code}): its last run"
                return ContainerFacts(st.name, rt, name, "\n\n".join(logs), note)
        return ContainerFacts(st.name, None, st.container, "\n\n".join(logs),
                              f"no container {st.container} (nor {st.container}-prev) on {st.name}")

    return await ctx.fact(("container", st.name, fresh), make)


def _short_inspect(text: str) -> str:
    """docker inspect is long: keep what the workbench reads (state, image, env, command line)."""
    try:
        import json

        data = json.loads(text[text.find("["):])[0]
    except (ValueError, IndexError, KeyError, TypeError):
        return text[:1500]
    cfg = data.get("Config") or {}
    env = [e if not is_secret_name(e.split("=", 1)[0]) else e.split("=", 1)[0] + "=" + de.REDACTED
           for e in cfg.get("Env") or []]
    keep = {"Name": data.get("Name"), "State": {k: (data.get("State") or {}).get(k) for k in
                                                  ("Status", "StartedAt", "FinishedAt", "ExitCode")},
            "Image": data.get("Image"), "Config.Image": cfg.get("Image"),
            "Path": data.get("Path"), "Args": data.get("Args"), "Config.Env": env}
    return json.dumps(keep, indent=1)


async def rails(ctx: DoctorContext, st: Station) -> list[RailInfo]:
    """The station's rails: the configured one first, then the profile's other devices (twin ports)."""
    async def make() -> list[RailInfo]:
        devices = [st.rdma_device] if st.rdma_device else []
        devices += [d for d in ctx.profile.link.rails if d not in devices]
        res = await ctx.run(st.name, rc.ibdev2netdev())
        try:
            rows = rdma_probe.parse_ibdev2netdev(res.stdout) if res.ok else []
        except ParseError:
            rows = []
        by_dev = {r.device: r for r in rows}
        out = []
        for dev in devices:
            primary = dev == st.rdma_device
            netdev = st.rail_netdev if primary and st.rail_netdev else (by_dev[dev].netdev if dev in by_dev else "")
            if not netdev:
                continue
            ip = st.rail_ip if primary else None
            if ip is None:
                r = await ctx.run(st.name, rc.ip_addr4(netdev))
                ips = re.findall(r"\binet\s+(\d+\.\d+\.\d+\.\d+)", r.stdout)
                ip = ips[0] if ips else None
            out.append(RailInfo(dev, netdev, ip, primary, by_dev[dev].up if dev in by_dev else True))
        return out

    return await ctx.fact(("rails", st.name), make)


async def gids(ctx: DoctorContext, st: Station, device: str) -> tuple[list[rdma_probe.Gid], str]:
    async def make():
        cmd = rc.show_gids(device)
        res = await ctx.run(st.name, cmd)
        try:
            rows = rdma_probe.parse_show_gids(res.stdout) if res.ok else []
        except ParseError:
            rows = []
        return rows, ev(st.name, cmd, res.stdout + res.stderr, res.exit_status)

    return await ctx.fact(("gids", st.name, device), make)


async def addresses(ctx: DoctorContext, st: Station) -> tuple[dict[str, list[str]], str]:
    """{iface: [IPv4 ...]} of every interface (``ip -o -4 addr show``)."""
    async def make():
        cmd = rc.ip_addrs4()
        res = await ctx.run(st.name, cmd)
        out: dict[str, list[str]] = {}
        for line in res.stdout.splitlines():
            m = re.match(r"^\d+:\s+(\S+?)(?:@\S+)?\s+inet\s+(\d+\.\d+\.\d+\.\d+)", line)
            if m:
                out.setdefault(m.group(1), []).append(m.group(2))
        return out, ev(st.name, cmd, res.stdout + res.stderr, res.exit_status)

    return await ctx.fact(("addrs", st.name), make)


async def mtu(ctx: DoctorContext, st: Station, netdev: str) -> tuple[int | None, str]:
    async def make():
        cmd = rc.ip_link(netdev)
        res = await ctx.run(st.name, cmd)
        try:
            value = parse_link(res.stdout).mtu if res.ok else None
        except ParseError:
            value = None
        return value, ev(st.name, cmd, res.stdout + res.stderr, res.exit_status)

    return await ctx.fact(("mtu", st.name, netdev), make)


async def nccl_log(ctx: DoctorContext, st: Station, name: str) -> tuple[NcclInfo, str]:
    async def make():
        cmd = rc.nccl_log_lines(name)
        res = await ctx.run(st.name, cmd, timeout=max(30.0, ctx.config.command_timeout_s))
        lines = [ln.split(" ", 1)[1] if re.match(r"^\d{4}-\d\d-\d\dT", ln) else ln for ln in res.stdout.splitlines()]
        return parse_nccl_info(lines), ev(st.name, cmd, "\n".join(lines[-60:]), res.exit_status)

    return await ctx.fact(("nccl-log", st.name, name), make)


def launch_env_of_config(config: Config, st: Station) -> dict[str, str]:
    """The ``-e`` variables the console's own launch passes (no station needed: no GPU/image lookup)."""
    try:
        args = engines.container_args(config, st, engines.StationRuntime(("GPU-unresolved",), config.profile.image))
    except engines.EngineConfigError:
        return {}
    out = {}
    for i, a in enumerate(args[:-1]):
        if a == "-e" and "=" in args[i + 1]:
            k, _, v = args[i + 1].partition("=")
            out[k] = v
    return out


def launch_argv_of_config(config: Config, st: Station) -> list[str]:
    try:
        if config.profile.engine == "vllm":
            return ["vllm"] + engines.vllm_serve_args(config, st)
        return engines.sglang_args(config, st)
    except (engines.EngineConfigError, KeyError, ValueError):
        return []


async def launch_env(ctx: DoctorContext, st: Station) -> tuple[dict[str, str], str]:
    """The NCCL-relevant environment of this station's launch, and where it was read."""
    try:
        c = await container(ctx, st)
    except StationDown:
        raise
    if c.runtime is not None and c.runtime.argv:
        return c.runtime.selected_env(), f"docker inspect {c.name}"
    env = {k: v for k, v in launch_env_of_config(ctx.config, st).items() if k.startswith(de.PREFIXES)}
    return env, "the console's launch command (no container yet)"


def rail_station(st: Station, rail: RailInfo) -> Station:
    """The station as the checks see it, on this rail (twin ports have their own netdev and address)."""
    return replace(st, rail_netdev=rail.netdev, rail_ip=rail.ip or "", rdma_device=rail.device)
