"""A dgx-console config from the ``~/glm53.env`` files operators of NVIDIA's tutorial already have.

Each station's file carries its rank (``RANK="0"`` on A, ``"1"`` on B), its rail netdev, RDMA
device and IPv4, and usually the other end's IPv4. One file is enough for two stations (the peer's
IP comes from it and its devices are assumed to match; a note says so); one file per station is
better. Secret values (API keys, HF tokens) are never copied: the config names the variable only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from console.config import load_profile, parse_config
from console.secrets import is_secret_name
from console.probes import envfile as env_probe

_END_IP = re.compile(r"^(?:STATION_)?([A-Z])_(?:RAIL_)?IP$")  # A_IP / STATION_B_IP / A_RAIL_IP
OVERRIDE_KEYS = {  # env name -> overrides key
    "IMAGE": "image", "VLLM_IMAGE": "image", "SGLANG_IMAGE": "image",
    "MAX_MODEL_LEN": "max_model_len", "MAX_NUM_SEQS": "max_num_seqs",
    "GPU_MEMORY_UTILIZATION": "gpu_memory_utilization", "GPU_MEM_UTIL": "gpu_memory_utilization",
    "NCCL_IB_GID_INDEX": "nccl_ib_gid_index", "MEM_FRACTION_STATIC": "mem_fraction_static",
    "MAX_RUNNING_REQUESTS": "max_running_requests",
}
API_KEY_NAMES = ("VLLM_API_KEY", "API_KEY", "OPENAI_API_KEY", "SGLANG_API_KEY")


class ImportEnvError(ValueError):
    """One line naming the file and the problem."""


@dataclass
class Imported:
    config: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _value(env: dict[str, str], keys: tuple[str, ...]) -> str | None:
    hit = env_probe.first(env, keys)
    return hit[1] if hit else None


def _hca(value: str | None) -> str | None:
    """``NCCL_IB_HCA`` may read ``=mlx5_0:1,mlx5_1:1``: the first device name is the rail's."""
    if not value:
        return None
    first = value.lstrip("=^").split(",")[0]
    return first.split(":")[0] or None


def _number(text: str) -> int | float | str:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def config_from_envs(files: list[tuple[str, str]], profile: str, hosts: dict[str, str] | None = None,
                     user: str | None = None) -> Imported:
    """``files``: (path, text) of one env file per station (or one for all)."""
    prof = load_profile(profile)
    hosts = dict(hosts or {})
    notes: list[str] = []
    facts: dict[int, dict[str, str]] = {}
    ips_by_rank: dict[int, str] = {}
    overrides: dict[str, Any] = {}
    api_key_env: str | None = None
    for path, text in files:
        try:
            env = env_probe.parse_env(text)
        except env_probe.ParseError as exc:
            raise ImportEnvError(f"{path}: {exc}") from None
        raw_rank = _value(env, env_probe.RANK_KEYS)
        if raw_rank is None or not raw_rank.strip().isdigit():
            raise ImportEnvError(f"{path}: no RANK=\"N\" line (RANK=\"0\" on the head, \"1\" on the worker)")
        rank = int(raw_rank)
        if rank in facts:
            raise ImportEnvError(f"{path}: RANK={rank} appears in two env files")
        me = {"rail_ip": _value(env, env_probe.LOCAL_IP_KEYS) or "",
              "rail_netdev": _value(env, env_probe.NETDEV_KEYS) or "",
              "rdma_device": _hca(_value(env, env_probe.RDMA_KEYS)) or "",
              "source": path}
        facts[rank] = me
        if me["rail_ip"]:
            ips_by_rank[rank] = me["rail_ip"]
        head_ip = _value(env, env_probe.HEAD_IP_KEYS)
        if head_ip:
            ips_by_rank.setdefault(0, head_ip)
        peer_ip = _value(env, env_probe.PEER_IP_KEYS)
        if peer_ip and prof.nnodes == 2:
            ips_by_rank.setdefault(1 - rank if rank in (0, 1) else 0, peer_ip)
        for key, value in env.items():
            m = _END_IP.match(key)
            if m and value:
                ips_by_rank.setdefault(ord(m.group(1)) - ord("A"), value)
            if key in OVERRIDE_KEYS and value:
                overrides[OVERRIDE_KEYS[key]] = value if key.endswith("IMAGE") else _number(value)
            if key in API_KEY_NAMES and value:
                api_key_env = key
            elif is_secret_name(key) and value:
                notes.append(f"{path}: {key} not copied (secrets never go into the config)")
        if not me["rail_ip"] and rank in ips_by_rank:
            me["rail_ip"] = ips_by_rank[rank]
    n = max(prof.nnodes, max(facts) + 1, max(ips_by_rank, default=0) + 1)
    template = facts[min(facts)]
    stations = []
    for rank in range(n):
        name = chr(ord("A") + rank)
        st = facts.get(rank)
        if st is None:
            st = {"rail_ip": ips_by_rank.get(rank, ""), "rail_netdev": template["rail_netdev"],
                  "rdma_device": template["rdma_device"]}
            notes.append(f"station {name}: no env file given; rail netdev and RDMA device assumed to match "
                         f"{template['source']} (pass its env file too to be sure)")
        elif not st["rail_ip"]:
            st["rail_ip"] = ips_by_rank.get(rank, "")
        if not st["rail_ip"]:
            raise ImportEnvError(f"station {name} (rank {rank}): no rail IPv4 found "
                                 "(LOCAL_IP / HEAD_IP / PEER_IP / A_IP-style variables)")
        host = hosts.pop(name, None)
        if host is None:
            host = st["rail_ip"]
            notes.append(f"station {name}: SSH host set to its rail IP {host} (use --host {name}=HOST for "
                         "the management address)")
        entry: dict[str, Any] = {"name": name, "host": host, "rank": rank}
        if user:
            entry["user"] = user
        entry.update({k: st[k] for k in ("rail_netdev", "rdma_device", "rail_ip") if st.get(k)})
        stations.append(entry)
    if hosts:
        raise ImportEnvError(f"--host for unknown station(s): {', '.join(sorted(hosts))} "
                             f"(stations: {', '.join(s['name'] for s in stations)})")
    data: dict[str, Any] = {"profile": prof.name}
    if api_key_env:
        data["api"] = {"api_key_env": api_key_env}
        notes.append(f"API key: the config names ${api_key_env}; export it before running dgx-console "
                     "(its value was not copied)")
    if overrides:
        data["overrides"] = overrides
    data["stations"] = stations
    import tomli_w

    try:
        parse_config(tomli_w.dumps(data), "<imported>")
    except Exception as exc:  # noqa: BLE001 - the imported config must load, or the import fails
        raise ImportEnvError(f"the imported config does not load: {exc}") from None
    return Imported(data, notes)
