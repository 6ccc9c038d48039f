"""The workbench's memory between runs: the last report and the debug tries of this config, in
``$XDG_STATE_HOME/dgx-console/doctor/`` (the support bundle includes them). Secrets never get here:
reports carry redacted environments only."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from console.config import Config

MAX_TRIES = 20


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dgx-console" / "doctor"


def _key(config: Config) -> str:
    ident = config.path or (config.profile.name + "|" + ",".join(f"{s.name}@{s.host}" for s in config.stations))
    return hashlib.sha1(ident.encode()).hexdigest()[:12]


def path_for(config: Config) -> Path:
    return state_dir() / f"{_key(config)}.json"


def load(config: Config) -> dict[str, Any]:
    try:
        data = json.loads(path_for(config).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save(config: Config, data: dict[str, Any]) -> None:
    path = path_for(config)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)


def save_report(config: Config, report_dict: dict[str, Any]) -> None:
    data = load(config)
    data["report"] = {**report_dict, "saved_at": time.time()}
    _save(config, data)


def tries(config: Config) -> list[dict[str, Any]]:
    return list(load(config).get("tries") or [])


def add_try(config: Config, t) -> None:
    data = load(config)
    data["tries"] = (list(data.get("tries") or []) + [t.to_dict()])[-MAX_TRIES:]
    _save(config, data)


def next_try_number(config: Config) -> int:
    return max((int(t.get("try", 0)) for t in tries(config)), default=0) + 1
