"""``dgx-console`` entry point.

Each subcommand lives in ``console/commands/<name>.py`` and exposes ``register(subparsers)``
(which calls ``subparsers.add_parser`` and sets ``func``); this module only discovers them, so
adding a subcommand never touches this file. Usage and config errors print one line and exit 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from console import __version__
from console.config import ConfigError
from console.errors import UsageError

__all__ = ["UsageError", "add_config_args", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2 (argparse prints usage + message)
        sys.stderr.write(f"dgx-console: error: {message}\n")
        raise SystemExit(2)


def add_config_args(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``--config`` and ``--trust-host-key`` work before or after the subcommand: on subparsers the
    default is SUPPRESS so an absent sub-option never overwrites the top-level value."""
    default = None if top else argparse.SUPPRESS
    p.add_argument("--config", metavar="PATH", default=default,
                   help="config file (default ./dgx-console.toml, then XDG dir)")
    p.add_argument("--trust-host-key", action="store_true", default=False if top else argparse.SUPPRESS,
                   help="add an unknown station host key to known_hosts after printing its fingerprint")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dgx-console", description="Console for one model served across several GPU stations.")
    p.add_argument("--version", action="version", version=f"dgx-console {__version__}")
    add_config_args(p, top=True)
    p.add_argument("--theme", metavar="NAME", help="theme name (dgx-dark, dgx-light, or any Textual theme)")
    p.add_argument("--read-only", action="store_true", help="disable every action that changes a station")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import console.commands as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"console.commands.{mod.name}")
        register = getattr(module, "register", None)
        if register:
            register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        from console.commands._tui import run_tui

        args.func = run_tui
    try:
        return int(args.func(args) or 0)
    except ConfigError as exc:
        print(f"dgx-console: {exc}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"dgx-console: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dgx-console: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
