"""What the simulated operator launched and what NCCL makes of it: the ``docker run`` arguments of
the operator's launch script, a run's NCCL environment (GID index, NCCL version, GPUDirect,
sockets), the stations' GID tables and management network.

Pure functions of the world state and a run's arguments, so the engine timelines, the ``docker``,
``show_gids``, ``ip`` and ``mpirun`` shims agree without talking to each other. The faults are
listed in ``console.sim.world``; the live view (phases, counters, stacks) is ``console.sim.workbench``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from console.sim.world import World

MGMT_NETDEV = "eno1"
MGMT_NET = "198.19.0."  # the stations' management LAN in the simulator (RFC 2544 range, never routed)
PINNED_GID_INDEX = 3  # what NVIDIA's playbooks and most launch scripts pin
SHIFTED_GID_INDEX = 5  # gid-mismatch: a global IPv6 address takes 2/3, the rail IPv4 moves to 4/5
HOST_NCCL_SO = "/usr/lib/aarch64-linux-gnu/libnccl.so.2"
IMAGE_NCCL, HOST_NCCL = "2.30.7", "2.27.3"


def all_faults(world: World) -> set[str]:
    return {f for n in world.names for f in world.faults(n)}


def mgmt_ip(world: World, name: str) -> str:
    return f"{MGMT_NET}{world.names.index(name) + 1}"


# ------------------------------------------------------------------ GIDs


@dataclass(frozen=True)
class GidRow:
    index: int
    gid: str
    ipv4: str
    version: str


def _ipv4_gid(ip: str) -> str:
    a, b, c, d = (int(x) for x in ip.split("."))
    return f"0000:0000:0000:0000:0000:ffff:{a:02x}{b:02x}:{c:02x}{d:02x}"


def _link_local(station: str, netdev: str) -> str:
    h = hashlib.sha1(f"{station}/{netdev}".encode()).hexdigest()
    return f"fe80:0000:0000:0000:5aa2:e1ff:fe{h[0:2]}:{h[2:6]}"


def gid_rows(world: World, name: str, device: str, netdev: str, ip: str, primary: bool) -> list[GidRow]:
    """The port's GID table as ``show_gids`` prints it: link-local v1/v2 at 0/1, then the addresses."""
    ll = _link_local(name, netdev)
    rows = [GidRow(0, ll, "", "v1"), GidRow(1, ll, "", "v2")]
    if primary and "gid-mismatch" in world.faults(name):
        g6 = f"fd00:0000:0000:0000:0000:0000:0000:{world.names.index(name) + 1:04x}"
        rows += [GidRow(2, g6, "", "v1"), GidRow(3, g6, "", "v2")]
    base = rows[-1].index + 1
    return rows + [GidRow(base, _ipv4_gid(ip), ip, "v1"), GidRow(base + 1, _ipv4_gid(ip), ip, "v2")]


def roce_v2_index(world: World, name: str) -> int:
    """The RoCE v2 GID index of the station's rail IPv4 address (its primary rail)."""
    return SHIFTED_GID_INDEX if "gid-mismatch" in world.faults(name) else PINNED_GID_INDEX


# ------------------------------------------------------------------ a run's NCCL environment


def run_env(args: list[str] | None) -> dict[str, str]:
    """The ``-e K=V`` / ``--env K=V`` pairs of a docker run argv (``-e K`` copies a client variable: a
    secret's name, its value is not the simulator's to know)."""
    env: dict[str, str] = {}
    a = list(args or [])
    for i, x in enumerate(a):
        val = None
        if x in ("-e", "--env") and i + 1 < len(a):
            val = a[i + 1]
        elif x.startswith("--env="):
            val = x.split("=", 1)[1]
        if val is None:
            continue
        k, sep, v = val.partition("=")
        if sep:
            env[k] = v
    return env


def gid_ok(world: World, name: str, env: dict[str, str]) -> bool:
    """Does the GID index this run uses reach the peer? Unset / -1: NCCL picks the RoCE v2 IPv4 GID."""
    pinned = env.get("NCCL_IB_GID_INDEX")
    if pinned in (None, "", "-1"):
        return True
    try:
        return int(pinned) == roce_v2_index(world, name)
    except ValueError:
        return False


def nccl_version(env: dict[str, str]) -> str:
    return HOST_NCCL if env.get("VLLM_NCCL_SO_PATH") == HOST_NCCL_SO else IMAGE_NCCL


def gdr_enabled(world: World, env: dict[str, str]) -> bool:
    return world.profile.link.gpudirect and env.get("NCCL_NET_GDR_LEVEL", "").upper() not in ("LOC", "0")


def sockets_forced(world: World, name: str, env: dict[str, str]) -> bool:
    return "socket-fallback" in world.faults(name) or env.get("NCCL_IB_DISABLE") == "1"


def env_lines(env: dict[str, str]) -> list[str]:
    """The ``NCCL_X set by environment to V.`` lines NCCL prints for what it reads (ENV subsystem)."""
    return [f"{k} set by environment to {v}." for k, v in sorted(env.items())
            if k.startswith("NCCL_") and k not in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE")]


def latest_args(world: World, name: str, container: str = "glm53") -> list[str] | None:
    st = world.state(name)
    c = st["containers"].get(container)
    if not c or not c["runs"]:
        return None
    return list(c["runs"][-1].get("args") or [])


# ------------------------------------------------------------------ the launch command


def world_config(world: World):
    """The config the simulated operator launched with (same fields as the sim's written config).
    Its parser and TOML writer load here: most commands that import this module never ask for it."""
    import tomli_w

    from console.config.load import parse_config

    lines = [f'profile = "{world.meta["profile"]}"', "simulated = true", ""]
    ov = {**world.operator_overrides, **sim_overrides(world)}
    if ov:
        lines.append(tomli_w.dumps({"overrides": ov}))
    for rank, name in enumerate(world.names):
        r = world.state(name)["rail"]
        lines += ["[[stations]]", f'name = "{name}"', 'host = "127.0.0.1"', f"rank = {rank}",
                  f'rail_netdev = "{r["netdev"]}"', f'rdma_device = "{r["rdma"]}"', f'rail_ip = "{r["ip"]}"', ""]
    return parse_config("\n".join(lines))


def sim_overrides(world: World) -> dict[str, Any]:
    """Config overrides the faults stand for (gid-mismatch: the operator pinned the playbook's index)."""
    return {"nccl_ib_gid_index": PINNED_GID_INDEX} if "gid-mismatch" in all_faults(world) else {}


def launch_args(world: World, name: str) -> list[str]:
    """``docker run`` arguments (after ``run``) the operator's launch script used on ``name``."""
    from console.service import engines

    try:
        cfg = world_config(world)
        st = cfg.station(name)
        gpus = tuple(g["uuid"] for g in world.state(name)["gpus"] if g["serving"])
        spec = engines.build_launch(cfg, st, engines.StationRuntime(gpus, world.profile.image))
    except Exception:  # noqa: BLE001 - an unbuildable profile starts with no command line, as before
        return []
    args = list(spec.argv[2:])
    mine = world.faults(name)
    if "mgmt-master" in all_faults(world) and "--master-addr" in args:
        args[args.index("--master-addr") + 1] = mgmt_ip(world, world.names[0])
    extra: list[str] = []
    if "nccl-env-diff" in mine:
        extra += ["-e", "NCCL_NET_GDR_LEVEL=LOC", "-e", "NCCL_IB_TC=106"]
    if "nccl-version-diff" in mine:
        extra += ["-e", f"VLLM_NCCL_SO_PATH={HOST_NCCL_SO}", "-v", f"{HOST_NCCL_SO}:{HOST_NCCL_SO}:ro"]
    if extra:
        at = args.index("--entrypoint") if "--entrypoint" in args else args.index(spec.image)
        args[at:at] = extra
    return args


def transport_ok(world: World, name: str, run: dict[str, Any], peer_runs: list[tuple[str, dict]] | None = None) -> bool:
    """Can this run's first collective complete? Every rank's GID index must be its RoCE v2 one; the
    head passes its peers' runs, a worker looks at the head's latest run."""
    if not gid_ok(world, name, run_env(run.get("args"))):
        return False
    if peer_runs is None:
        head = world.names[0]
        if head == name:
            return True
        args = latest_args(world, head)
        return args is None or gid_ok(world, head, run_env(args))
    return all(gid_ok(world, peer, run_env(r.get("args"))) for peer, r in peer_runs)
