"""TOML configuration -> frozen dataclasses.

Errors name the file, the line and the field path (``PATH:LINE: stations[1].port: ...``) so the
operator can fix the file without guessing; the CLI turns them into one line and exit code 2.

One module per job: ``schema`` (the dataclasses: the one description of every table), ``fields`` (what
is read from them: known keys, kinds, building, writing back), ``validate`` (value rules), ``errors``
(messages and lines), ``profiles``, ``load`` (parse + check), ``export`` (TOML form, masked views),
``paths`` (XDG, size limits), ``secrets`` (the one ``is_secret_name`` rule), ``envfile_import``.
Every public name is re-exported here: ``from console.config import X`` works for all of them.
"""

from __future__ import annotations

from console.config.errors import ConfigError
from console.config.export import (
    config_to_dict,
    masked_overrides,
    masker,
    save_config,
    secret_env_keys,
    secret_env_names,
    secret_values,
)
from console.config.load import field_error, find_config, load_config, parse_config
from console.config.paths import (
    CONFIG_NAME,
    MAX_CONFIG_BYTES,
    MAX_KEY_FILE_BYTES,
    xdg_config_path,
    xdg_data_dir,
)
from console.config.profiles import DEFAULT_PROFILE, ENGINES, builtin_profiles, load_profile
from console.config.schema import (
    ApiSettings,
    BenchRow,
    Config,
    GpuProfile,
    LinkProfile,
    Profile,
    Station,
    UiSettings,
    gpus_per_station,
    tensor_parallel_for,
    weights_per_gpu_gib,
)
from console.secrets import is_secret_name
from console.config.validate import (
    CONTAINER_NAME,
    DEVICE_NAME,
    ENV_NAME,
    HOST_NAME,
    MAX_TIMEOUT_S,
    NETDEV_NAME,
    STATION_NAME,
    USER_NAME,
    check_host,
    check_timeout,
    check_url,
)

__all__ = [
    "CONFIG_NAME", "CONTAINER_NAME", "DEFAULT_PROFILE", "DEVICE_NAME", "ENGINES", "ENV_NAME", "HOST_NAME",
    "MAX_CONFIG_BYTES", "MAX_KEY_FILE_BYTES", "MAX_TIMEOUT_S", "NETDEV_NAME", "STATION_NAME", "USER_NAME",
    "ApiSettings", "BenchRow", "Config", "ConfigError", "GpuProfile", "LinkProfile", "Profile", "Station",
    "UiSettings", "builtin_profiles", "check_host", "check_timeout", "check_url", "config_to_dict",
    "field_error", "find_config", "gpus_per_station", "is_secret_name", "load_config", "load_profile",
    "masked_overrides", "masker", "parse_config", "save_config", "secret_env_keys", "secret_env_names", "secret_values",
    "tensor_parallel_for", "weights_per_gpu_gib", "xdg_config_path", "xdg_data_dir",
]
