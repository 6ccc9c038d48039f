"""What leaves a loaded config: its TOML form (derived from the schema), the file, and the views with
secret values masked (bundles, ``--json``, previews)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import tomli_w

from console.config.fields import to_toml
from console.config.schema import Config
from console.secrets import (
    MASK,
    is_secret_name,
    is_secret_value,
    masked_env,
    sink_url_secrets,
    text_masker,
    url_secrets,
)


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


def secret_env_keys(cfg: Config) -> list[str]:
    """Names in ``[overrides.extra_env]`` whose value is secret: by name (the rule, ``secret_env``) or
    by value (a URL with credentials). Their values travel on stdin, never in an argv."""
    listed = secret_env_names(cfg)
    return [str(k) for k, v in (cfg.overrides.get("extra_env") or {}).items()
            if is_secret_name(str(k), listed) or is_secret_value(v)]


def secret_values(cfg: Config) -> list[str]:
    """Every secret value the config can reach (extra_env secrets, the API key, the password in a URL's
    userinfo, the alert sinks' URLs): logs, previews and bundles mask each one wherever it appears."""
    extra = cfg.overrides.get("extra_env") or {}
    out = [str(extra[k]) for k in secret_env_keys(cfg) if str(extra[k])]
    for v in extra.values():
        out += url_secrets(str(v))
    out += url_secrets(cfg.api.url or "")
    for sink in (cfg.alerts.webhook, cfg.alerts.ntfy):  # an alert sink's URL is a credential as a whole
        out += sink_url_secrets(sink or "")
    key = cfg.api_key()
    if key:
        out.append(key)
    return sorted(set(out), key=len, reverse=True)


def masker(cfg: Config | None):
    """The config's one masking function for outside text (see ``secrets.text_masker``)."""
    return text_masker(secret_values(cfg) if cfg is not None else ())


def masked_overrides(cfg: Config) -> dict[str, Any]:
    """``cfg.overrides`` with every secret extra_env value as ``***`` (for text, JSON and bundles)."""
    out = dict(cfg.overrides)
    extra = out.get("extra_env")
    if isinstance(extra, dict):
        out["extra_env"] = masked_env(extra, secret_env_names(cfg), MASK)
    return out
