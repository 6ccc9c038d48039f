"""Exact container command lines per station, built from the profile, the station and overrides.

Pure: no I/O. The action layer resolves what only a station knows (GPU UUIDs, the image digest)
and passes it in, so the preview the operator confirms is the command that runs. Secrets never
enter an argument list on the station: the API key and every ``[overrides.extra_env]`` value whose
name is secret (``console.secrets.is_secret_name``: ``*_TOKEN``, ``*_KEY``, ``*SECRET*``,
``*PASSWORD*``, ``*_PASS``, ``*CREDENTIAL*``, ... or listed in ``overrides.secret_env``) travel as an
environment variable *name* (``-e HF_TOKEN``):
the remote shell reads each value from the SSH channel's stdin with its ``read`` builtin and
docker copies it from that environment. Previews print ``***`` for them.

SGLang takes its API key only as ``--api-key`` (SGLang 0.5.x ServerArgs; no environment variable),
which would put it in the server's argv, visible in ``ps`` on the station. Since 0.5.3 SGLang also
reads ``--config FILE.yaml`` and merges it in-process, so the container's entrypoint writes the key
from its environment into a 0600 YAML file inside the container and passes ``--config`` instead.
SGLang still logs its ``server_args`` (the key included) at startup: log displays and bundles mask
``api_key=...``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.config import Config, Profile, Station, engine_flags, secret_env_keys
from console.secrets import is_secret_name, is_secret_value
from console import catalogue
from console.remote import cmdlines as rc

# Ready and started markers (the first line a started rank prints) come from the diagnosis catalogue.
READY_MARKERS = catalogue.READY_MARKERS
STARTED_MARKERS = catalogue.STARTED_MARKERS
API_KEY_ENV = {"vllm": "VLLM_API_KEY", "sglang": "SGLANG_API_KEY"}

RAY_PORT = 6379
SGLANG_DIST_PORT = 20000

# Override keys that are not engine flags, and serving keys the builders consume themselves: the other
# keys of ``config.overrides`` are flags the config checked against ``console.config.engine_flags``.
CONTAINER_KEYS = engine_flags.CONTAINER_KEYS
_CONSUMED = engine_flags.CONSUMED
FLIGHT_RECORDER_ENTRIES = 2000  # collectives each rank keeps (overrides.flight_recorder; 0 = off)
SGLANG_KEY_FILE = "/tmp/dgx-console-sglang-secrets.yaml"  # inside the container, mode 0600


class EngineConfigError(ValueError):
    """The profile/config cannot produce a command (one line, names the field)."""


@dataclass(frozen=True)
class StationRuntime:
    """What only the station knows, resolved before building: GPU UUIDs and the pinned image."""

    gpu_uuids: tuple[str, ...]
    image: str  # repo@sha256:... (pinned by digest)


@dataclass(frozen=True)
class LaunchSpec:
    station: str
    rank: int
    container: str
    argv: tuple[str, ...]  # docker run ... (secret values never appear here)
    secret_env: tuple[str, ...] = ()  # env names whose values the remote shell reads from stdin
    image: str = ""
    api_key_env: str | None = None  # which of secret_env carries the API key (its value is not in cfg)

    def command(self) -> str:
        """The remote shell line. Secret values arrive on stdin (``read`` is a builtin: no argv)."""
        run = " ".join(shlex.quote(a) for a in self.argv)
        if not self.secret_env:
            return run
        reads = " && ".join(f"IFS= read -r {n} && export {n}" for n in self.secret_env)
        return f"{reads} && exec {run}"

    def preview(self) -> str:
        """What the operator sees: the same line, secrets as ``***``, one flag per line."""
        head = "".join(f"{n}=*** " for n in self.secret_env)
        parts: list[str] = []
        cur: list[str] = []
        for a in self.argv:
            if (a.startswith("-") or a == self.image) and cur:
                parts.append(" ".join(shlex.quote(x) for x in cur))
                cur = []
            cur.append(a)
        if cur:
            parts.append(" ".join(shlex.quote(x) for x in cur))
        return head + " \\\n    ".join(parts)


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _flag_args(settings: Mapping[str, Any]) -> list[str]:
    """``{"max_num_seqs": 16, "enable_prefix_caching": True}`` -> ``--max-num-seqs 16 --enable-prefix-caching``.
    False/None removes a flag; dicts are passed as JSON (``--speculative-config``)."""
    out: list[str] = []
    for key, value in settings.items():
        if value is None or value is False:
            continue
        if value is True:
            out.append(_flag(key))
        elif isinstance(value, (list, tuple)):
            out.append(_flag(key))
            out.extend(str(v) for v in value)
        elif isinstance(value, dict):
            out += [_flag(key), json.dumps(value, separators=(",", ":"))]
        else:
            out += [_flag(key), str(value)]
    return out


def serving_settings(profile: Profile, overrides: Mapping[str, Any]) -> dict[str, Any]:
    merged = {k: v for k, v in profile.serving.items() if k not in _CONSUMED}
    for k, v in overrides.items():
        if k in CONTAINER_KEYS or k in _CONSUMED:
            continue
        merged[k.replace("-", "_").lstrip("_")] = v
    return merged


def _no_secret_flags(settings: Mapping[str, Any], extra_args: list[Any]) -> None:
    """A secret as an engine flag (``--api-key``, ``--hf-token``: a secret name) would sit in the
    server's argv: say where it belongs instead."""
    for key, value in settings.items():
        if is_secret_name(key) or is_secret_value(value):
            raise EngineConfigError(f"overrides.{key}: a secret never goes on a command line; put it in "
                                    f"[overrides.extra_env] (e.g. HF_TOKEN, VLLM_API_KEY) or api.api_key_env")
    for i, a in enumerate(extra_args):
        if str(a).startswith("--") and is_secret_name(str(a).split("=", 1)[0]):
            raise EngineConfigError(f"overrides.extra_args: {str(a).split('=', 1)[0]} carries a secret on the "
                                    "command line; use [overrides.extra_env] or api.api_key_env")
        if is_secret_value(str(a)):
            raise EngineConfigError(f"overrides.extra_args[{i}]: a URL with a password never goes on a command "
                                    "line; use [overrides.extra_env] (its value travels on stdin)")


def secret_extra_env(cfg: Config) -> list[str]:
    """Names in ``[overrides.extra_env]`` that are secret (by name pattern, ``secret_env``, or by value:
    a URL with credentials)."""
    return secret_env_keys(cfg)


def secret_input(cfg: Config, spec: LaunchSpec, api_key: str | None) -> str | None:
    """What the remote shell reads from stdin for ``spec`` (one line per secret name, in order);
    None when the command reads nothing."""
    if not spec.secret_env:
        return None
    extra = cfg.overrides.get("extra_env") or {}
    lines = []
    for name in spec.secret_env:
        if name == spec.api_key_env:
            if not api_key:
                raise EngineConfigError("the API key is configured but empty (check api.api_key_env/file)")
            value = api_key
        else:
            value = str(extra.get(name, ""))
        if "\n" in value or "\r" in value:
            raise EngineConfigError(f"{name}: a secret value must be one line")
        lines.append(value + "\n")
    return "".join(lines)


def executor(cfg: Config) -> str:
    mode = str(cfg.overrides.get("executor", "mp"))
    if mode not in ("mp", "ray"):
        raise EngineConfigError(f"overrides.executor: must be 'mp' or 'ray', got {mode!r}")
    if mode == "ray" and cfg.profile.engine != "vllm":
        raise EngineConfigError("overrides.executor: 'ray' is only for vLLM profiles")
    return mode


def marker_engine(cfg: Config) -> str:
    """Key into STARTED_MARKERS: vllm, vllm-ray or sglang."""
    return "vllm-ray" if cfg.profile.engine == "vllm" and executor(cfg) == "ray" else cfg.profile.engine


def _require(station: Station, attr: str) -> str:
    value = getattr(station, attr)
    if not value:
        raise EngineConfigError(f"station {station.name}: {attr} is not set (needed for the launch command)")
    return value


def container_args(cfg: Config, station: Station, rt: StationRuntime) -> list[str]:
    """docker run flags shared by both engines (up to, not including, the image)."""
    p = cfg.profile
    multi = len(cfg.stations) > 1  # one station with several GPUs needs no rail
    netdev = _require(station, "rail_netdev") if multi else station.rail_netdev
    rail_ip = _require(station, "rail_ip") if multi else station.rail_ip
    if not rt.gpu_uuids:
        raise EngineConfigError(f"station {station.name}: no serving GPU selected")
    hca = cfg.overrides.get("nccl_ib_hca") or station.rdma_device or ",".join(p.link.rails)
    args = ["docker", "run", "-d", "--name", station.container, "--network", "host"]
    shm = cfg.overrides.get("shm_size")
    args += ["--shm-size", str(shm)] if shm else ["--ipc", "host"]
    args += ["--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
             "--gpus", _gpus_value(rt.gpu_uuids),
             "--device", "/dev/infiniband"]
    if cfg.overrides.get("cap_ptrace", True):
        args += ["--cap-add", "SYS_PTRACE"]  # py-spy dump --native inside the container needs ptrace
    args += ["-v", f"{_require_model_dir(p)}:{p.model_dir}:ro"]
    env = {"NCCL_DEBUG": "INFO"}
    if netdev:
        env.update(NCCL_SOCKET_IFNAME=netdev, GLOO_SOCKET_IFNAME=netdev, TP_SOCKET_IFNAME=netdev)
    if hca and multi:
        env["NCCL_IB_HCA"] = hca
    gid = cfg.overrides.get("nccl_ib_gid_index")
    if gid is not None:
        env["NCCL_IB_GID_INDEX"] = str(gid)
    if rail_ip:
        env["VLLM_HOST_IP" if p.engine == "vllm" else "SGLANG_HOST_IP"] = rail_ip
    env.update(flight_recorder_env(cfg))
    extra = cfg.overrides.get("extra_env") or {}
    if not isinstance(extra, dict):
        raise EngineConfigError("overrides.extra_env: must be a table of NAME = value")
    secret = set(secret_extra_env(cfg))
    env.update({str(k): str(v) for k, v in extra.items()})
    for k, v in env.items():
        # a secret by name only: docker copies NAME's value from the environment of the shell
        # that read it from stdin (see LaunchSpec.command)
        args += ["-e", k if k in secret else f"{k}={v}"]
    return args


def flight_recorder_env(cfg: Config) -> dict[str, str]:
    """PyTorch's NCCL flight recorder, on unless ``overrides.flight_recorder = 0``: a ring of the last
    N collectives per rank, dumped on a watchdog timeout and, without killing anything, when a byte
    is written to the rank's pipe (``FLIGHT_RECORDER_PIPE<rank>.pipe``). Both the older
    (``TORCH_NCCL_*``) and the newer (``TORCH_FR_*``) names are set: torch reads the ones it knows."""
    size = int(cfg.overrides.get("flight_recorder", FLIGHT_RECORDER_ENTRIES))
    if size <= 0:
        return {}
    return {"TORCH_NCCL_TRACE_BUFFER_SIZE": str(size), "TORCH_FR_BUFFER_SIZE": str(size),
            "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": rc.FLIGHT_RECORDER_DUMP,
            "TORCH_FR_DUMP_TEMP_FILE": rc.FLIGHT_RECORDER_DUMP,
            "TORCH_NCCL_DEBUG_INFO_PIPE_FILE": rc.FLIGHT_RECORDER_PIPE}


def hang_evidence_note(cfg: Config) -> str:
    """What the launch adds for hang evidence, in words for the preview ("" when both are off)."""
    parts = []
    if cfg.overrides.get("cap_ptrace", True):
        parts.append("SYS_PTRACE for py-spy")
    if size := int(cfg.overrides.get("flight_recorder", FLIGHT_RECORDER_ENTRIES)):
        parts.append(f"flight recorder: last {size:,} collectives per rank")
    return "hang evidence: " + ", ".join(parts) if parts else ""


def _gpus_value(uuids: tuple[str, ...]) -> str:
    """docker's --gpus is CSV: several devices need the inner quotes (``"device=a,b"``)."""
    return f"device={uuids[0]}" if len(uuids) == 1 else '"device=' + ",".join(uuids) + '"'


def _require_model_dir(p: Profile) -> str:
    if not p.model_dir:
        raise EngineConfigError(f"profile {p.name}: model_dir is not set")
    return p.model_dir


def vllm_serve_args(cfg: Config, station: Station) -> list[str]:
    p = cfg.profile
    n = len(cfg.stations)
    tp = cfg.tensor_parallel
    out = ["serve", p.model_dir, "--served-model-name", p.served_model_name,
           "--tensor-parallel-size", str(tp)]
    if executor(cfg) == "ray":
        out += ["--distributed-executor-backend", "ray"]
    elif n > 1:
        head_ip = _require(cfg.head, "rail_ip")
        out += ["--nnodes", str(n), "--node-rank", str(station.rank), "--master-addr", head_ip]
        if not station.is_head:
            out.append("--headless")
    if station.is_head:
        out += ["--host", "0.0.0.0", "--port", str(p.api_port)]
    settings = serving_settings(p, {k: v for k, v in cfg.overrides.items() if k != "tensor_parallel_size"})
    if settings.get("tool_call_parser") and "enable_auto_tool_choice" not in settings:
        settings["enable_auto_tool_choice"] = True
    out += _flag_args(settings)
    out += [str(a) for a in cfg.overrides.get("extra_args") or []]
    return out


def sglang_args(cfg: Config, station: Station) -> list[str]:
    p = cfg.profile
    port = int(p.serving.get("dist_init_port", SGLANG_DIST_PORT))
    tp = cfg.tensor_parallel
    out = ["python3", "-m", "sglang.launch_server", "--model-path", p.model_dir,
           "--served-model-name", p.served_model_name, "--tp", str(tp)]
    if len(cfg.stations) > 1:
        head_ip = _require(cfg.head, "rail_ip")
        out += ["--dist-init-addr", f"{head_ip}:{port}", "--nnodes", str(len(cfg.stations)),
                "--node-rank", str(station.rank)]
    out += ["--host", "0.0.0.0", "--port", str(p.api_port)]
    out += _flag_args(serving_settings(p, {k: v for k, v in cfg.overrides.items() if k != "tp"}))
    out += [str(a) for a in cfg.overrides.get("extra_args") or []]
    return out


def build_launch(cfg: Config, station: Station, rt: StationRuntime, api_key_set: bool = False) -> LaunchSpec:
    """The ``docker run`` for one station. ``api_key_set``: the head gets the key by env name."""
    p = cfg.profile
    mode = executor(cfg)
    _no_secret_flags(serving_settings(p, cfg.overrides), list(cfg.overrides.get("extra_args") or []))
    args = container_args(cfg, station, rt)
    secret: tuple[str, ...] = tuple(secret_extra_env(cfg))
    key_env = API_KEY_ENV.get(p.engine, "API_KEY")
    with_key = api_key_set and station.is_head
    if with_key:
        if key_env not in secret:
            args += ["-e", key_env]  # docker copies the value from the client's environment
        secret = tuple(n for n in secret if n != key_env) + (key_env,)
    if p.engine == "vllm":
        serve = vllm_serve_args(cfg, station)
        if mode == "ray":
            head_ip = _require(cfg.head, "rail_ip")
            if station.is_head:
                script = (f"ray start --head --port={RAY_PORT} --node-ip-address={shlex.quote(station.rail_ip)} "
                          '&& exec vllm "$@"')
            else:
                script = (f"until ray start --block --address={shlex.quote(head_ip)}:{RAY_PORT} "
                          f"--node-ip-address={shlex.quote(station.rail_ip)}; do sleep 5; done")
                serve = []
            args += ["--entrypoint", "bash", rt.image, "-c", script, "vllm"] + serve
        else:
            args += ["--entrypoint", "vllm", rt.image] + serve
    elif p.engine == "sglang":
        cmd = sglang_args(cfg, station)
        if with_key:  # the key into a 0600 file inside the container, never into SGLang's argv
            write_key = (f'import json, os; open("{SGLANG_KEY_FILE}", "w").write('
                         f'json.dumps({{"api-key": os.environ["{key_env}"]}}))')
            script = (f'umask 077 && python3 -c "$0" && unset {key_env} && '
                      f'exec "$@" --config {SGLANG_KEY_FILE}')
            args += ["--entrypoint", "sh", rt.image, "-c", script, write_key] + cmd
        else:
            args += [rt.image] + cmd
    else:
        raise EngineConfigError(f"profile {p.name}: unknown engine {p.engine!r}")
    return LaunchSpec(station.name, station.rank, station.container, tuple(args), secret, rt.image,
                      api_key_env=key_env if with_key else None)


def ready_marker(cfg: Config) -> str:
    return READY_MARKERS[cfg.profile.engine]


def started_marker(cfg: Config, station: Station) -> str:
    return STARTED_MARKERS[(marker_engine(cfg), station.is_head)]


def pick_gpus(station: Station, profile: Profile, gpus: list[tuple[int, str, str]], n_stations: int | None = None
              ) -> tuple[str, ...]:
    """Choose the serving GPU(s) from ``(index, uuid, name)``: the station's ``gpu`` (UUID or name)
    or the profile's GPU name, TP / stations of them. Never "all": a DGX Station also carries a
    display GPU."""
    want = station.gpu or profile.gpu.name
    by_uuid = [u for _i, u, _n in gpus if u == want]
    if by_uuid:
        return tuple(by_uuid)
    by_name = [u for _i, u, n in gpus if n == want]
    per_node = max(1, profile.tensor_parallel // max(1, n_stations or profile.nnodes))
    if len(by_name) < per_node:
        seen = ", ".join(f"{i}: {n}" for i, _u, n in gpus) or "none"
        raise EngineConfigError(f"station {station.name}: needs {per_node} GPU(s) matching {want!r}; found {seen}")
    return tuple(by_name[:per_node])
