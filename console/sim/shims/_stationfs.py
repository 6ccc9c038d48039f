"""The files a simulated or lab station holds: the checkpoint (config.json with the fields that
size a KV cache, index, sparse shards of the real total size), the tutorial's ``~/glm53.env`` and
``~/launch-glm53.sh``, and the RDMA port counters under a sysfs-shaped tree. They live in the
station's tree (``stations/NAME/fs``, at their real paths below it); its mount table says which real
paths the tree supplies, so the console's real command lines find them there
(``console.sim.station_shell``)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from console.config import tensor_parallel_for
from console.remote.cmdlines.host import MEMINFO
from console.remote.cmdlines.identity import MACHINE_ID
from console.remote.cmdlines.links import NET_SYSFS, RDMA_COUNTER_NAMES, RDMA_SYSFS
from console.remote.cmdlines.tasks import PROC
from console.sim.station_shell import write_mounts
from console.sim.world import World

SHARDS = 50
# The KV-sizing fields of the simulated checkpoints' config.json: GLM-5.3 follows GLM-5's published
# config (transformers GlmMoeDsaConfig: MLA with a DSA indexer, one MTP layer) with a 1M context;
# the Flash model is a hybrid (34 KDA linear-attention + 12 MLA layers, seed 004).
GLM53_SHAPE = {
    "hidden_size": 6144, "num_hidden_layers": 78, "num_attention_heads": 64, "num_key_value_heads": 64,
    "kv_lora_rank": 512, "q_lora_rank": 2048, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256,
    "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "num_nextn_predict_layers": 1,
    "max_position_embeddings": 1048576, "vocab_size": 154880}
GLM53_FLASH_SHAPE = {
    "hidden_size": 4096, "num_hidden_layers": 46, "num_attention_heads": 32, "num_key_value_heads": 32,
    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "n_routed_experts": 128, "num_experts_per_tok": 8, "num_nextn_predict_layers": 1,
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 11 + ["linear_attention", "full_attention"],
    "max_position_embeddings": 65536, "vocab_size": 154880}


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


def populate(world: World, home: str | None = None, real_meminfo: bool = False) -> None:
    """Write every station's files and mount table (idempotent; existing files are left as they
    are). ``real_meminfo``: the station reads the machine's own /proc/meminfo (the lab) instead of
    the one the sim server writes into its tree."""
    prof = world.profile
    home = home or os.path.expanduser("~")
    total = int(prof.checkpoint_gb * 1e9)
    for name in world.names:
        root = world.fs_dir(name)
        write_mounts(world.root, name, root, home,
                     [RDMA_SYSFS, prof.model_dir, MACHINE_ID] + ([] if real_meminfo else [MEMINFO, NET_SYSFS, PROC]))
        mid = _under(root, MACHINE_ID)  # each station its own machine (the lab's netns share the host's)
        if not mid.exists():
            mid.parent.mkdir(parents=True, exist_ok=True)
            mid.write_text(hashlib.sha1(f"{world.root}/{name}".encode()).hexdigest()[:32] + "\n")
        st = world.state(name)
        devices = list(prof.link.rails) or [st["rail"]["rdma"]]
        for dev in devices:
            cdir = _under(root, f"{RDMA_SYSFS}/{dev}/ports/1/counters")
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
                "quantization_config": quant, "torch_dtype": "bfloat16",
                **(GLM53_FLASH_SHAPE if prof.gpu.unified_memory else GLM53_SHAPE)}, indent=2) + "\n")
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
        script = _under(root, home) / "launch-glm53.sh"
        if not script.exists():
            script.write_text(launch_script_text(prof, len(world.names)))
            script.chmod(0o755)


def launch_script_text(prof, n_stations: int = 2) -> str:
    """The tutorial's launch script as an operator keeps it on both stations (run on B, then A):
    it sources ~/glm53.env, picks the serving GPU by name and starts the container detached.
    On more stations the model is split over all of them (tensor parallel = GPUs x stations)."""
    tp = tensor_parallel_for(prof, n_stations)
    gpu = prof.gpu.name.split()[-1]
    env = ('-e NCCL_DEBUG=INFO -e NCCL_IB_HCA="$RDMA_DEV" -e NCCL_SOCKET_IFNAME="$NETDEV" \\\n'
           '  -e GLOO_SOCKET_IFNAME="$NETDEV" -e TP_SOCKET_IFNAME="$NETDEV"')
    s = prof.serving
    if prof.engine == "sglang":
        serve = (f'"$IMAGE" python3 -m sglang.launch_server --model-path "$MODEL" \\\n'
                 f'  --served-model-name {prof.served_model_name} --tp {tp} \\\n'
                 f'  --dist-init-addr "$HEAD_IP:{s.get("dist_init_port", 20000)}" --nnodes {n_stations} --node-rank "$RANK" \\\n'
                 f'  --host 0.0.0.0 --port {prof.api_port} --mem-fraction-static {s.get("mem_fraction_static", 0.84)} \\\n'
                 f'  --max-running-requests {s.get("max_running_requests", 2)} --context-length '
                 f'{s.get("context_length", 65536)} \\\n'
                 f'  --tool-call-parser glm47 --reasoning-parser glm45')
        role, host_env = "", '-e SGLANG_HOST_IP="$LOCAL_IP"'
    else:
        serve = (f'--entrypoint vllm "$IMAGE" serve "$MODEL" --served-model-name {prof.served_model_name} \\\n'
                 f'  --tensor-parallel-size {tp} --nnodes {n_stations} "${{ROLE[@]}}" \\\n'
                 f'  --max-model-len {s.get("max_model_len", 98304)} --gpu-memory-utilization '
                 f'{s.get("gpu_memory_utilization", 0.93)} --kv-cache-dtype {s.get("kv_cache_dtype", "fp8")} \\\n'
                 f'  --enable-prefix-caching --max-num-seqs {s.get("max_num_seqs", 16)} \\\n'
                 f"  --speculative-config '{s.get('speculative_config', '')}' \\\n"
                 '  --tool-call-parser glm47 --reasoning-parser glm47 --enable-auto-tool-choice')
        role = ('ROLE=(--node-rank "$RANK" --master-addr "$HEAD_IP")\n'
                f'if [ "$RANK" = 0 ]; then ROLE+=(--host 0.0.0.0 --port {prof.api_port}); else ROLE+=(--headless); fi\n')
        host_env = '-e VLLM_HOST_IP="$LOCAL_IP"'
    return (f"#!/usr/bin/env bash\n"
            f"# {prof.description}: run on the workers first, then on the head.\n"
            "set -euo pipefail\n"
            "source ~/glm53.env\n"
            f'IMAGE="{prof.image}"\n'
            f'MODEL="{prof.model_dir}"\n'
            f"GPU=$(nvidia-smi --query-gpu=uuid,name --format=csv,noheader | awk -F', ' '/{gpu}/ {{print $1; exit}}')\n"
            + role
            + 'docker run -d --name glm53 --network host --ipc host --ulimit memlock=-1 --ulimit stack=67108864 \\\n'
            '  --gpus "device=$GPU" --device /dev/infiniband -v "$MODEL:$MODEL:ro" \\\n'
            f"  {env} {host_env} \\\n"
            f"  {serve}\n")
