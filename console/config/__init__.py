"""TOML configuration -> frozen dataclasses.

Errors name the file, the line and the field path (``PATH:LINE: stations[1].port: ...``) so the
operator can fix the file without guessing; the CLI turns them into one line and exit code 2.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
import urllib.parse
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from console.config.secrets import is_secret_name, masked_env
from console.safe_files import KIB, MIB, FileProblem, expand, read_text
from console.sanitize import clip, is_clean, one_line

DEFAULT_PROFILE = "glm53-nvfp4-2x-gb300-vllm"
CONFIG_NAME = "dgx-console.toml"
MAX_CONFIG_BYTES = 1 * MIB  # a config or profile is a small hand-written file
MAX_KEY_FILE_BYTES = 64 * KIB
MAX_TIMEOUT_S = 86400.0

# Field shapes (checked on load, so nothing odd reaches a command line, a message or the screen).
STATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}")  # docker's own rule (+ a length)
NETDEV_NAME = re.compile(r"[^/:\s]{1,15}")  # the kernel's rule (dev_valid_name), IFNAMSIZ - 1
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # RDMA devices: mlx5_0, rocep1s0f1
HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.%:-]{0,252}")  # a name, an alias, an address
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


class ConfigError(Exception):
    """A config problem reported as ``PATH:LINE: field.path: message``."""

    def __init__(self, path: str | os.PathLike | None, line: int | None, field_path: str, message: str):
        # one line, no control character, whatever the file held (field names and values are echoed)
        self.path = one_line(str(path)) if path else "<config>"
        self.line = line
        self.field_path = one_line(field_path)
        self.message = one_line(message)
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        head = f"{where}: {self.field_path}: " if self.field_path else f"{where}: "
        return head + self.message


# ---------------------------------------------------------------- profiles


@dataclass(frozen=True)
class GpuProfile:
    name: str
    unified_memory: bool
    memory_total_mib: int
    weights_gib: float
    loaded_gib: float
    cold_load_s: float
    extra_display_gpu: str | None = None


@dataclass(frozen=True)
class LinkProfile:
    speed_mbps: int
    mtu: int
    rails: tuple[str, ...]
    gpudirect: bool
    rdma_host_gbps: tuple[float, float]
    roce_tos: int | None = None
    nccl_busbw_gbytes: float | None = None  # nccl-tests all_reduce bus bandwidth a healthy pair reaches (GB/s)


@dataclass(frozen=True)
class BenchRow:
    concurrency: int
    total_tok_s: float
    per_user_tok_s: float
    latency_s_mean: float | None = None
    ttft_ms_mean: float | None = None
    itl_ms_mean: float | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    engine: str  # "vllm" | "sglang"
    model: str
    served_model_name: str
    model_dir: str
    architecture: str
    quantization: str
    checkpoint_gb: float
    image: str
    engine_version: str
    api_port: int
    nnodes: int
    tensor_parallel: int
    gpu: GpuProfile
    link: LinkProfile
    serving: dict[str, Any]
    reference_bench: tuple[BenchRow, ...]
    # how reference_bench was measured: source, prompts, max_tokens, effort (bench comparability)
    reference_method: dict[str, Any] = field(default_factory=dict)


def gpus_per_station(profile: Profile) -> int:
    """Serving GPUs on each station: the profile's tensor-parallel size over its node count."""
    return max(1, profile.tensor_parallel // max(1, profile.nnodes))


def tensor_parallel_for(profile: Profile, n_stations: int) -> int:
    """The tensor-parallel size when the model is split over ``n_stations`` (each with the
    profile's GPUs per station): a 2x profile on 4 stations is TP=4, not the profile's 2."""
    return gpus_per_station(profile) * max(1, n_stations)


def weights_per_gpu_gib(profile: Profile, tensor_parallel: int) -> float:
    """The weights each GPU holds at this tensor-parallel size (the profile's ``weights_gib`` is
    per GPU at its own size: 218 GiB at TP=2 is 109 GiB at TP=4)."""
    return profile.gpu.weights_gib * profile.tensor_parallel / max(1, tensor_parallel)


def builtin_profiles() -> list[str]:
    files = resources.files("console.profiles")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


_NUMBER = (int, float)
# Profile fields: (type, required). Unknown keys are ignored (profiles grow with the engines).
_PROFILE_FIELDS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "name": (str, True), "description": (str, False), "engine": (str, True), "model": (str, True),
    "served_model_name": (str, False), "model_dir": (str, False), "architecture": (str, False),
    "quantization": (str, False), "checkpoint_gb": (_NUMBER, False), "image": (str, True),
    "engine_version": (str, False), "api_port": (int, False), "nnodes": (int, False),
    "tensor_parallel": (int, False), "gpu": (dict, True), "link": (dict, True), "serving": (dict, False),
    "reference_bench": (list, False), "reference_method": (dict, False),
}
_PROFILE_GPU: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "name": (str, True), "unified_memory": (bool, False), "memory_total_mib": (int, True),
    "weights_gib": (_NUMBER, True), "loaded_gib": (_NUMBER, True), "cold_load_s": (_NUMBER, False),
    "extra_display_gpu": (str, False),
}
_PROFILE_LINK: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "speed_mbps": (int, True), "mtu": (int, True), "rails": (list, False), "gpudirect": (bool, False),
    "rdma_host_gbps": (list, False), "roce_tos": (int, False), "nccl_busbw_gbytes": (_NUMBER, False),
}
_PROFILE_BENCH: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "concurrency": (int, True), "total_tok_s": (_NUMBER, True), "per_user_tok_s": (_NUMBER, True),
    "latency_s_mean": (_NUMBER, False), "ttft_ms_mean": (_NUMBER, False), "itl_ms_mean": (_NUMBER, False),
}
_PROFILE_METHOD: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "source": (str, False), "prompts": (str, False), "max_tokens": (int, False), "effort": (str, False),
}
ENGINES = ("vllm", "sglang")


def _profile_from_dict(d: dict[str, Any], src: str, text: str = "") -> Profile:
    """A validated Profile; errors name the profile file, the line and the field."""
    loc = _Locator(text)

    def err(table: str | None, index: int | None, key: str | None, fpath: str, msg: str) -> ConfigError:
        return ConfigError(src, loc.line_of(table, index, key) if text else None, fpath, msg)

    def check(raw: dict[str, Any], fields: dict, table: str | None, index: int | None, prefix: str) -> None:
        for key, (want, required) in fields.items():
            fp = f"{prefix}{key}"
            if key not in raw:
                if required:
                    raise err(table, index, None, fp, "required field is missing")
                continue
            value = raw[key]
            if not _check_type(value, want):
                raise err(table, index, key, fp, f"must be {_type_name(want)}, got {_show(value)}")
            if isinstance(value, float) and not math.isfinite(value):
                raise err(table, index, key, fp, f"must be a finite number, got {value}")
            if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 10**12:
                raise err(table, index, key, fp, f"out of range: {value}")

    check(d, _PROFILE_FIELDS, None, None, "")
    if not _PROFILE_NAME.fullmatch(d["name"]):
        raise err(None, None, "name", "name", f"must be 1-128 letters, digits, '.', '_' or '-', got {_show(d['name'])}")
    for key in ("model", "served_model_name", "image"):  # argv words of the launch command
        value = d.get(key)
        if value is not None and (not value or value.startswith("-") or not value.isprintable()
                                  or any(c.isspace() for c in value)):
            raise err(None, None, key, key, f"must be a word not starting with '-', got {_show(value)}")
    model_dir = d.get("model_dir", "")
    if model_dir and (not model_dir.startswith("/") or ":" in model_dir or not model_dir.isprintable()):
        raise err(None, None, "model_dir", "model_dir",
                  f"must be an absolute path without ':' (docker -v), got {_show(model_dir)}")
    for key in ("description", "architecture", "quantization", "engine_version"):
        if key in d and not is_clean(d[key]):
            raise err(None, None, key, key, "must not contain control characters")
    if d["engine"] not in ENGINES:
        raise err(None, None, "engine", "engine", f"must be one of {', '.join(ENGINES)}, got {_show(d['engine'])}")
    if not 1 <= d.get("api_port", 8000) <= 65535:
        raise err(None, None, "api_port", "api_port", f"must be 1..65535, got {d['api_port']}")
    for key in ("nnodes", "tensor_parallel"):
        if d.get(key, 1) < 1:
            raise err(None, None, key, key, "must be >= 1")
    g, lk = d["gpu"], d["link"]
    check(g, _PROFILE_GPU, "gpu", None, "gpu.")
    check(lk, _PROFILE_LINK, "link", None, "link.")
    rails = lk.get("rails", [])
    if not all(isinstance(r, str) and DEVICE_NAME.fullmatch(r) for r in rails):
        raise err("link", None, "rails", "link.rails", "must be a list of RDMA device names like mlx5_0")
    for key in ("name", "extra_display_gpu"):
        if key in g and (not g[key].strip() or not g[key].isprintable()):
            raise err("gpu", None, key, f"gpu.{key}", f"must be a GPU name, got {_show(g[key])}")
    gbps = lk.get("rdma_host_gbps", [0.0, 0.0])
    if len(gbps) != 2 or not all(_check_type(x, _NUMBER) and math.isfinite(x) for x in gbps):
        raise err("link", None, "rdma_host_gbps", "link.rdma_host_gbps", "must be two numbers [low, high]")
    serving = d.get("serving", {})
    if not isinstance(serving, dict):
        raise err(None, None, "serving", "serving", "must be a table")
    rows = d.get("reference_bench", [])
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise err(None, None, "reference_bench", f"reference_bench[{i}]", "must be a table ([[reference_bench]])")
        check(row, _PROFILE_BENCH, "reference_bench", i, f"reference_bench[{i}].")
        unknown = set(row) - set(_PROFILE_BENCH)
        if unknown:
            key = sorted(unknown)[0]
            raise err("reference_bench", i, key, f"reference_bench[{i}].{key}",
                      f"unknown field (known: {', '.join(_PROFILE_BENCH)})")
    method = d.get("reference_method", {})  # how reference_bench was measured (bench comparability)
    check(method, _PROFILE_METHOD, "reference_method", None, "reference_method.")
    return Profile(
        name=d["name"],
        description=d.get("description", ""),
        engine=d["engine"],
        model=d["model"],
        served_model_name=d.get("served_model_name", d["model"]),
        model_dir=d.get("model_dir", ""),
        architecture=d.get("architecture", ""),
        quantization=d.get("quantization", ""),
        checkpoint_gb=float(d.get("checkpoint_gb", 0)),
        image=d["image"],
        engine_version=d.get("engine_version", ""),
        api_port=int(d.get("api_port", 8000)),
        nnodes=int(d.get("nnodes", 2)),
        tensor_parallel=int(d.get("tensor_parallel", 2)),
        gpu=GpuProfile(
            name=g["name"],
            unified_memory=bool(g.get("unified_memory", False)),
            memory_total_mib=int(g["memory_total_mib"]),
            weights_gib=float(g["weights_gib"]),
            loaded_gib=float(g["loaded_gib"]),
            cold_load_s=float(g.get("cold_load_s", 300)),
            extra_display_gpu=g.get("extra_display_gpu"),
        ),
        link=LinkProfile(
            speed_mbps=int(lk["speed_mbps"]),
            mtu=int(lk["mtu"]),
            rails=tuple(rails),
            gpudirect=bool(lk.get("gpudirect", False)),
            rdma_host_gbps=(float(gbps[0]), float(gbps[1])),
            roce_tos=lk.get("roce_tos"),
            nccl_busbw_gbytes=float(lk["nccl_busbw_gbytes"]) if "nccl_busbw_gbytes" in lk else None,
        ),
        serving=dict(serving),
        reference_bench=tuple(BenchRow(**row) for row in rows),
        reference_method=dict(method),
    )


def _parse_toml(text: str, src: str | os.PathLike | None) -> dict[str, Any]:
    """tomllib with every failure as a ConfigError (a deeply nested document overflows its stack)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).split(" (at ")[0]
        raise ConfigError(src, _toml_error_line(exc), "", f"invalid TOML: {msg}") from None
    except RecursionError:
        raise ConfigError(src, None, "", "invalid TOML: nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value tomllib cannot build
        raise ConfigError(src, None, "", f"invalid TOML: {_one(exc)}") from None


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a profile TOML file by path."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        p = expand(name_or_path)
        try:
            text = read_text(p, MAX_CONFIG_BYTES)
        except FileProblem as exc:
            if not os.path.exists(p):  # the config names a file that is not there: point at the config
                raise ConfigError(None, None, "profile", f"cannot read profile {p}: {exc}") from None
            raise ConfigError(p, None, "", f"cannot read profile: {exc}") from None
        return _profile_from_dict(_parse_toml(text, p), str(p), text)
    files = resources.files("console.profiles")
    if not _PROFILE_NAME.fullmatch(name_or_path) or not (res := files / f"{name_or_path}.toml").is_file():
        known = ", ".join(builtin_profiles())
        raise ConfigError(None, None, "profile", f"unknown profile {_show(name_or_path)} (built-in: {known})")
    text = res.read_text()
    return _profile_from_dict(_parse_toml(text, name_or_path), name_or_path, text)


# ---------------------------------------------------------------- config


@dataclass(frozen=True)
class Station:
    name: str
    host: str  # hostname, IP or ~/.ssh/config alias
    rank: int
    user: str | None = None
    port: int | None = None
    rail_netdev: str = ""
    rdma_device: str = ""
    rail_ip: str = ""
    container: str = "glm53"
    known_hosts: str | None = None  # None: ~/.ssh/known_hosts (never "no checking")
    identity_file: str | None = None
    local: bool = False  # the console runs on this station: no SSH
    gpu: str | None = None  # name or UUID of the serving GPU (a Station also has a display GPU)
    env_file: str = "~/glm53.env"
    launch_script: str | None = None  # the operator's own launch script on this station (over the top-level one)

    @property
    def is_head(self) -> bool:
        return self.rank == 0

    @property
    def role(self) -> str:
        return "API host" if self.rank == 0 else "worker"


@dataclass(frozen=True)
class ApiSettings:
    url: str | None = None  # default http://<head host>:<profile api_port>
    api_key_env: str | None = None
    api_key_file: str | None = None
    timeout_s: float = 5.0


@dataclass(frozen=True)
class UiSettings:
    theme: str = "dgx-dark"
    refresh_ms: int = 1000
    log_lines: int = 5000


@dataclass(frozen=True)
class Config:
    path: str | None
    profile: Profile
    stations: tuple[Station, ...]
    api: ApiSettings = field(default_factory=ApiSettings)
    ui: UiSettings = field(default_factory=UiSettings)
    overrides: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False  # stations are the built-in simulator (DEMO marker)
    keys: dict[str, str] = field(default_factory=dict)  # [keys]: binding id -> keys ("f5" or "ctrl+r,f5")
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 30.0
    launch_script: str | None = None  # launch runs this script on every station instead of its own docker run

    @property
    def head(self) -> Station:
        return min(self.stations, key=lambda s: s.rank)

    @property
    def workers(self) -> list[Station]:
        return sorted((s for s in self.stations if s.rank != self.head.rank), key=lambda s: s.rank)

    @property
    def tensor_parallel(self) -> int:
        """The launch's tensor-parallel size: the override (``tensor_parallel_size`` / ``tp``), else
        the profile's GPUs per station times the stations configured."""
        tp = self.overrides.get("tensor_parallel_size", self.overrides.get("tp"))
        return int(tp) if tp is not None else tensor_parallel_for(self.profile, len(self.stations))

    def station(self, name: str) -> Station:
        for s in self.stations:
            if s.name == name:
                return s
        raise ConfigError(self.path, None, "station", f"no station named {name!r}")

    def launch_script_for(self, station: Station) -> str | None:
        """The operator's launch script for this station (its own setting, else the config's), or None."""
        return station.launch_script or self.launch_script

    def api_url(self) -> str:
        if self.api.url:
            return self.api.url.rstrip("/")
        host = self.head.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.profile.api_port}"

    def api_key(self) -> str | None:
        """The API key from the environment or a file; never stored in the config itself."""
        if self.api.api_key_env and os.environ.get(self.api.api_key_env):
            return os.environ[self.api.api_key_env]
        if self.api.api_key_file:
            try:
                key = read_text(expand(self.api.api_key_file), MAX_KEY_FILE_BYTES).strip()
            except FileProblem:
                return None
            return key if key and "\n" not in key and is_clean(key) else None
        return None


_STATION_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str,
    "host": str,
    "rank": int,
    "user": str,
    "port": int,
    "rail_netdev": str,
    "rdma_device": str,
    "rail_ip": str,
    "container": str,
    "known_hosts": str,
    "identity_file": str,
    "local": bool,
    "gpu": str,
    "env_file": str,
    "launch_script": str,
}
_API_FIELDS = {"url": str, "api_key_env": str, "api_key_file": str, "timeout_s": (int, float)}
_UI_FIELDS = {"theme": str, "refresh_ms": int, "log_lines": int}
_TOP_FIELDS = {"profile", "stations", "api", "ui", "overrides", "simulated", "connect_timeout_s", "command_timeout_s",
               "keys", "launch_script"}


class _Locator:
    """Finds the line of a field in TOML text (tomllib keeps no positions)."""

    def __init__(self, text: str):
        self.lines = text.splitlines()

    def _table_start(self, table: str, index: int | None) -> int | None:
        header = re.compile(r"^\s*\[\[\s*" + re.escape(table) + r"\s*\]\]" if index is not None
                            else r"^\s*\[\s*" + re.escape(table) + r"\s*\]")
        seen = -1
        for i, line in enumerate(self.lines):
            if header.match(line):
                seen += 1
                if index is None or seen == index:
                    return i
        return None

    def line_of(self, table: str | None, index: int | None, key: str | None) -> int | None:
        start = 0
        if table:
            t = self._table_start(table, index)
            if t is None:
                return None
            if key is None:
                return t + 1
            start = t + 1
        key_re = re.compile(r"^\s*" + re.escape(key or "") + r"\s*=") if key else None
        for i in range(start, len(self.lines)):
            line = self.lines[i]
            if re.match(r"^\s*\[", line):
                break
            if key_re and key_re.match(line):
                return i + 1
        return start or None


def _toml_error_line(exc: tomllib.TOMLDecodeError) -> int | None:
    m = re.search(r"line (\d+)", str(exc))
    return int(m.group(1)) if m else None


def _check_type(value: Any, want: type | tuple[type, ...]) -> bool:
    if want is int or want == (int,):
        return isinstance(value, int) and not isinstance(value, bool)
    if want == (int, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, want)


def _type_name(want: type | tuple[type, ...]) -> str:
    if isinstance(want, tuple):
        return "number"
    return {str: "string", int: "integer", bool: "true or false", float: "number", dict: "a table",
            list: "a list"}[want]


def _show(value: Any) -> str:
    """A value echoed in a message: repr (escapes every control character), clipped."""
    return clip(repr(value), 80)


def _one(exc: BaseException) -> str:
    return clip(" ".join(str(exc).split()) or type(exc).__name__, 200)


def check_url(url: str) -> str | None:
    """Why ``url`` is no usable API base URL (None when it is): http(s), a host, a port 1-65535."""
    if not isinstance(url, str) or not url or not is_clean(url) or any(c.isspace() for c in url):
        return "must be an http:// or https:// URL without spaces or control characters"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        return f"is not a valid URL ({_one(exc)})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if port is not None and not 1 <= port <= 65535:
        return f"port must be 1..65535, got {port}"
    try:
        import httpx

        httpx.URL(url)
    except Exception as exc:  # noqa: BLE001 - httpx's own verdict, whatever it raises
        return f"is not a valid URL ({_one(exc)})"
    return None


def check_timeout(value: Any) -> str | None:
    """Why ``value`` is no usable timeout in seconds (finite, > 0, at most a day)."""
    if not _check_type(value, (int, float)) or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        return f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:g}, got {_show(value)}"
    return None


def check_host(value: str) -> str | None:
    """Why ``value`` cannot be an SSH host (an option to ssh, a space, markup...)."""
    if value.startswith("-"):
        return "must not start with '-' (ssh would read it as an option)"
    try:
        ipaddress.ip_address(value.split("%")[0])
        return None
    except ValueError:
        pass
    if not HOST_NAME.fullmatch(value):
        return "must be a host name, an ~/.ssh/config alias or an IP address (letters, digits, . - _ :)"
    return None


def _check_path(value: str) -> str | None:
    if not value or not is_clean(value) or "\n" in value or "\t" in value:
        return "must be a path without control characters"
    try:
        Path(value).expanduser()
    except RuntimeError:
        return f"{_show(value)}: no such user's home directory"
    return None


def _station_field_problem(key: str, value: Any) -> str | None:
    """The shape rules of one [[stations]] field (its type was checked before)."""
    if key == "name" and not STATION_NAME.fullmatch(value):
        return (f"must be 1-32 letters, digits, '.', '_' or '-' (starting with a letter or digit), "
                f"got {_show(value)}")
    if key == "host":
        problem = check_host(value)
        return f"{problem}, got {_show(value)}" if problem else None
    if key == "user" and not USER_NAME.fullmatch(value):
        return f"must be a user name (letters, digits, . _ @ -; not starting with '-'), got {_show(value)}"
    if key == "container" and not CONTAINER_NAME.fullmatch(value):
        return f"must match [a-zA-Z0-9][a-zA-Z0-9_.-]* (docker's rule for names), got {_show(value)}"
    if key == "rail_netdev" and value and (not NETDEV_NAME.fullmatch(value) or value in (".", "..")
                                           or value.startswith("-") or not value.isprintable()):
        return f"must be a network interface name (at most 15 characters, no '/', ':' or spaces), got {_show(value)}"
    if key == "rdma_device" and value and not DEVICE_NAME.fullmatch(value):
        return f"must be an RDMA device name like mlx5_0 (letters, digits, . _ -), got {_show(value)}"
    if key == "rail_ip" and value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"must be an IPv4 or IPv6 address, got {_show(value)}"
    if key in ("known_hosts", "identity_file", "env_file", "launch_script"):
        return _check_path(value)
    if key == "gpu" and (not value.strip() or not value.isprintable() or value.startswith("-")):
        return f"must be a GPU name or UUID, got {_show(value)}"
    if key == "rank" and not 0 <= value < 4096:
        return "must be >= 0" if value < 0 else "must be < 4096"
    if key == "port" and not 1 <= value <= 65535:
        return f"must be 1..65535, got {value}"
    return None


def parse_config(text: str, path: str | None = None) -> Config:
    """Parse and validate config text; raises ConfigError with the line of the culprit."""
    loc = _Locator(text)
    data = _parse_toml(text, path)

    def err(table: str | None, index: int | None, key: str | None, fpath: str, msg: str) -> ConfigError:
        return ConfigError(path, loc.line_of(table, index, key), fpath, msg)

    for key in data:
        if key not in _TOP_FIELDS:
            raise err(None, None, key, _key_path(key), f"unknown field (known: {', '.join(sorted(_TOP_FIELDS))})")

    profile_name = data.get("profile", DEFAULT_PROFILE)
    if not isinstance(profile_name, str) or not profile_name or not is_clean(profile_name):
        raise err(None, None, "profile", "profile", "must be a string (a built-in profile name or a .toml path)")
    is_file = profile_name.endswith(".toml") or os.sep in profile_name
    try:
        if path and is_file:
            profile_name = str((Path(path).parent / expand(profile_name)).resolve())
        profile = load_profile(profile_name)
    except ConfigError as exc:
        if is_file and exc.path != "<config>":  # the profile file itself is wrong: point there
            raise
        raise err(None, None, "profile", "profile", exc.message) from None
    except (OSError, RuntimeError, ValueError) as exc:  # resolve() on a looping symlink, an odd path
        raise err(None, None, "profile", "profile", f"cannot read profile: {_one(exc)}") from None

    raw_stations = data.get("stations")
    if raw_stations is None:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")
    if not isinstance(raw_stations, list) or not all(isinstance(s, dict) for s in raw_stations):
        raise err(None, None, "stations", "stations", "must be an array of tables ([[stations]])")
    if not raw_stations:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")
    if len(raw_stations) > 256:
        raise err(None, None, "stations", "stations", f"at most 256 stations, got {len(raw_stations)}")

    stations: list[Station] = []
    for i, raw in enumerate(raw_stations):
        fp = f"stations[{i}]"
        for key, value in raw.items():
            if key not in _STATION_FIELDS:
                raise err("stations", i, key, f"{fp}.{_key_path(key)}",
                          f"unknown field (known: {', '.join(sorted(_STATION_FIELDS))})")
            if not _check_type(value, _STATION_FIELDS[key]):
                raise err("stations", i, key, f"{fp}.{key}", f"must be {_type_name(_STATION_FIELDS[key])}, "
                          f"got {_show(value)}")
        for key in ("name", "host", "rank"):
            if key not in raw and not (key == "host" and raw.get("local")):
                raise err("stations", i, None, f"{fp}.{key}", "required field is missing")
        if not raw["name"].strip():
            raise err("stations", i, "name", f"{fp}.name", "must not be empty")
        for key, value in raw.items():
            problem = _station_field_problem(key, value)
            if problem:
                raise err("stations", i, key, f"{fp}.{key}", problem)
        stations.append(Station(**{"host": "localhost", **raw}))

    names = [s.name for s in stations]
    for i, s in enumerate(stations):
        if names.index(s.name) != i:
            raise err("stations", i, "name", f"stations[{i}].name", f"duplicate station name {s.name!r}")
    ranks = sorted(s.rank for s in stations)
    if ranks != list(range(len(stations))):
        seen: set[int] = set()
        bad = 0
        for idx, s in enumerate(stations):  # point at the first station that breaks the sequence
            if s.rank in seen or s.rank >= len(stations):
                bad = idx
                break
            seen.add(s.rank)
        i = bad
        raise err("stations", i, "rank", f"stations[{i}].rank",
                  f"ranks must be 0..{len(stations) - 1}, each once (got {ranks})")

    api_raw = data.get("api", {})
    ui_raw = data.get("ui", {})
    if isinstance(api_raw, dict) and "api_key" in api_raw:
        raise err("api", None, "api_key", "api.api_key", "put the key in an env var (api_key_env) or a file")
    for table, raw, fields in (("api", api_raw, _API_FIELDS), ("ui", ui_raw, _UI_FIELDS)):
        if not isinstance(raw, dict):
            raise err(None, None, table, table, "must be a table")
        for key, value in raw.items():
            if key not in fields:
                raise err(table, None, key, f"{table}.{_key_path(key)}",
                          f"unknown field (known: {', '.join(sorted(fields))})")
            if not _check_type(value, fields[key]):
                raise err(table, None, key, f"{table}.{key}", f"must be {_type_name(fields[key])}, got {_show(value)}")
    if "url" in api_raw and (problem := check_url(api_raw["url"])):
        raise err("api", None, "url", "api.url", f"{problem}, got {_show(api_raw['url'])}")
    if "timeout_s" in api_raw and (problem := check_timeout(api_raw["timeout_s"])):
        raise err("api", None, "timeout_s", "api.timeout_s", problem)
    if "api_key_env" in api_raw and not ENV_NAME.fullmatch(api_raw["api_key_env"]):
        raise err("api", None, "api_key_env", "api.api_key_env",
                  f"must be an environment variable name, got {_show(api_raw['api_key_env'])}")
    if "api_key_file" in api_raw and (problem := _check_path(api_raw["api_key_file"])):
        raise err("api", None, "api_key_file", "api.api_key_file", problem)
    ui = UiSettings(**ui_raw)
    if not 100 <= ui.refresh_ms <= 60_000:
        raise err("ui", None, "refresh_ms", "ui.refresh_ms", "must be >= 100" if ui.refresh_ms < 100
                  else "must be <= 60000")
    if not 100 <= ui.log_lines <= 1_000_000:
        raise err("ui", None, "log_lines", "ui.log_lines", "must be >= 100" if ui.log_lines < 100
                  else "must be <= 1000000")
    if not ui.theme or not is_clean(ui.theme) or len(ui.theme) > 64:
        raise err("ui", None, "theme", "ui.theme", f"must be a theme name, got {_show(ui.theme)}")

    overrides = data.get("overrides", {})
    if not isinstance(overrides, dict):
        raise err(None, None, "overrides", "overrides", "must be a table")
    problem = _overrides_problem(overrides)
    if problem:
        key, msg = problem
        raise err("overrides", None, key.split(".")[0], f"overrides.{key}", msg)
    for key in ("connect_timeout_s", "command_timeout_s"):
        if key in data and (problem := check_timeout(data[key])):
            raise err(None, None, key, key, problem)
    simulated = data.get("simulated", False)
    if not isinstance(simulated, bool):
        raise err(None, None, "simulated", "simulated", "must be true or false")
    launch_script = data.get("launch_script")
    if launch_script is not None and (not isinstance(launch_script, str) or not launch_script.strip()
                                      or _check_path(launch_script)):
        raise err(None, None, "launch_script", "launch_script", "must be a path on the stations (e.g. ~/launch-glm53.sh)")
    keys = data.get("keys", {})  # the binding ids and key names are checked by the TUI (console/ui/keymap.py)
    if not isinstance(keys, dict):
        raise err(None, None, "keys", "keys", "must be a table of binding id = \"key\"")
    for key, value in keys.items():
        if isinstance(value, dict):
            raise err("keys", None, None, f"keys.{key}", "binding ids have no dots; write them as in "
                      "the README (e.g. bench-run = \"f5\")")
        if not isinstance(value, str) or not value.strip():
            raise err("keys", None, key, f"keys.{key}", f"must be a key name like \"f5\" or \"ctrl+r,f5\", got {value!r}")

    return Config(
        path=path,
        profile=profile,
        stations=tuple(stations),
        api=ApiSettings(**api_raw),
        ui=ui,
        overrides=dict(overrides),
        simulated=simulated,
        connect_timeout_s=float(data.get("connect_timeout_s", 10.0)),
        command_timeout_s=float(data.get("command_timeout_s", 30.0)),
        launch_script=launch_script,
        keys={k: v.strip() for k, v in keys.items()},
    )


def _key_path(key: str) -> str:
    """A TOML key as it may appear in a message (quoted when it is not a bare key)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", key) else _show(key)


def secret_env_names(cfg: Config) -> tuple[str, ...]:
    """``overrides.secret_env`` (names the operator marks secret beyond the name patterns)."""
    return tuple(cfg.overrides.get("secret_env") or ())


def secret_values(cfg: Config) -> list[str]:
    """Every secret value the config can reach (extra_env secrets, the API key): the bundle masks
    each one wherever it appears."""
    listed = secret_env_names(cfg)
    out = [str(v) for k, v in (cfg.overrides.get("extra_env") or {}).items()
           if is_secret_name(str(k), listed) and str(v)]
    key = cfg.api_key()
    if key:
        out.append(key)
    return sorted(set(out), key=len, reverse=True)


def masked_overrides(cfg: Config) -> dict[str, Any]:
    """``cfg.overrides`` with every secret extra_env value as ``***`` (for text, JSON and bundles)."""
    out = dict(cfg.overrides)
    extra = out.get("extra_env")
    if isinstance(extra, dict):
        out["extra_env"] = masked_env(extra, secret_env_names(cfg))
    return out


_SCALAR = (str, int, float, bool)


def _overrides_problem(o: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) for override values the container command cannot take safely."""
    extra = o.get("extra_env", {})
    if not isinstance(extra, dict):
        return "extra_env", "must be a table of NAME = value"
    for name, value in extra.items():
        if not ENV_NAME.fullmatch(name):
            return f"extra_env.{_key_path(name)}", f"must be an environment variable name, got {_show(name)}"
        if not isinstance(value, _SCALAR) or (isinstance(value, float) and not math.isfinite(value)):
            return f"extra_env.{name}", f"must be a string or a number, got {_show(value)}"
        if "\n" in str(value) or "\x00" in str(value):
            return f"extra_env.{name}", "must be one line (no newline or NUL)"
    listed = o.get("secret_env", [])
    if not isinstance(listed, list) or not all(isinstance(n, str) and ENV_NAME.fullmatch(n) for n in listed):
        return "secret_env", "must be a list of environment variable names"
    for key in ("image", "shm_size", "nccl_ib_hca", "executor"):
        value = o.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value or value.startswith("-") or not is_clean(value) \
                or any(c.isspace() for c in value):
            return key, f"must be a non-empty word not starting with '-', got {_show(value)}"
    gid = o.get("nccl_ib_gid_index")
    if gid is not None and (not _check_type(gid, int) or not 0 <= gid <= 255):
        return "nccl_ib_gid_index", f"must be an integer 0..255, got {_show(gid)}"
    args = o.get("extra_args", [])
    if not isinstance(args, list) or not all(isinstance(a, _SCALAR) for a in args):
        return "extra_args", "must be a list of strings"
    for key, value in o.items():
        if isinstance(value, float) and not math.isfinite(value):
            return _key_path(key), f"must be a finite number, got {value}"
        if isinstance(value, str) and ("\x00" in value or not is_clean(value)):
            return _key_path(key), "must not contain control characters"
        if not is_clean(key):
            return _key_path(key), "must be a flag name without control characters"
    return None

def field_error(cfg: Config, table: str, key: str, message: str) -> ConfigError:
    """A ConfigError with the field's line, for a field checked after loading (the [keys] table
    against the screens' bindings)."""
    line = None
    if cfg.path:
        try:
            line = _Locator(Path(cfg.path).read_text()).line_of(table, None, key)
        except OSError:
            pass
    return ConfigError(cfg.path, line, f"{table}.{key}", message)


def xdg_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dgx-console" / "config.toml"


def xdg_data_dir() -> Path:
    """``$XDG_DATA_HOME/dgx-console`` (default ``~/.local/share/dgx-console``): results, screenshots."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dgx-console"


def find_config(explicit: str | None) -> Path:
    """``--config``, then ./dgx-console.toml, then the XDG config dir."""
    if explicit:
        return expand(explicit)
    for cand in (Path.cwd() / CONFIG_NAME, xdg_config_path()):
        if cand.is_file():
            return cand
    raise ConfigError(None, None, "",
                      f"no config found (tried --config, ./{CONFIG_NAME}, {xdg_config_path()}); "
                      "try 'dgx-console demo' or 'dgx-console sim --write-config lab.toml'")


def load_config(explicit: str | None = None) -> Config:
    path = find_config(explicit)
    try:
        text = read_text(path, MAX_CONFIG_BYTES)
    except FileProblem as exc:
        raise ConfigError(path, None, "", str(exc)) from None
    cfg = parse_config(text, str(path))
    _check_files(cfg, text)
    return cfg


def _check_files(cfg: Config, text: str) -> None:
    """Files the config names that must be text when they exist (a binary known_hosts or key file
    fails here as one line, not later inside the SSH library)."""
    loc = _Locator(text)
    checks: list[tuple[str | None, str | None, int | None, str, str, int]] = []
    for i, s in enumerate(cfg.stations):
        if s.local:
            continue
        # unset: the SSH client reads ~/.ssh/known_hosts, so that file must be text as well
        checks.append((s.known_hosts or "~/.ssh/known_hosts", "stations", i, "known_hosts",
                       f"stations[{i}].known_hosts", 64 * MIB))
        if s.identity_file:
            checks.append((s.identity_file, "stations", i, "identity_file", f"stations[{i}].identity_file", MIB))
    if cfg.api.api_key_file:
        checks.append((cfg.api.api_key_file, "api", None, "api_key_file", "api.api_key_file", MAX_KEY_FILE_BYTES))
    for name, table, index, key, fpath, limit in checks:
        p = expand(name)
        if not os.path.exists(p):
            continue  # created on first trust / read when the key is needed
        try:
            if key == "identity_file":
                _check_private_key(p)
            else:
                read_text(p, limit)
        except FileProblem as exc:
            raise ConfigError(cfg.path, loc.line_of(table, index, key), fpath, f"{p}: {exc}") from None


def _check_private_key(p: Path) -> None:
    """A key file the SSH client can load (no passphrase: the agent holds encrypted keys)."""
    from console.safe_files import read_bytes

    data = read_bytes(p, MIB)
    import asyncssh

    try:
        asyncssh.import_private_key(data)
    except (ValueError, asyncssh.Error) as exc:  # KeyImportError, KeyEncryptionError
        raise FileProblem(f"not a private key the SSH client can load without a passphrase ({_one(exc)}); "
                          "use the agent for encrypted keys") from None


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """The TOML-able form of a config (no secrets are ever part of it)."""
    out: dict[str, Any] = {"profile": cfg.profile.name}
    if cfg.simulated:
        out["simulated"] = True
    out["connect_timeout_s"] = cfg.connect_timeout_s
    out["command_timeout_s"] = cfg.command_timeout_s
    if cfg.launch_script:
        out["launch_script"] = cfg.launch_script
    api = {k: v for k, v in vars(cfg.api).items() if v is not None and v != ApiSettings().__dict__.get(k)}
    if api:
        out["api"] = api
    ui = {k: v for k, v in vars(cfg.ui).items() if v != UiSettings().__dict__.get(k)}
    if ui:
        out["ui"] = ui
    if cfg.overrides:
        out["overrides"] = dict(cfg.overrides)
    if cfg.keys:
        out["keys"] = dict(cfg.keys)
    defaults = Station(name="", host="", rank=0)
    out["stations"] = [
        {k: v for k, v in vars(s).items() if k in ("name", "host", "rank") or (v is not None and v != getattr(defaults, k))}
        for s in cfg.stations
    ]
    return out


def save_config(cfg: Config | dict[str, Any], path: str | os.PathLike) -> None:
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    Path(path).write_text(tomli_w.dumps(data))
