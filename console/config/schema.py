"""The config and profile schema, written once: each frozen dataclass is a TOML table.

Its fields are the keys the table knows, their type hints the TOML kinds, a field without a default a
required key, ``setting(check=...)`` the rule a value must follow (``console/config/validate.py``).
The loaders (``load.py``, ``profiles.py``) and ``config_to_dict`` (``export.py``) read all of that
from here (``fields.py``): a new field is one edit here, and one line in docs/configuration.md's config example.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, TypedDict

from console.config import validate as v
from console.config.alerts import AlertSettings
from console.config.errors import ConfigError
from console.config.fields import setting
from console.config.paths import MAX_KEY_FILE_BYTES
from console.secrets import mask_url
from console.safe_files import FileProblem, expand, read_text
from console.sanitize import is_clean

# ---------------------------------------------------------------- profiles (console/profiles/*.toml)


@dataclass(frozen=True, kw_only=True)
class GpuProfile:
    name: str
    unified_memory: bool = False
    memory_total_mib: int
    weights_gib: float
    loaded_gib: float
    cold_load_s: float = 300.0
    extra_display_gpu: str | None = None


@dataclass(frozen=True)
class LinkProfile:
    speed_mbps: int
    mtu: int
    rails: tuple[str, ...] = ()
    gpudirect: bool = False
    rdma_host_gbps: tuple[float, float] = (0.0, 0.0)
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


class ReferenceMethod(TypedDict, total=False):
    """How ``reference_bench`` was measured (bench comparability); a plain dict at run time."""

    source: str
    prompts: str
    max_tokens: int
    effort: str


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    description: str = ""
    engine: str  # "vllm" | "sglang"
    model: str
    served_model_name: str = ""  # the loader makes it the model's name when the file has none
    model_dir: str = ""
    architecture: str = ""
    quantization: str = ""
    checkpoint_gb: float = 0.0
    image: str
    engine_version: str = ""
    api_port: int = 8000
    nnodes: int = 2
    tensor_parallel: int = 2
    gpu: GpuProfile
    link: LinkProfile
    serving: dict[str, Any] = field(default_factory=dict)
    reference_bench: tuple[BenchRow, ...] = ()
    reference_method: ReferenceMethod = field(default_factory=dict)  # type: ignore[assignment]


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


# ---------------------------------------------------------------- the config file (dgx-console.toml)


@dataclass(frozen=True)
class Station:
    name: str = setting(check=v.station_name)
    host: str = setting(check=v.ssh_host)  # hostname, IP or ~/.ssh/config alias
    rank: int = setting(check=v.station_rank)
    user: str | None = setting(None, check=v.user_name)
    port: int | None = setting(None, check=v.port_number)
    rail_netdev: str = setting("", check=v.netdev_name)
    rdma_device: str = setting("", check=v.rdma_device_name)
    rail_ip: str = setting("", check=v.ip_address)
    container: str = setting("glm53", check=v.container_name)
    known_hosts: str | None = setting(None, check=v.check_path)  # None: ~/.ssh/known_hosts (never "no checking")
    identity_file: str | None = setting(None, check=v.check_path)
    local: bool = False  # the console runs on this station: no SSH
    gpu: str | None = setting(None, check=v.gpu_name)  # name or UUID of the serving GPU (a Station also has a display GPU)
    env_file: str = setting("~/glm53.env", check=v.check_path)
    # the operator's own launch script on this station (over the top-level one)
    launch_script: str | None = setting(None, check=v.check_path)

    @property
    def is_head(self) -> bool:
        return self.rank == 0

    @property
    def role(self) -> str:
        return "API host" if self.rank == 0 else "worker"


@dataclass(frozen=True)
class ApiSettings:
    url: str | None = setting(None, check=v.api_url)  # default http://<head host>:<profile api_port>
    timeout_s: float = setting(5.0, check=v.check_timeout)
    api_key_env: str | None = setting(None, check=v.env_name)
    api_key_file: str | None = setting(None, check=v.check_path)


@dataclass(frozen=True)
class UiSettings:
    refresh_ms: int = setting(1000, check=v.in_range(100, 60_000))
    log_lines: int = setting(5000, check=v.in_range(100, 1_000_000))
    theme: str = setting("dgx-dark", check=v.theme_name)
    # how long nothing may move (no token with requests running, no start-up line with the
    # GPUs busy) before a station reads wedged or stuck
    progress_window_s: float = setting(30.0, check=v.window_seconds)
    # unified memory (GB10): MemAvailable under this during weight loading or CUDA-graph capture is
    # warned on the pane (the box can lock up until a power cycle when it runs out)
    memory_floor_mib: int = setting(6144, check=v.in_range(512, 65_536))


@dataclass(frozen=True)
class IncidentSettings:
    """``[incidents]``: the flight recorder (console/incidents/). ``capture``: take the hang evidence
    on its own when progress turns wedged / stuck (read-only); the ledger keeps at most
    ``max_incidents`` rows and ``max_bundle_mib`` of bundles (the oldest bundles go first)."""

    capture: bool = True
    max_incidents: int = setting(500, check=v.in_range(10, 100_000))
    max_bundle_mib: int = setting(2048, check=v.in_range(16, 1_048_576))
    capture_deadline_s: float = setting(60.0, check=v.window_seconds)


RECOVER_KINDS = ("wedge", "stuck", "out-of-step", "rank-death")  # the incident kinds (incidents/detector.py)


def recover_kinds(value: Any) -> str | None:
    """``[recover] on``: incident kinds, each known, none twice."""
    if not isinstance(value, tuple | list) or not all(isinstance(k, str) for k in value):
        return f"must be a list of incident kinds ({', '.join(RECOVER_KINDS)})"
    unknown = [k for k in value if k not in RECOVER_KINDS]
    if unknown:
        return f"unknown incident kind {unknown[0]!r} (known: {', '.join(RECOVER_KINDS)})"
    return "names a kind twice" if len(set(value)) != len(value) else None


@dataclass(frozen=True)
class RecoverSettings:
    """``[recover]``: capture-then-restart on the chosen incident kinds (console/incidents/recover.py),
    off unless ``on`` names a kind. At most ``max_per_hour`` restarts in any hour; after each one
    the next waits ``backoff_s`` doubled per restart already made that hour."""

    on: tuple[str, ...] = setting((), check=recover_kinds)
    max_per_hour: int = setting(2, check=v.in_range(1, 12))
    backoff_s: int = setting(120, check=v.in_range(0, 3600))


@dataclass(frozen=True)
class Config:
    path: str | None = setting(toml=False)
    profile: Profile = setting(dump=lambda p: p.name)
    stations: tuple[Station, ...] = setting()
    api: ApiSettings = field(default_factory=ApiSettings)
    ui: UiSettings = field(default_factory=UiSettings)
    incidents: IncidentSettings = field(default_factory=IncidentSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)  # [alerts] (console/config/alerts.py)
    recover: RecoverSettings = field(default_factory=RecoverSettings)
    overrides: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False  # stations are the built-in simulator (DEMO marker)
    keys: dict[str, str] = field(default_factory=dict)  # [keys]: binding id -> keys ("f5" or "ctrl+r,f5")
    connect_timeout_s: float = setting(10.0, always=True)
    command_timeout_s: float = setting(30.0, always=True)
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

    def api_url_shown(self) -> str:
        """``api_url()`` as it may be printed: a password in its userinfo as ``***``."""
        return mask_url(self.api_url())

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
