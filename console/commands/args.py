"""What the subcommands share for their arguments: the config flags and checks of seconds, URLs and
API keys. Bad values are a ``UsageError`` (one line, exit 2). Kept apart from ``console.cli`` so the
subcommands never import the entry point that discovers them."""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from console.errors import UsageError
from console.sanitize import one_line

__all__ = ["UsageError", "add_config_args", "check_api_key_arg", "check_common", "check_fingerprint_arg",
           "check_count", "check_file_arg", "check_seconds", "check_url_arg"]

# What ``ssh-keygen -lf`` prints for a key: SHA256: and 43 characters of unpadded base64.
_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")


def check_fingerprint_arg(value: str | None, flag: str = "--replace-host-key") -> None:
    """A host-key fingerprint as ``ssh-keygen -lf`` prints it (``SHA256:`` + 43 base64 characters)."""
    if value is not None and not _FINGERPRINT.fullmatch(value.strip()):
        raise UsageError(f"{flag} must be a fingerprint as ssh-keygen -lf prints it on the station "
                         f"(SHA256: and 43 base64 characters), got {one_line(repr(value), 80)}")


def check_common(args: argparse.Namespace) -> None:
    """The checks every subcommand's shared flags get before it runs (``cli.main``)."""
    check_fingerprint_arg(getattr(args, "replace_host_key", None))


def check_file_arg(name: str) -> Path:
    """A file the operator named, as a regular file; what the OS refuses to look at (a name too long,
    a NUL in it, no permission) is the same one line as a missing file, never a traceback."""
    try:
        p = Path(name)
        if not p.exists():
            raise UsageError(f"{one_line(name, 200)}: no such file")
        if not p.is_file():
            raise UsageError(f"{one_line(name, 200)}: not a regular file (a directory, FIFO or device)")
    except OSError as exc:
        raise UsageError(f"{one_line(name, 200)}: cannot read: {exc.strerror}") from None
    except ValueError:  # an embedded NUL in the name
        raise UsageError(f"{one_line(repr(name), 100)}: not a valid path") from None
    return p


def check_seconds(flag: str, value: float, limit: float = 86400.0) -> None:
    """A timeout flag: a finite number of seconds, > 0 (``nan``, ``inf``, ``0``, ``-1`` are refused)."""
    if not math.isfinite(value) or not 0 < value <= limit:
        raise UsageError(f"{flag} must be a number of seconds > 0 and <= {limit:g}, got {value:g}")


def check_count(flag: str, value: int | None, lo: int = 1, hi: int = 1_000_000) -> None:
    """A count flag (requests, tokens, lines): an integer in ``lo..hi`` (a 1e20-request sweep is a typo)."""
    if value is not None and not lo <= value <= hi:
        raise UsageError(f"{flag} must be an integer {lo:,}..{hi:,}, got {value:,}")


def check_url_arg(url: str, flag: str = "--url") -> None:
    """An API base URL flag: http(s), a host, a port 1-65535 (``http://[::1`` is a usage error)."""
    from console.config import check_url

    problem = check_url(url)
    if problem:
        raise UsageError(f"{flag} {problem} (got {one_line(repr(url), 100)})")


def check_api_key_arg(key: str | None) -> None:
    """``--api-key``: what an HTTP header can carry (the value itself is never echoed)."""
    from console.serving.client import valid_api_key

    if key is not None and not valid_api_key(key):
        raise UsageError("--api-key must be printable ASCII without spaces (the key is not shown)")


def add_config_args(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``--config`` and ``--trust-host-key`` work before or after the subcommand: on subparsers the
    default is SUPPRESS so an absent sub-option never overwrites the top-level value."""
    default = None if top else argparse.SUPPRESS
    p.add_argument("--config", metavar="PATH", default=default,
                   help="config file (default ./dgx-console.toml, then XDG dir)")
    p.add_argument("--trust-host-key", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="add an unknown station host key to known_hosts after printing its fingerprint")
