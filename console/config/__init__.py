"""TOML configuration -> frozen dataclasses.

Errors name the file, the line and the field path (``PATH:LINE: stations[1].port: ...``) so the
operator can fix the file without guessing; the CLI turns them into one line and exit code 2.

One module per job: ``schema`` (the dataclasses: the one description of every table), ``fields`` (what
is read from them: known keys, kinds, building, writing back), ``validate`` (value rules), ``errors``
(messages and lines), ``profiles``, ``load`` (parse + check), ``export`` (TOML form, masked views),
``paths`` (XDG, size limits), ``envfile_import``; the one ``is_secret_name`` rule is ``console.secrets``
(a leaf the parsers below the config use too), re-exported here.
Every public name is re-exported here: ``from console.config import X`` works for all of them; each
submodule loads on the first use of one of its names (``console.lazy.lazy_exports``), so the simulator's
commands that need only the profile do not load the whole config.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from console.lazy import lazy_exports

if TYPE_CHECKING:  # what a type checker reads (it cannot see through __getattr__); a test keeps it equal
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
    from console.config.load import field_error, find_config, library_checks, load_config, parse_config
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
    from console.secrets import is_secret_name

__getattr__, __all__ = lazy_exports(__name__, {
    "errors": ("ConfigError",),
    "export": ("config_to_dict", "masked_overrides", "masker", "save_config", "secret_env_keys",
               "secret_env_names", "secret_values"),
    "load": ("field_error", "find_config", "library_checks", "load_config", "parse_config"),
    "paths": ("CONFIG_NAME", "MAX_CONFIG_BYTES", "MAX_KEY_FILE_BYTES", "xdg_config_path", "xdg_data_dir"),
    "profiles": ("DEFAULT_PROFILE", "ENGINES", "builtin_profiles", "load_profile"),
    "schema": ("ApiSettings", "BenchRow", "Config", "GpuProfile", "LinkProfile", "Profile", "Station",
               "UiSettings", "gpus_per_station", "tensor_parallel_for", "weights_per_gpu_gib"),
    "validate": ("CONTAINER_NAME", "DEVICE_NAME", "ENV_NAME", "HOST_NAME", "MAX_TIMEOUT_S", "NETDEV_NAME",
                 "STATION_NAME", "USER_NAME", "check_host", "check_timeout", "check_url"),
    "console.secrets": ("is_secret_name",),
})
