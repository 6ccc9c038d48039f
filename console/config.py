"""TOML configuration -> frozen dataclasses.

Errors name the file, the line and the field path (``PATH:LINE: stations[1].port: ...``) so the
operator can fix the file without guessing; the CLI turns them into one line and exit code 2.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

DEFAULT_PROFILE = "glm53-nvfp4-2x-gb300-vllm"
CONFIG_NAME = "dgx-console.toml"


class ConfigError(Exception):
    """A config problem reported as ``PATH:LINE: field.path: message``."""

    def __init__(self, path: str | os.PathLike | None, line: int | None, field_path: str, message: str):
        self.path = str(path) if path else "<config>"
        self.line = line
        self.field_path = field_path
        self.message = message
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


def builtin_profiles() -> list[str]:
    files = resources.files("console.profiles")
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def _profile_from_dict(d: dict[str, Any], src: str) -> Profile:
    try:
        g, lk = d["gpu"], d["link"]
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
                rails=tuple(lk.get("rails", ())),
                gpudirect=bool(lk.get("gpudirect", False)),
                rdma_host_gbps=tuple(lk.get("rdma_host_gbps", (0.0, 0.0))),  # type: ignore[arg-type]
                roce_tos=lk.get("roce_tos"),
                nccl_busbw_gbytes=float(lk["nccl_busbw_gbytes"]) if "nccl_busbw_gbytes" in lk else None,
            ),
            serving=dict(d.get("serving", {})),
            reference_bench=tuple(BenchRow(**row) for row in d.get("reference_bench", [])),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(src, None, "profile", f"invalid profile: {exc!r}") from None


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a profile TOML file by path."""
    if name_or_path.endswith(".toml") or os.sep in name_or_path:
        p = Path(name_or_path).expanduser()
        try:
            data = tomllib.loads(p.read_text())
        except OSError as exc:
            raise ConfigError(p, None, "profile", f"cannot read profile: {exc.strerror}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(p, _toml_error_line(exc), "", f"invalid TOML: {exc}") from None
        return _profile_from_dict(data, str(p))
    files = resources.files("console.profiles")
    res = files / f"{name_or_path}.toml"
    if not res.is_file():
        known = ", ".join(builtin_profiles())
        raise ConfigError(None, None, "profile", f"unknown profile {name_or_path!r} (built-in: {known})")
    return _profile_from_dict(tomllib.loads(res.read_text()), name_or_path)


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
    connect_timeout_s: float = 10.0
    command_timeout_s: float = 30.0
    launch_script: str | None = None  # launch runs this script on every station instead of its own docker run

    @property
    def head(self) -> Station:
        return min(self.stations, key=lambda s: s.rank)

    @property
    def workers(self) -> list[Station]:
        return sorted((s for s in self.stations if s.rank != self.head.rank), key=lambda s: s.rank)

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
                return Path(self.api.api_key_file).expanduser().read_text().strip() or None
            except OSError:
                return None
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
               "launch_script"}


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
    return {str: "string", int: "integer", bool: "true or false", float: "number"}[want]


def parse_config(text: str, path: str | None = None) -> Config:
    """Parse and validate config text; raises ConfigError with the line of the culprit."""
    loc = _Locator(text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc).split(" (at ")[0]
        raise ConfigError(path, _toml_error_line(exc), "", f"invalid TOML: {msg}") from None

    def err(table: str | None, index: int | None, key: str | None, fpath: str, msg: str) -> ConfigError:
        return ConfigError(path, loc.line_of(table, index, key), fpath, msg)

    for key in data:
        if key not in _TOP_FIELDS:
            raise err(None, None, key, key, f"unknown field (known: {', '.join(sorted(_TOP_FIELDS))})")

    profile_name = data.get("profile", DEFAULT_PROFILE)
    if not isinstance(profile_name, str):
        raise err(None, None, "profile", "profile", "must be a string (a built-in profile name or a .toml path)")
    try:
        if path and (profile_name.endswith(".toml") or os.sep in profile_name):
            profile_name = str((Path(path).parent / Path(profile_name).expanduser()).resolve())
        profile = load_profile(profile_name)
    except ConfigError as exc:
        raise err(None, None, "profile", "profile", exc.message) from None

    raw_stations = data.get("stations")
    if raw_stations is None:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")
    if not isinstance(raw_stations, list) or not all(isinstance(s, dict) for s in raw_stations):
        raise err(None, None, "stations", "stations", "must be an array of tables ([[stations]])")
    if not raw_stations:
        raise ConfigError(path, None, "stations", "at least one [[stations]] table is required")

    stations: list[Station] = []
    for i, raw in enumerate(raw_stations):
        fp = f"stations[{i}]"
        for key, value in raw.items():
            if key not in _STATION_FIELDS:
                raise err("stations", i, key, f"{fp}.{key}",
                          f"unknown field (known: {', '.join(sorted(_STATION_FIELDS))})")
            if not _check_type(value, _STATION_FIELDS[key]):
                raise err("stations", i, key, f"{fp}.{key}", f"must be {_type_name(_STATION_FIELDS[key])}, "
                          f"got {value!r}")
        for key in ("name", "host", "rank"):
            if key not in raw and not (key == "host" and raw.get("local")):
                raise err("stations", i, None, f"{fp}.{key}", "required field is missing")
        if "port" in raw and not 1 <= raw["port"] <= 65535:
            raise err("stations", i, "port", f"{fp}.port", f"must be 1..65535, got {raw['port']}")
        if raw["rank"] < 0:
            raise err("stations", i, "rank", f"{fp}.rank", "must be >= 0")
        if not raw["name"].strip():
            raise err("stations", i, "name", f"{fp}.name", "must not be empty")
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
                raise err(table, None, key, f"{table}.{key}", f"unknown field (known: {', '.join(sorted(fields))})")
            if not _check_type(value, fields[key]):
                raise err(table, None, key, f"{table}.{key}", f"must be {_type_name(fields[key])}, got {value!r}")
    ui = UiSettings(**ui_raw)
    if ui.refresh_ms < 100:
        raise err("ui", None, "refresh_ms", "ui.refresh_ms", "must be >= 100")
    if ui.log_lines < 100:
        raise err("ui", None, "log_lines", "ui.log_lines", "must be >= 100")

    overrides = data.get("overrides", {})
    if not isinstance(overrides, dict):
        raise err(None, None, "overrides", "overrides", "must be a table")
    for key in ("connect_timeout_s", "command_timeout_s"):
        if key in data and (not _check_type(data[key], (int, float)) or data[key] <= 0):
            raise err(None, None, key, key, "must be a positive number")
    simulated = data.get("simulated", False)
    if not isinstance(simulated, bool):
        raise err(None, None, "simulated", "simulated", "must be true or false")
    launch_script = data.get("launch_script")
    if launch_script is not None and (not isinstance(launch_script, str) or not launch_script.strip()):
        raise err(None, None, "launch_script", "launch_script", "must be a path on the stations (e.g. ~/launch-glm53.sh)")

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
    )


def xdg_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dgx-console" / "config.toml"


def find_config(explicit: str | None) -> Path:
    """``--config``, then ./dgx-console.toml, then the XDG config dir."""
    if explicit:
        return Path(explicit).expanduser()
    for cand in (Path.cwd() / CONFIG_NAME, xdg_config_path()):
        if cand.is_file():
            return cand
    raise ConfigError(None, None, "",
                      f"no config found (tried --config, ./{CONFIG_NAME}, {xdg_config_path()}); "
                      "try 'dgx-console demo' or 'dgx-console sim --write-config lab.toml'")


def load_config(explicit: str | None = None) -> Config:
    path = find_config(explicit)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(path, None, "", "file not found") from None
    except OSError as exc:
        raise ConfigError(path, None, "", f"cannot read: {exc.strerror}") from None
    return parse_config(text, str(path))


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
    defaults = Station(name="", host="", rank=0)
    out["stations"] = [
        {k: v for k, v in vars(s).items() if k in ("name", "host", "rank") or (v is not None and v != getattr(defaults, k))}
        for s in cfg.stations
    ]
    return out


def save_config(cfg: Config | dict[str, Any], path: str | os.PathLike) -> None:
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    Path(path).write_text(tomli_w.dumps(data))
