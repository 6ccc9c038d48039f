"""What leaves a loaded config: its TOML form (derived from the schema), the file, and the views with
secret values masked (bundles, ``--json``, previews)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tomli_w

from console.config.fields import to_toml
from console.config.schema import Config
from console.config.secrets import MASK, is_secret_name, masked_env


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """The TOML-able form of a config (no secrets are ever part of it): every field that is set and not
    at its default, the profile by name."""
    return to_toml(cfg)


def save_config(cfg: Config | dict[str, Any], path: str | os.PathLike) -> None:
    data = cfg if isinstance(cfg, dict) else config_to_dict(cfg)
    Path(path).write_text(tomli_w.dumps(data))


def secret_env_names(cfg: Config) -> tuple[str, ...]:
    """``overrides.secret_env`` (names the operator marks secret beyond the name rule)."""
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
        out["extra_env"] = masked_env(extra, secret_env_names(cfg), MASK)
    return out
