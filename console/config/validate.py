"""The shape rules of config values, checked on load so nothing odd reaches a command line, a message or
the screen. Each rule is ``value -> None`` when the value is fine, else the message (the loader adds the
file, the line and the field). The schema attaches them to its fields (``setting(check=...)``).
"""

from __future__ import annotations

import ipaddress
import math
import re
import urllib.parse
from collections.abc import Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from console.config.errors import NUMBER, check_type, key_path, one, show
from console.sanitize import is_clean

MAX_TIMEOUT_S = 86400.0

STATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}")
CONTAINER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}")  # docker's own rule (+ a length)
NETDEV_NAME = re.compile(r"[^/:\s]{1,15}")  # the kernel's rule (dev_valid_name), IFNAMSIZ - 1
DEVICE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # RDMA devices: mlx5_0, rocep1s0f1
HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.%:-]{0,252}")  # a name, an alias, an address
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")

Check = Callable[[Any], str | None]

#: Whether a rule may ask a library for its verdict (httpx on a URL): the TUI loads its config with this
#: off and asks after its first frame (``console.config.load.library_checks``), since importing httpx
#: and asyncssh is ~0.3 s of a ~1 s start; every other command asks at load.
LIBRARY_VERDICTS: ContextVar[bool] = ContextVar("config_library_verdicts", default=True)


def in_range(lo: int, hi: int) -> Check:
    """``must be >= lo`` / ``must be <= hi``."""
    def check(value: Any) -> str | None:
        if value < lo:
            return f"must be >= {lo}"
        return f"must be <= {hi}" if value > hi else None
    return check


def window_seconds(value: Any) -> str | None:
    """A progress window: a finite number of seconds, 5 to 3600."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"must be a number of seconds, got {value!r}"
    return "must be >= 5 (seconds)" if value < 5 else "must be <= 3600 (seconds)" if value > 3600 else None


def check_url(url: str) -> str | None:
    """Why ``url`` is no usable API base URL (None when it is): http(s), a host, a port 1-65535."""
    if not isinstance(url, str) or not url or not is_clean(url) or any(c.isspace() for c in url):
        return "must be an http:// or https:// URL without spaces or control characters"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises ValueError when out of range or not a number
    except ValueError as exc:
        return f"is not a valid URL ({one(exc)})"
    if parts.scheme not in ("http", "https"):
        return "must start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if port is not None and not 1 <= port <= 65535:
        return f"port must be 1..65535, got {port}"
    if not LIBRARY_VERDICTS.get():
        return None
    try:
        import httpx

        httpx.URL(url)
    except Exception as exc:  # noqa: BLE001 - httpx's own verdict, whatever it raises
        return f"is not a valid URL ({one(exc)})"
    return None


def check_timeout(value: Any) -> str | None:
    """Why ``value`` is no usable timeout in seconds (finite, > 0, at most a day)."""
    if not check_type(value, NUMBER) or not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        return f"must be a number of seconds > 0 and <= {MAX_TIMEOUT_S:g}, got {show(value)}"
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


def check_path(value: str) -> str | None:
    """Why ``value`` is no usable path (control characters, an unknown ``~user``)."""
    if not value or not is_clean(value) or "\n" in value or "\t" in value:
        return "must be a path without control characters"
    try:
        Path(value).expanduser()
    except RuntimeError:
        return f"{show(value)}: no such user's home directory"
    return None


# ---------------------------------------------------------------- [[stations]] fields


def station_name(value: str) -> str | None:
    if not STATION_NAME.fullmatch(value):
        return f"must be 1-32 letters, digits, '.', '_' or '-' (starting with a letter or digit), got {show(value)}"
    return None


def ssh_host(value: str) -> str | None:
    problem = check_host(value)
    return f"{problem}, got {show(value)}" if problem else None


def user_name(value: str) -> str | None:
    if not USER_NAME.fullmatch(value):
        return f"must be a user name (letters, digits, . _ @ -; not starting with '-'), got {show(value)}"
    return None


def container_name(value: str) -> str | None:
    if not CONTAINER_NAME.fullmatch(value):
        return f"must match [a-zA-Z0-9][a-zA-Z0-9_.-]* (docker's rule for names), got {show(value)}"
    return None


def netdev_name(value: str) -> str | None:
    if value and (not NETDEV_NAME.fullmatch(value) or value in (".", "..") or value.startswith("-")
                  or not value.isprintable()):
        return f"must be a network interface name (at most 15 characters, no '/', ':' or spaces), got {show(value)}"
    return None


def rdma_device_name(value: str) -> str | None:
    if value and not DEVICE_NAME.fullmatch(value):
        return f"must be an RDMA device name like mlx5_0 (letters, digits, . _ -), got {show(value)}"
    return None


def ip_address(value: str) -> str | None:
    if value:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            return f"must be an IPv4 or IPv6 address, got {show(value)}"
    return None


def gpu_name(value: str) -> str | None:
    if not value.strip() or not value.isprintable() or value.startswith("-"):
        return f"must be a GPU name or UUID, got {show(value)}"
    return None


def station_rank(value: int) -> str | None:
    if not 0 <= value < 4096:
        return "must be >= 0" if value < 0 else "must be < 4096"
    return None


def port_number(value: int) -> str | None:
    return None if 1 <= value <= 65535 else f"must be 1..65535, got {value}"


# ---------------------------------------------------------------- [api] and [ui] fields


def api_url(value: str) -> str | None:
    problem = check_url(value)
    return f"{problem}, got {show(value)}" if problem else None


def env_name(value: str) -> str | None:
    return None if ENV_NAME.fullmatch(value) else f"must be an environment variable name, got {show(value)}"


def theme_name(value: str) -> str | None:
    if not value or not is_clean(value) or len(value) > 64:
        return f"must be a theme name, got {show(value)}"
    return None


# ---------------------------------------------------------------- [overrides]

_SCALAR = (str, int, float, bool)


def overrides_problem(o: dict[str, Any]) -> tuple[str, str] | None:
    """(field, message) for override values the container command cannot take safely."""
    extra = o.get("extra_env", {})
    if not isinstance(extra, dict):
        return "extra_env", "must be a table of NAME = value"
    for name, value in extra.items():
        if not ENV_NAME.fullmatch(name):
            return f"extra_env.{key_path(name)}", f"must be an environment variable name, got {show(name)}"
        if not isinstance(value, _SCALAR) or (isinstance(value, float) and not math.isfinite(value)):
            return f"extra_env.{name}", f"must be a string or a number, got {show(value)}"
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
            return key, f"must be a non-empty word not starting with '-', got {show(value)}"
    gid = o.get("nccl_ib_gid_index")
    if gid is not None and (not check_type(gid, int) or not 0 <= gid <= 255):
        return "nccl_ib_gid_index", f"must be an integer 0..255, got {show(gid)}"
    if "cap_ptrace" in o and not isinstance(o["cap_ptrace"], bool):
        return "cap_ptrace", f"must be true or false, got {show(o['cap_ptrace'])}"
    fr = o.get("flight_recorder")
    if fr is not None and (not check_type(fr, int) or not 0 <= fr <= 1_000_000):
        return "flight_recorder", f"must be an integer 0..1000000 (collectives kept per rank; 0 = off), got {show(fr)}"
    args = o.get("extra_args", [])
    if not isinstance(args, list) or not all(isinstance(a, _SCALAR) for a in args):
        return "extra_args", "must be a list of strings"
    for key, value in o.items():
        if isinstance(value, float) and not math.isfinite(value):
            return key_path(key), f"must be a finite number, got {value}"
        if isinstance(value, str) and ("\x00" in value or not is_clean(value)):
            return key_path(key), "must not contain control characters"
        if not is_clean(key):
            return key_path(key), "must be a flag name without control characters"
    return None
