"""Checks of access and software: SSH between stations, the same user, image, NVIDIA container
toolkit, model config and checkpoint, disk space, the env file, the API's exposure."""

from __future__ import annotations

import asyncio
import re

from console.config import Config, Station
from console.secrets import redact_env_lines, redact_text
from console.probes import ParseError
from console.probes import disk as disk_probe
from console.probes import envfile as env_probe
from console.probes.docker import parse_image_identity, short_digest
from console.remote import cmdlines as rc
from console.station.checks.context import CheckResult, CheckRun, evidence, join_parts
from console.vocabulary import CheckStatus

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
    ev = join_parts(*(evidence(cmd, r, s.name) for s, r in zip(stations, results, strict=True)))
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
    ev = join_parts(*(evidence(cmd, r, s.name) for s, r in zip(stations, results, strict=True)))
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
    ev = join_parts(evidence(c1, r1), evidence(c2, r2))
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
    ev = join_parts(*(redact_env_lines(evidence(c, r, s.name)) for s, c, r in zip(stations, cmds, results, strict=True)))
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
