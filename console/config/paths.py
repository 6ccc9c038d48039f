"""Where config files are looked for and how big they may be."""

from __future__ import annotations

import os
from pathlib import Path

from console.safe_files import KIB, MIB

CONFIG_NAME = "dgx-console.toml"
MAX_CONFIG_BYTES = 1 * MIB  # a config or profile is a small hand-written file
MAX_KEY_FILE_BYTES = 64 * KIB


def xdg_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dgx-console" / "config.toml"


def xdg_data_dir() -> Path:
    """``$XDG_DATA_HOME/dgx-console`` (default ``~/.local/share/dgx-console``): results, screenshots."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dgx-console"


def xdg_state_dir() -> Path:
    """``$XDG_STATE_HOME/dgx-console`` (default ``~/.local/state/dgx-console``): the incident ledger
    and its bundles (state that outlives a session, not worth a backup)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dgx-console"
