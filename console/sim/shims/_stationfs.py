"""The files a simulated or lab station holds for the preflight checks: the checkpoint (config.json,
index, sparse shards of the real total size), ``~/glm53.env`` and the RDMA port counters under a
sysfs-shaped tree. They live in ``stations/NAME/fs``; the remote commands reach them through
``commands.STATION_ROOT`` (empty on a real station)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from console.remote.commands import RDMA_COUNTER_NAMES
from console.sim.world import World

SHARDS = 50


def fs_root(world: World, name: str) -> Path:
    return world.station_dir(name) / "fs"


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def env_text(world: World, name: str) -> str:
    st = world.state(name)
    head = world.state(world.names[0])
    workers = [world.state(n)["rail"]["ip"] for n in world.names[1:]]
    lines = [
        "# GLM-5.3 two-station settings: source ~/glm53.env after every reconnect",
        f'export NETDEV="{st["rail"]["netdev"]}"',
        f'export RDMA_DEV="{st["rail"]["rdma"]}"',
        f'export HEAD_IP="{head["rail"]["ip"]}"',
        f'export LOCAL_IP="{st["rail"]["ip"]}"',
    ]
    if workers:
        lines.append(f'export WORKER_IP="{workers[0]}"')
    lines.append(f'export RANK="{st["rank"]}"')
    return "\n".join(lines) + "\n"


def populate(world: World, home: str | None = None) -> None:
    """Write every station's files (idempotent; existing files are left as they are)."""
    prof = world.profile
    home = home or os.path.expanduser("~")
    total = int(prof.checkpoint_gb * 1e9)
    for name in world.names:
        root = fs_root(world, name)
        st = world.state(name)
        devices = list(prof.link.rails) or [st["rail"]["rdma"]]
        for dev in devices:
            cdir = _under(root, f"/sys/class/infiniband/{dev}/ports/1/counters")
            cdir.mkdir(parents=True, exist_ok=True)
            for c in RDMA_COUNTER_NAMES:
                if not (cdir / c).exists():
                    (cdir / c).write_text("0\n")
        mdir = _under(root, prof.model_dir)
        mdir.mkdir(parents=True, exist_ok=True)
        if not (mdir / "config.json").exists():
            quant = {"quant_method": "modelopt", "quant_algo": prof.quantization}
            (mdir / "config.json").write_text(json.dumps({
                "architectures": [prof.architecture], "model_type": "glm_moe_dsa",
                "quantization_config": quant, "torch_dtype": "bfloat16"}, indent=2) + "\n")
            shard_names = [f"model-{i:05d}-of-{SHARDS:05d}.safetensors" for i in range(1, SHARDS + 1)]
            (mdir / "model.safetensors.index.json").write_text(json.dumps({
                "metadata": {"total_size": total},
                "weight_map": {f"model.layers.{i}.weight": n for i, n in enumerate(shard_names)}}) + "\n")
            for n in shard_names:  # sparse: the real sizes, no disk used
                with open(mdir / n, "wb") as fh:
                    fh.truncate(total // SHARDS)
        env = _under(root, home) / "glm53.env"
        if not env.exists():
            env.parent.mkdir(parents=True, exist_ok=True)
            env.write_text(env_text(world, name))
